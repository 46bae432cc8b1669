import json
from pathlib import Path

from shape_of_learning.jobs import job_logging
from shape_of_learning.pinning import pin

with job_logging(snakemake):
    Path(snakemake.output[0]).write_text(json.dumps(pin(snakemake.params.checkpoint), indent=2) + "\n")
