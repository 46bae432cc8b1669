from pathlib import Path

import pandas as pd

from shape_of_learning import paths
from shape_of_learning.rajaee_pilehvar.plan import parse_reference
from shape_of_learning.logs import job_logging
from shape_of_learning.models.download import read_cache_only
from shape_of_learning.models.pinning import read_lock
from shape_of_learning.rajaee_pilehvar.finetuning import finetune

with job_logging(snakemake):
    read_cache_only(snakemake.input.get("weights"))  # a download job put the base's files into the HF cache
    spec, base = snakemake.config["models"][snakemake.wildcards.model]["finetune"], snakemake.params.base
    lock = read_lock(snakemake.input.pin)
    dataset, split = parse_reference(spec["data"])
    pairs = pd.read_parquet(paths.dataset_split(dataset, split))
    finetune(
        base.location,
        pairs,
        Path(snakemake.output[0]),
        scale=snakemake.config["rajaee_pilehvar"]["datasets"][dataset]["scale"],
        revision=lock["commit_sha"],
        weights_format=lock.get("weights_format") or "safetensors",
        batch_size=spec["batch_size"],
        learning_rate=spec["learning_rate"],
        epochs=spec["epochs"],
        max_steps=spec["max_steps"],
        seed=spec["seed"],
        max_length=spec["max_length"],
        device=snakemake.config["rajaee_pilehvar"]["device"],
    )
