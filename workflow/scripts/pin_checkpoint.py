import json
from pathlib import Path

from shape_of_learning.logs import job_logging
from shape_of_learning.models.checkpoints import RandomInit
from shape_of_learning.models.pinning import pin, pin_random_init, read_lock

with job_logging(snakemake):
    checkpoint = snakemake.params.checkpoint
    if isinstance(checkpoint, RandomInit):
        lock = pin_random_init(checkpoint, read_lock(snakemake.input.architecture))
    else:
        lock = pin(checkpoint, snakemake.config["models"][snakemake.wildcards.model]["weights"])
    Path(snakemake.output[0]).write_text(json.dumps(lock, indent=2) + "\n")
