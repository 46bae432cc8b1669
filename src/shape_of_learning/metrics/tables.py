"""The results tables: the per-layer files of every checkpoint in one tidy table, their duplicate flags, and the
summary over batches. Their columns are stated here once.

    metrics.parquet   one row per (model, checkpoint, layer, metric, batch): KEYS, batch, value, duplicates_removed,
                      and the DUPLICATE_COLUMNS
    summary.parquet   one row per (model, checkpoint, layer, metric): KEYS, DUPLICATE_COLUMNS, mean, std, batches
"""

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd

from shape_of_learning.models.pinning import duplicate_checkpoints

KEYS = ["model", "kind", "checkpoint", "step", "dtype", "layer", "num_layers", "after_final_norm", "metric"]
LAYER_COLUMNS = [*KEYS, "batch", "value", "duplicates_removed"]  # one metrics job's file
DUPLICATE_COLUMNS = ["identical_to", "shared_files"]
VALUE_COLUMNS = [*LAYER_COLUMNS, *DUPLICATE_COLUMNS]
SUMMARY_COLUMNS = [*KEYS, *DUPLICATE_COLUMNS, "mean", "std", "batches"]
ROW_KEY = ["model", "checkpoint", "layer", "metric", "batch"]  # unique in metrics.parquet


def build_tables(metric_files, pin_files) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Concatenate per-layer results; flag checkpoints whose weights are another's; summarise over batches.

    `identical_to` names another checkpoint of the same model with bit-identical weight files (e.g. Pythia branches
    that upstream re-published with the final model's weights), `shared_files` the weight files a partial duplicate
    shares ("file=checkpoint; ..."), both from `shape_of_learning.models.pinning.duplicate_checkpoints`. Every row
    is kept; the figures leave flagged checkpoints out (or mark them). Summary std is the sample standard deviation
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
