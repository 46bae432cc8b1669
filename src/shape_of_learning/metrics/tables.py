"""The results tables: the per-layer files of every checkpoint in one tidy table, with each checkpoint's health, and
the summary over batches. Their columns are stated here once.

    metrics.parquet   one row per (model, checkpoint, layer, metric, batch): LAYER_COLUMNS and VERDICT_COLUMNS
    summary.parquet   one row per (model, checkpoint, layer, metric): KEYS, VERDICT_COLUMNS, mean, std, batches
    checkpoints.csv   one row per checkpoint: its health (shape_of_learning.health.assess.COLUMNS)
"""

import pandas as pd

from shape_of_learning.health.assess import VERDICT_COLUMNS

# random_init: the rows of a random-init baseline (models.checkpoints.RandomInit), which no checkpoint health covers
KEYS = ["model", "kind", "checkpoint", "step", "random_init", "dtype", "layer", "num_layers", "after_final_norm",
        "metric"]
LAYER_COLUMNS = [*KEYS, "batch", "value", "duplicates_removed"]  # one metrics job's file
VALUE_COLUMNS = [*LAYER_COLUMNS, *VERDICT_COLUMNS]
SUMMARY_COLUMNS = [*KEYS, *VERDICT_COLUMNS, "mean", "std", "batches"]
ROW_KEY = ["model", "checkpoint", "layer", "metric", "batch"]  # unique in metrics.parquet


def build_tables(metric_files, health_files) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(values, summary, health): the per-layer results concatenated, each row with its checkpoint's verdict
    (`health`: why it is not its step's model; `drawn_as`: the checkpoint of its group it is drawn as), the summary
    over batches, and every model's health table in one. Every row is kept; the figures follow the verdicts. Summary
    std is the sample standard deviation (ddof=1) over batches: NaN where a layer has a single batch.
    """
    values = pd.concat([pd.read_parquet(path) for path in metric_files], ignore_index=True)
    # layer files written before baselines existed lack the column: all of them measured trained weights
    values["random_init"] = values.reindex(columns=["random_init"])["random_init"].eq(True)
    health = pd.concat([pd.read_parquet(path) for path in health_files], ignore_index=True)
    values = values.merge(health[["model", "checkpoint", *VERDICT_COLUMNS]], on=["model", "checkpoint"],
                          how="left", validate="many_to_one")
    summary = (
        values.groupby([*KEYS, *VERDICT_COLUMNS], dropna=False, sort=False)["value"]
        .agg(mean="mean", std="std", batches="count")
        .reset_index()
        .sort_values(["model", "step", "checkpoint", "layer", "metric"], ignore_index=True)
    )
    return values[VALUE_COLUMNS], summary[SUMMARY_COLUMNS], health
