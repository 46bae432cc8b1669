import pandas as pd

from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    table = pd.concat([pd.read_parquet(path) for path in snakemake.input], ignore_index=True)
    snakemake.params.figure.draw(table, snakemake.output.png, snakemake.output.pdf)
