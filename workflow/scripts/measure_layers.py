import json
import logging
from pathlib import Path

import pandas as pd

from shape_of_learning import paths
from shape_of_learning.experiment.plan import layer_groups, layers_in_group
from shape_of_learning.logs import job_logging
from shape_of_learning.metrics.layer import measure_layer
from shape_of_learning.models.hf_cache import evict_weights

with job_logging(snakemake):
    manifest = json.loads(Path(snakemake.input.manifest).read_text())
    tables = [
        measure_layer(
            Path(snakemake.input.shards, paths.shard_name(layer)),
            manifest,
            layer=layer,
            kind=snakemake.config["models"][snakemake.wildcards.model]["kind"],
            settings=snakemake.config["metrics"],
        )
        for layer in layers_in_group(snakemake.wildcards.layer_group)
    ]
    pd.concat(tables, ignore_index=True).to_parquet(snakemake.output[0], index=False)
    # the checkpoint's weights leave the cache once nothing of the run reads them: after its extraction and every one
    # of its metrics jobs (on a cluster one group job, retried whole), by whichever of those finishes last
    model, checkpoint = snakemake.wildcards.model, snakemake.wildcards.checkpoint
    layers = snakemake.config["models"][model]["layers"]
    groups = layer_groups(layers, snakemake.config["metrics"]["layers_per_job"])
    if snakemake.config["extraction"]["evict_weights"] and all(
        Path(paths.layer_metrics(model, checkpoint, group)).exists() for group in groups
    ):
        if readers := manifest.get("weights_read_after_extraction"):
            logging.getLogger("shape_of_learning").info("weights kept in the cache for %s", ", ".join(readers))
        else:
            evict_weights(manifest, keep=manifest.get("weights_cached_before", ()))
