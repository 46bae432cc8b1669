"""The results tables: one tidy row per (model, checkpoint, layer, metric, batch), and their summary over batches."""

import json
import logging
from collections import defaultdict
from pathlib import Path

import pandas as pd

from shape_of_learning.metrics import compute_metrics
from shape_of_learning.pinning import identical_checkpoints
from shape_of_learning.shards import read_shard

logger = logging.getLogger(__name__)

KEYS = ["model", "kind", "checkpoint", "step", "layer", "num_layers", "metric"]
VALUE_COLUMNS = [*KEYS, "batch", "value", "duplicates_removed"]


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
    )
    table["duplicates_removed"] = table["batch"].map(dict(enumerate(duplicates)))
    return table[VALUE_COLUMNS]


def build_tables(metric_files, pin_files) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Concatenate per-layer results; mark checkpoints whose weights equal an earlier one's; summarise over batches.

    `identical_to` names the earliest checkpoint of the same model with bit-identical weights (e.g. Pythia branches
    that upstream re-published unchanged), so a flat stretch in a figure can be told apart from a real plateau.
    Summary std is the sample standard deviation (ddof=1) over batches: NaN where a layer has a single batch.
    """
    values = pd.concat([pd.read_parquet(path) for path in metric_files], ignore_index=True)
    pins_by_model = defaultdict(list)
    for path in pin_files:
        pin = json.loads(Path(path).read_text())
        pins_by_model[pin["model"]].append(pin)
    identical = {}
    for model, pins in pins_by_model.items():
        for checkpoint, original in identical_checkpoints(pins).items():
            logger.info("model %s: checkpoint %s has the same weights as %s", model, checkpoint, original)
            identical[model, checkpoint] = original
    values["identical_to"] = [identical.get(key) for key in zip(values["model"], values["checkpoint"])]
    summary = (
        values.groupby([*KEYS, "identical_to"], dropna=False, sort=False)["value"]
        .agg(mean="mean", std="std", batches="count")
        .reset_index()
        .sort_values(["model", "step", "checkpoint", "layer", "metric"], ignore_index=True)
    )
    return values, summary
