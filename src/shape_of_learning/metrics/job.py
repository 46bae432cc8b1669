"""The `measure_layers` job (workflow/rules/metrics.smk): the metrics of one checkpoint's layers from its shards, run
in a worker (shape_of_learning.worker); the last of a checkpoint's metrics jobs evicts its weights."""

import json
import logging
import os
from pathlib import Path

import pandas as pd

from shape_of_learning import paths
from shape_of_learning.metrics.layer import measure_layer
from shape_of_learning.models.hf_cache import evict_weights


def measure_layers(job) -> None:
    manifest = json.loads(Path(job.input.manifest).read_text())
    model = job.wildcards.model
    tables = [
        measure_layer(
            Path(job.input.shards, paths.shard_name(layer)),
            manifest,
            layer=layer,
            kind=job.config["models"][model]["kind"],
            settings=job.config["metrics"],
        )
        for layer in job.params.layers
    ]
    pd.concat(tables, ignore_index=True).to_parquet(job.output[0], index=False)
    # the checkpoint's weights leave the cache once nothing of the run reads them: after its extraction and every one
    # of its metrics jobs (on a cluster one group job, retried whole), by whichever of those finishes last
    if job.config["extraction"]["evict_weights"] and all(map(os.path.exists, job.params.checkpoint_metrics)):
        if readers := manifest.get("weights_read_after_extraction"):
            logging.getLogger("shape_of_learning").info("weights kept in the cache for %s", ", ".join(readers))
        else:
            evict_weights(manifest, keep=manifest.get("weights_cached_before", ()))
