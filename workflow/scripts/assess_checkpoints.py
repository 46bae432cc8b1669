import json
from pathlib import Path

from shape_of_learning.health.assess import assess
from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import read_lock

with job_logging(snakemake):
    pins = [read_lock(path) for path in snakemake.input.pins]
    manifests = [json.loads(Path(path).read_text()) for path in snakemake.input.manifests]
    assess(pins, manifests, snakemake.config["health"]).to_parquet(snakemake.output[0], index=False)
