import json
from pathlib import Path

from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import pin_random_init, read_lock

with job_logging(snakemake):
    lock = pin_random_init(snakemake.params.checkpoint, read_lock(snakemake.input[0]))
    Path(snakemake.output[0]).write_text(json.dumps(lock, indent=2) + "\n")
