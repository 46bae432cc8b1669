"""The results tables: one tidy row per (model, checkpoint, layer, metric, batch), and their summary over batches."""

import json
import logging
from collections import defaultdict
from pathlib import Path

import pandas as pd

from shape_of_learning.metrics import compute_metrics
from shape_of_learning.pinning import duplicate_checkpoints
from shape_of_learning.shards import read_shard

logger = logging.getLogger(__name__)

KEYS = ["model", "kind", "checkpoint", "step", "layer", "num_layers", "after_final_norm", "metric"]
VALUE_COLUMNS = [*KEYS, "batch", "value", "duplicates_removed"]
DUPLICATE_COLUMNS = ["identical_to", "shared_files"]


def layer_metrics_table(shard: Path, manifest: dict, *, layer: int, kind: str, settings: dict) -> pd.DataFrame:
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
        twonn_discard_fraction=settings["twonn_discard_fraction"],
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
        layer=layer,
        num_layers=manifest["layers"],
        # the last hidden state of a pre-LN decoder is taken after the final norm (figures.layer_average.final_norm)
        after_final_norm=layer == manifest["layers"] and bool(manifest["last_layer_after_final_norm"]),
    )
    table["duplicates_removed"] = table["batch"].map(dict(enumerate(duplicates)))
    return table[VALUE_COLUMNS]


def build_tables(metric_files, pin_files) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Concatenate per-layer results; flag checkpoints whose weights are another's; summarise over batches.

    `identical_to` names another checkpoint of the same model with bit-identical weight files (e.g. Pythia branches
    that upstream re-published with the final model's weights), `shared_files` the weight files a partial duplicate
    shares ("file=checkpoint; ..."), both from :func:`shape_of_learning.pinning.duplicate_checkpoints`. Every row is
    kept; the figures leave flagged checkpoints out (or mark them). Summary std is the sample standard deviation
    (ddof=1) over batches: NaN where a layer has a single batch.
    """
    values = pd.concat([pd.read_parquet(path) for path in metric_files], ignore_index=True)
    pins_by_model = defaultdict(list)
    for path in pin_files:
        pin = json.loads(Path(path).read_text())
        pins_by_model[pin["model"]].append(pin)
    duplicates = {(model, checkpoint): flags for model, pins in pins_by_model.items()
                  for checkpoint, flags in duplicate_checkpoints(pins).items()}
    keys = list(zip(values["model"], values["checkpoint"]))
    values["identical_to"] = [duplicates.get(key, {}).get("identical_to") for key in keys]
    values["shared_files"] = ["; ".join(f"{file}={other}" for file, other in shared.items()) or None
                              for shared in (duplicates.get(key, {}).get("shared_files", {}) for key in keys)]
    summary = (
        values.groupby([*KEYS, *DUPLICATE_COLUMNS], dropna=False, sort=False)["value"]
        .agg(mean="mean", std="std", batches="count")
        .reset_index()
        .sort_values(["model", "step", "checkpoint", "layer", "metric"], ignore_index=True)
    )
    return values, summary
