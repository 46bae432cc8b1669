import pandas as pd

from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    summary = pd.read_parquet(snakemake.input[0])
    snakemake.params.figure.draw(summary, snakemake.output.png, snakemake.output.pdf)
