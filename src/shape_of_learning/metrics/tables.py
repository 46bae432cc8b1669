"""The results tables: each model's per-layer files in one tidy table with each checkpoint's health and the summary
over batches (what its figures read), then every model's in one. Their columns are stated here once.

    models/{model}/{series}.metrics.parquet  one row per (checkpoint, layer, metric, batch): VALUE_COLUMNS
    models/{model}/{series}.summary.parquet  one row per (checkpoint, layer, metric): SUMMARY_COLUMNS
    metrics.parquet, summary.parquet         every model's, concatenated (summary.csv: the same as CSV)
    checkpoints.csv                          one row per checkpoint: its health (health.assess.COLUMNS)
"""

import pandas as pd

from shape_of_learning.health.assess import VERDICT_COLUMNS

# random_init: the rows of a random-init baseline (models.checkpoints.RandomInit), which no checkpoint health covers;
# degenerate: a layer of fewer than 3 distinct vectors (metrics.layer.degenerate), measured as NaN and left out of
# every figure and claim
KEYS = [
    "model",
    "kind",
    "checkpoint",
    "step",
    "random_init",
    "dtype",
    "layer",
    "num_layers",
    "after_final_norm",
    "degenerate",
    "metric",
]
LAYER_COLUMNS = [*KEYS, "batch", "value", "duplicates_removed"]  # one metrics job's file
VALUE_COLUMNS = [*LAYER_COLUMNS, *VERDICT_COLUMNS]
SUMMARY_COLUMNS = [*KEYS, *VERDICT_COLUMNS, "mean", "std", "batches"]
ROW_KEY = ["model", "checkpoint", "layer", "metric", "batch"]  # unique in metrics.parquet


def model_tables(metric_files, health_file=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(values, summary) of one model's series (`paths.model_table`): its per-layer results concatenated, each row
    with its checkpoint's verdict from `health_file` (`health`: why it is not its step's model; `drawn_as`: the
    checkpoint of its group it is drawn as; none for a random-init baseline, which no health covers), and the summary
    over batches. Every row is kept; the figures follow the verdicts. Summary std is the sample standard deviation
    (ddof=1) over batches: NaN where a layer has a single batch.
    """
    values = pd.concat([pd.read_parquet(path) for path in metric_files], ignore_index=True)
    # layer files written before baselines existed lack the column: all of them measured trained weights
    for flag in ("random_init", "degenerate"):  # columns later than some layer files: such rows are not flagged
        values[flag] = values.reindex(columns=[flag])[flag].eq(True)
    health = (
        pd.read_parquet(health_file, columns=["model", "checkpoint", *VERDICT_COLUMNS])
        if health_file
        else pd.DataFrame(columns=["model", "checkpoint", *VERDICT_COLUMNS], dtype=object)
    )
    values = values.merge(health, on=["model", "checkpoint"], how="left", validate="many_to_one")
    summary = (
        values.groupby([*KEYS, *VERDICT_COLUMNS], dropna=False, sort=False)["value"]
        .agg(mean="mean", std="std", batches="count")
        .reset_index()
    )
    return values[VALUE_COLUMNS], sort_summary(summary[SUMMARY_COLUMNS])


def sort_summary(summary: pd.DataFrame) -> pd.DataFrame:
    return summary.sort_values(["model", "step", "checkpoint", "layer", "metric"], ignore_index=True)


def combine_tables(value_files, summary_files, health_files) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(values, summary, health) of every model: each model's tables (`model_tables`) and health tables in one."""

    def read_all(files):
        return pd.concat([pd.read_parquet(path) for path in files], ignore_index=True)

    return read_all(value_files), sort_summary(read_all(summary_files)), read_all(health_files)
