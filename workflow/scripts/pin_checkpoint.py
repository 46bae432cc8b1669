import json
from pathlib import Path

from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import pin

with job_logging(snakemake):
    lock = pin(snakemake.params.checkpoint, snakemake.config["models"][snakemake.wildcards.model]["weights"])
    Path(snakemake.output[0]).write_text(json.dumps(lock, indent=2) + "\n")
