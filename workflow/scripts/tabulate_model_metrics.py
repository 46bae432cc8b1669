from shape_of_learning.extraction.shards import read_parquet
from shape_of_learning.logs import job_logging
from shape_of_learning.metrics.tables import model_tables

with job_logging(snakemake):
    for path in snakemake.input.metrics:  # a truncated file is named, never read as a shorter table
        read_parquet(path, fix="delete it and rerun snakemake, which measures those layers again")
    values, summary = model_tables(snakemake.input.metrics, snakemake.input.health or None)
    values.to_parquet(snakemake.output.values, index=False)
    summary.to_parquet(snakemake.output.summary, index=False)
