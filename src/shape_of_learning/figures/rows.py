"""Which rows of the summary table a figure draws: the model and metric selected and checked, each checkpoint's
health followed (left out, marked or drawn once), the final or the training checkpoints, the mean over layers.

Nothing here draws or imports matplotlib: these are the figures' data decisions, each stated once.
"""

import logging
from collections.abc import Iterable

import pandas as pd

from shape_of_learning.metrics.tables import SUMMARY_COLUMNS

logger = logging.getLogger(__name__)

FLAGGED_POLICIES = ("omit", "mark")


def select(
    summary: pd.DataFrame, metrics: Iterable[str], models: Iterable[str] | None = None, *, baselines: bool = False
) -> pd.DataFrame:
    """The summary rows of `metrics` (and of `models`, default all), checked: every requested model has every
    requested metric and no (model, checkpoint, layer, metric) appears twice. Sorted by model, step, layer.

    Random-init baselines (`random_init`) are no checkpoint of their model's training: left out unless `baselines`,
    so that no series, health verdict or final-checkpoint choice ever sees one. A summary written before layers were
    marked `degenerate` has none: that version stopped at such a layer."""
    summary = summary.assign(degenerate=summary.reindex(columns=["degenerate"])["degenerate"].eq(True))
    if missing := [column for column in SUMMARY_COLUMNS if column not in summary.columns]:
        raise ValueError(
            f"summary lacks column(s) {missing}; a summary table has {SUMMARY_COLUMNS} (a summary "
            "written by an older version: rerun its job, `snakemake -R tabulate_metrics`)"
        )
    if not baselines:
        summary = summary[~summary["random_init"]]
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    available_metrics = sorted(summary["metric"].unique())
    if missing := [metric for metric in metrics if metric not in available_metrics]:
        raise ValueError(f"metric(s) {missing} not in the summary; available metrics: {available_metrics}")
    available_models = sorted(summary["model"].unique())
    models = available_models if models is None else [models] if isinstance(models, str) else list(models)
    if missing := [model for model in models if model not in available_models]:
        raise ValueError(f"model(s) {missing} not in the summary; available models: {available_models}")
    rows = summary[summary["metric"].isin(metrics) & summary["model"].isin(models)]
    present = set(zip(rows["model"], rows["metric"]))
    if missing := [f"{model}/{metric}" for model in models for metric in metrics if (model, metric) not in present]:
        has = {model: sorted(summary.loc[summary["model"] == model, "metric"].unique()) for model in models}
        raise ValueError(f"no summary rows for model/metric {missing}; metrics per model: {has}")
    key = ["model", "checkpoint", "layer", "metric"]
    if not (duplicated := rows[rows.duplicated(key, keep=False)]).empty:
        raise ValueError(
            f"summary has repeated {key} rows, e.g. {duplicated[key].head(3).to_dict('records')}; "
            "summarise each checkpoint once"
        )
    return rows.sort_values(["model", "step", "checkpoint", "layer"], ignore_index=True)


def apply_health(rows: pd.DataFrame, policy: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows to draw, by the checkpoints' health (`shape_of_learning.health.assess`), and the checkpoints for the
    footnote (model, checkpoint, step, reason, drawn_as).

    A checkpoint drawn as another of its group (`drawn_as`: one model by design, as Pythia's step0 = step1) is not
    drawn again, and the one it is drawn as gets the label "step0 (= step1)". A checkpoint that is not its step's model
    (`health`) is left out (`omit`), or drawn with a boolean `flagged` column set (`mark`).
    """
    if policy not in FLAGGED_POLICIES:
        raise ValueError(f"flagged must be one of {FLAGGED_POLICIES}, got {policy!r}")
    merged = rows["drawn_as"].notna()
    is_flagged = rows["health"].notna()
    checkpoints = rows[merged | is_flagged].drop_duplicates(["model", "checkpoint"])
    noted = checkpoints[["model", "checkpoint", "step", "drawn_as"]].assign(reason=checkpoints["health"])
    also = noted.dropna(subset="drawn_as").groupby(["model", "drawn_as"])["checkpoint"].agg(", ".join)
    rows = rows[~merged]
    rows = rows.assign(
        label=[
            f"{c} (= {also[m, c]})" if (m, c) in also.index else c for m, c in zip(rows["model"], rows["checkpoint"])
        ]
    )
    is_flagged = rows["health"].notna()
    if policy == "omit" and (gone := sorted(set(rows["model"]) - set(rows.loc[~is_flagged, "model"]))):
        raise ValueError(
            f"no checkpoint of {gone} is its step's model ({describe(noted)}); nothing is left to draw: "
            "set `figures.flagged: mark` to draw them marked, or pick other checkpoints"
        )
    if is_flagged.any():
        logger.warning(
            "checkpoints that are not their step's model, %s: %s",
            "left out" if policy == "omit" else "marked",
            describe(noted.dropna(subset="reason")),
        )
    return (rows[~is_flagged] if policy == "omit" else rows.assign(flagged=is_flagged)), noted


def describe(noted: pd.DataFrame) -> str:
    """The checkpoints left out or marked, with their reasons; those drawn as another, with it."""
    return "; ".join(
        f"{m}/{c} ({reason if pd.notna(reason) else f'drawn as {drawn_as}'})"
        for m, c, reason, drawn_as in noted[["model", "checkpoint", "reason", "drawn_as"]].values
    )


def dtype_text(rows: pd.DataFrame) -> str:
    """The dtype of the forward passes behind `rows`, as the manifests recorded it (`extraction.dtype: auto` is
    bfloat16 on CUDA and float32 on CPU): "Forward passes in float32", or per dtype the models that used it."""
    models = rows.groupby("dtype")["model"].unique()
    if len(models) == 1:
        return f"Forward passes in {models.index[0]}."
    return (
        "Forward passes in "
        + "; ".join(f"{dtype} ({', '.join(sorted(names))})" for dtype, names in models.items())
        + "."
    )


def degenerate_text(rows: pd.DataFrame) -> str:
    """The layers of `rows` left out as degenerate (`metrics.layer.degenerate`: fewer than 3 distinct vectors, so no
    value), per model and checkpoint; empty where there are none."""
    gone = rows[rows["degenerate"].eq(True)].drop_duplicates(["model", "checkpoint", "layer"])
    if gone.empty:
        return ""
    layers = gone.groupby(["model", "checkpoint"])["layer"].agg(sorted)
    return (
        "Left out, degenerate layers (fewer than 3 distinct vectors: all zero or all the same): "
        + "; ".join(
            f"{model}/{checkpoint} layer{'s' if len(found) > 1 else ''} {_ranges(found)}"
            for (model, checkpoint), found in layers.items()
        )
        + "."
    )


def _ranges(numbers: list[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5"."""
    runs = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def training_checkpoints(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of training checkpoints (step >= 0), each step naming one checkpoint per model; step -1 is dropped."""
    if not (skipped := rows.loc[rows["step"] < 0, ["model", "checkpoint"]].drop_duplicates()).empty:
        logger.warning("skipping checkpoints without a training step (step -1): %s", skipped.to_dict("records"))
    rows = rows[rows["step"] >= 0]
    if missing := sorted(set(skipped["model"]) - set(rows["model"])):
        raise ValueError(f"model(s) {missing} have no training checkpoints (step >= 0) to plot against step")
    names_per_step = rows.groupby(["model", "step"])["checkpoint"].nunique()
    if (ambiguous := names_per_step[names_per_step > 1]).size:
        raise ValueError(f"several checkpoints share a (model, step): {ambiguous.index.tolist()}")
    return rows


def layer_average(rows: pd.DataFrame, embedding: bool, final_norm: bool) -> pd.DataFrame:
    """Per (model, metric, step): the mean over layers of the per-layer mean and of the per-layer std.

    Layers 0..num_layers, less layer 0 (the embedding output) unless `embedding`, and less a last layer taken after
    the final norm (pre-LN decoders) unless `final_norm`. A `flagged` column, where present, is kept.
    """
    per_checkpoint = rows.groupby(["model", "metric", "step"]).agg(
        layers=("layer", "nunique"), num_layers=("num_layers", "first")
    )
    if not (incomplete := per_checkpoint[per_checkpoint["layers"] != per_checkpoint["num_layers"] + 1]).empty:
        raise ValueError(
            "a layer average needs every layer 0..num_layers; incomplete (model, metric, step): "
            f"{incomplete.index.tolist()}"
        )
    keep = (rows["layer"] > 0) | embedding
    keep &= ~rows["after_final_norm"] | final_norm
    rows = rows[keep]
    keys = ["model", "metric", "step", *(["flagged"] if "flagged" in rows else [])]
    return rows.groupby(keys, as_index=False)[["mean", "std"]].mean()


def layer_average_text(embedding: bool, final_norm: bool) -> str:
    return (
        f"Mean over layers {'0 (embeddings)' if embedding else '1'}..L, the last layer "
        f"{'included' if final_norm else 'left out'} where it follows the final norm."
    )


def final_checkpoints(rows: pd.DataFrame, flagged: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each model's rows at its final checkpoint: the largest step (a single checkpoint, e.g. step -1, is final),
    among the checkpoints that are their step's model unless `flagged="mark"`; and the checkpoints that matter for the
    footnote: those that would otherwise be (omit) or are (mark) a model's final one."""
    rows, noted = apply_health(rows, flagged)
    rows = rows[rows["step"] == rows.groupby("model")["step"].transform("max")]
    names_per_model = rows.groupby("model")["checkpoint"].nunique()
    if (ambiguous := names_per_model[names_per_model > 1]).size:
        raise ValueError(
            f"model(s) {ambiguous.index.tolist()} have several checkpoints at their largest step; "
            "pass one checkpoint per model"
        )
    final_steps = rows.groupby("model")["step"].max()
    at_the_end = noted["step"].to_numpy() >= noted["model"].map(final_steps).fillna(-1).to_numpy()
    return rows, noted.loc[at_the_end]


def initial_checkpoints(rows: pd.DataFrame) -> pd.DataFrame:
    """Each model's rows at initialisation, its floor before any training: its step-0 checkpoint (a training run's
    first, when its health finds it to be its step's model), else its random-init baseline (`random_init`); rows
    selected with `select(..., baselines=True)`. A model with neither is an error: the plan gives every model of a
    figure that draws baselines one (`shape_of_learning.figures.plan.plan_baselines`)."""
    step0 = rows[(rows["step"] == 0) & ~rows["random_init"] & rows["health"].isna()]
    found = pd.concat([step0, rows[rows["random_init"] & ~rows["model"].isin(step0["model"])]])
    if missing := sorted(set(rows["model"]) - set(found["model"])):
        raise ValueError(
            f"model(s) {missing} have no rows at initialisation: no step-0 checkpoint that is its step's "
            "model, and no random-init baseline (which the plan measures for every model without a "
            "step-0 checkpoint)"
        )
    return found.sort_values(["model", "layer"], ignore_index=True)
