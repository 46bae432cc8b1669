from pathlib import Path

from shape_of_learning.corpus import clean_dump
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    clean_dump(Path(snakemake.input[0]), Path(snakemake.output.text), Path(snakemake.output.stats))
