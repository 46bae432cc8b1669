from shape_of_learning.extraction.shards import read_parquet
from shape_of_learning.logs import job_logging
from shape_of_learning.metrics.tables import build_tables

with job_logging(snakemake):
    for path in snakemake.input.metrics:  # a truncated file is named, never read as a shorter table
        read_parquet(path, fix="delete it and rerun snakemake, which measures those layers again")
    values, summary, health = build_tables(snakemake.input.metrics, snakemake.input.health)
    values.to_parquet(snakemake.output.values, index=False)
    summary.to_parquet(snakemake.output.summary, index=False)
    summary.to_csv(snakemake.output.summary_csv, index=False)
    health.to_csv(snakemake.output.checkpoints, index=False)
