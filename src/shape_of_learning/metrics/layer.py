"""One layer's shard measured: every configured metric on the paper's batches, one tidy row per (metric, batch)."""

import logging
from pathlib import Path

import pandas as pd

from shape_of_learning.extraction.shards import read_shard

from .batches import compute_metrics
from .tables import LAYER_COLUMNS

logger = logging.getLogger(__name__)


def measure_layer(shard: Path, manifest: dict, *, layer: int, kind: str, settings: dict) -> pd.DataFrame:
    """Every configured metric of one layer's shard, one row per (metric, batch)."""
    vectors, _ = read_shard(shard)
    context = f"model {manifest['model']}, checkpoint {manifest['checkpoint']}, layer {layer}"
    result = compute_metrics(
        vectors,
        settings["names"],
        batch_size=settings["batch_size"],
        n_batches=settings["batches"],
        seed=settings["seed"],
        device=settings["device"],
        context=context,
        settings=settings["settings"],
    )
    duplicates = result.info["duplicates_removed"]["per_batch"]
    if any(duplicates):
        logger.warning("%s: removed %d duplicate vectors before the neighbour search (per batch: %s)",
                       context, sum(duplicates), duplicates)
    table = result.values.assign(
        model=manifest["model"],
        kind=kind,
        checkpoint=manifest["checkpoint"],
        step=manifest["step"],
        random_init=manifest.get("init_seed") is not None,  # a RandomInit's lock gives its manifest the seed
        dtype=manifest["dtype"],  # of the forward pass, as extraction resolved extraction.dtype
        layer=layer,
        num_layers=manifest["layers"],
        # the last hidden state of a pre-LN decoder is taken after the final norm (figures.layer_average.final_norm)
        after_final_norm=layer == manifest["layers"] and bool(manifest["last_layer_after_final_norm"]),
    )
    table["duplicates_removed"] = table["batch"].map(dict(enumerate(duplicates)))
    return table[LAYER_COLUMNS]
