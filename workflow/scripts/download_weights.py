import json
from pathlib import Path

from shape_of_learning.logs import job_logging
from shape_of_learning.models.download import download
from shape_of_learning.models.pinning import read_lock

with job_logging(snakemake):
    receipt = download(
        read_lock(snakemake.input.pin), snakemake.config["models"][snakemake.wildcards.model], snakemake.input.pin
    )
    receipt["read_after_extraction"] = list(snakemake.params.read_after_extraction)  # eviction leaves these weights
    Path(snakemake.output[0]).write_text(json.dumps(receipt, indent=2) + "\n")
