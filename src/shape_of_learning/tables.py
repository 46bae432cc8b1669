"""The results tables: the per-layer files of every checkpoint in one tidy table, their duplicate flags, and the
summary over batches."""

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd

from shape_of_learning.metrics.layer import KEYS
from shape_of_learning.pinning import duplicate_checkpoints

DUPLICATE_COLUMNS = ["identical_to", "shared_files"]


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
