"""One layer's shard measured: every configured metric on the paper's batches, one tidy row per (metric, batch)."""

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from shape_of_learning.extraction.shards import read_shard

from .batches import compute_metrics
from .tables import LAYER_COLUMNS

logger = logging.getLogger(__name__)


def measure_layer(shard: Path, manifest: dict, *, layer: int, kind: str, settings: dict) -> pd.DataFrame:
    """Every configured metric of one layer's shard, one row per (metric, batch); a `degenerate` layer's rows have
    no value (NaN), and the tables, figures and claims leave them out."""
    vectors, _ = read_shard(shard)
    context = f"model {manifest['model']}, checkpoint {manifest['checkpoint']}, layer {layer}"
    if is_degenerate := degenerate(vectors):
        logger.warning(
            "%s: fewer than 3 distinct vectors (all zero, or all the same): no metric is measured, the "
            "layer is marked degenerate",
            context,
        )
        values = pd.DataFrame(
            [(metric, batch, float("nan")) for metric in settings["names"] for batch in range(settings["batches"])],
            columns=["metric", "batch", "value"],
        )
        return _with_keys(values, [0] * settings["batches"], manifest, layer, kind, is_degenerate)
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
        logger.warning(
            "%s: removed %d duplicate vectors before the neighbour search (per batch: %s)",
            context,
            sum(duplicates),
            duplicates,
        )
    return _with_keys(result.values, duplicates, manifest, layer, kind, False)


def degenerate(vectors: np.ndarray) -> bool:
    """Whether a layer's vectors are fewer than 3 distinct ones: all zero, all one vector, or two. No metric has a
    cloud to measure there (the ID estimators need 3 distinct vectors, the centred cosine 2 directions); a random-init
    network whose states vanish, or a stored dtype that rounds them to zero, gives such a layer."""
    first = vectors[0]
    other = (vectors != first).any(1)
    if not other.any():
        return True
    second = vectors[other.argmax()]
    return not (other & (vectors != second).any(1)).any()


def _with_keys(
    values: pd.DataFrame, duplicates: list[int], manifest: dict, layer: int, kind: str, is_degenerate: bool
) -> pd.DataFrame:
    """The rows (metric, batch, value) with the keys of `tables.LAYER_COLUMNS`."""
    table = values.assign(
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
        degenerate=is_degenerate,
    )
    table["duplicates_removed"] = table["batch"].map(dict(enumerate(duplicates)))
    return table[LAYER_COLUMNS]
