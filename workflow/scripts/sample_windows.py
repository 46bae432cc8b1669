from pathlib import Path

from shape_of_learning.corpus import sample_windows, write_windows
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    spec = snakemake.config["windows"]
    windows = sample_windows(Path(snakemake.input[0]), spec["count"], spec["chars"], spec["seed"])
    write_windows(windows, Path(snakemake.output[0]))
