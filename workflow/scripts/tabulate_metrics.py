from shape_of_learning.logs import job_logging
from shape_of_learning.tables import build_tables

with job_logging(snakemake):
    values, summary = build_tables(snakemake.input.metrics, snakemake.input.pins)
    values.to_parquet(snakemake.output.values, index=False)
    summary.to_parquet(snakemake.output.summary, index=False)
    summary.to_csv(snakemake.output.summary_csv, index=False)
