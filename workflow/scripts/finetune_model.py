from pathlib import Path

import pandas as pd

from shape_of_learning.finetuning.siamese import finetune
from shape_of_learning.logs import job_logging
from shape_of_learning.pinning import read_lock

with job_logging(snakemake):
    spec, base = snakemake.params.spec, snakemake.params.base
    pin = read_lock(snakemake.input.pin)
    pairs = pd.read_parquet(Path(snakemake.input.pairs, f"{spec['data'].partition('/')[2]}.parquet"))
    finetune(base.location, pairs, Path(snakemake.output[0]), scale=snakemake.params.scale,
             revision=pin["commit_sha"], batch_size=spec["batch_size"], learning_rate=spec["learning_rate"],
             epochs=spec["epochs"], max_steps=spec["max_steps"], seed=spec["seed"], max_length=spec["max_length"],
             device=snakemake.config["finetuning"]["device"])  # from the config: a device changes no result
