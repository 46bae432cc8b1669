from shape_of_learning.logs import job_logging
from shape_of_learning.metrics.tables import combine_tables

with job_logging(snakemake):
    values, summary, health = combine_tables(snakemake.input.values, snakemake.input.summaries, snakemake.input.health)
    values.to_parquet(snakemake.output.values, index=False)
    summary.to_parquet(snakemake.output.summary, index=False)
    summary.to_csv(snakemake.output.summary_csv, index=False)
    health.to_csv(snakemake.output.checkpoints, index=False)
