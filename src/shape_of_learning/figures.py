"""The paper's figures (Razzhigaev et al., EACL 2024, Figures 1-5), drawn from the tidy summary table.

Every function reads the summary (columns `SUMMARY_COLUMNS`: one row per model, checkpoint, layer and metric with the
mean and std of the metric over batches), writes a PNG and a PDF, and returns the matplotlib Figure. Lines are the
summary's means and bands mean +- std across batches; no metric is recomputed here. Checkpoints whose weights are
another checkpoint's (`identical_to`, `shared_files`: upstream publishing defects) are never drawn as a training
state: `duplicates="omit"` leaves them out, `"mark"` draws them hollow and dashed; either way a footnote names them.
Figures are built with `matplotlib.figure.Figure` (no pyplot, so no GUI backend and no global figure registry) and
saved with a fixed PDF creation date, so the same summary gives byte-identical files.

`FIGURE_KINDS` declares each kind of figure once (plotting function, report caption and label, file names); the
workflow plans and draws every figure from it. matplotlib and seaborn are imported where a figure is drawn, not when
the workflow reads `FIGURE_KINDS` to plan a DAG.
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from shape_of_learning.metrics.registry import METRICS

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn, not while a DAG is planned
    import matplotlib.figure

logger = logging.getLogger(__name__)

SUMMARY_COLUMNS = ["model", "kind", "checkpoint", "step", "layer", "num_layers", "after_final_norm", "metric",
                   "identical_to", "shared_files", "mean", "std", "batches"]
DUPLICATE_POLICIES = ("omit", "mark")
METRIC_LABELS = {name: metric.label for name, metric in METRICS.items()}
BAND_ALPHA = 0.2


def format_step(step: float, _position) -> str:
    """Tick label for a training step: 1,000 rather than 10^3."""
    return f"{step:,.0f}"


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def select(summary: pd.DataFrame, metrics: Iterable[str], models: Iterable[str] | None = None) -> pd.DataFrame:
    """The summary rows of `metrics` (and of `models`, default all), checked: every requested model has every
    requested metric and no (model, checkpoint, layer, metric) appears twice. Sorted by model, step, layer."""
    if missing := [column for column in SUMMARY_COLUMNS if column not in summary.columns]:
        raise ValueError(f"summary lacks column(s) {missing}; a summary table has {SUMMARY_COLUMNS}")
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
        raise ValueError(f"summary has repeated {key} rows, e.g. {duplicated[key].head(3).to_dict('records')}; "
                         "summarise each checkpoint once")
    return rows.sort_values(["model", "step", "checkpoint", "layer"], ignore_index=True)


def apply_duplicate_policy(rows: pd.DataFrame, policy: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows without the checkpoints whose weights are another's (`omit`), or all rows with a boolean `duplicate`
    column (`mark`); and the flagged checkpoints (model, checkpoint, step, reason) for the footnote."""
    if policy not in DUPLICATE_POLICIES:
        raise ValueError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {policy!r}")
    is_flagged = rows["identical_to"].notna() | rows["shared_files"].notna()
    flagged = rows[is_flagged].drop_duplicates(["model", "checkpoint"])[["model", "checkpoint", "step"]].assign(
        reason=[f"same weights as {same}" if pd.notna(same) else f"shares {shared}" for same, shared in
                rows[is_flagged].drop_duplicates(["model", "checkpoint"])[["identical_to", "shared_files"]].values])
    if policy == "omit" and (gone := sorted(set(rows["model"]) - set(rows.loc[~is_flagged, "model"]))):
        raise ValueError(f"every checkpoint of {gone} has another checkpoint's weights ({describe(flagged)}); "
                         "nothing is left to draw: set `figures.duplicates: mark` to draw them marked, or pick other "
                         "checkpoints")
    if len(flagged):
        logger.warning("checkpoints with another checkpoint's weights, %s: %s",
                       "left out" if policy == "omit" else "marked", describe(flagged))
    return (rows[~is_flagged] if policy == "omit" else rows.assign(duplicate=is_flagged)), flagged


def describe(flagged: pd.DataFrame) -> str:
    return "; ".join(f"{m}/{c} ({reason})" for m, c, reason in flagged[["model", "checkpoint", "reason"]].values)


def footnote(figure, flagged: pd.DataFrame, policy: str, settings: str = "") -> None:
    """Text under the figure: the settings it depends on, and the checkpoints left out or marked, with why."""
    lines = [settings] if settings else []
    if len(flagged):
        verb = "Left out" if policy == "omit" else "Hollow markers / dashed lines"
        lines.append(f"{verb}: weights not their own step's (upstream duplicates): " + describe(flagged))
    if lines:
        figure.text(0.0, 0.0, "\n".join(textwrap.fill(line, 150) for line in lines), ha="left", va="top",
                    fontsize="x-small")


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
    the final norm (pre-LN decoders) unless `final_norm`. A `duplicate` column, where present, is kept.
    """
    per_checkpoint = rows.groupby(["model", "metric", "step"]).agg(
        layers=("layer", "nunique"), num_layers=("num_layers", "first"))
    if not (incomplete := per_checkpoint[per_checkpoint["layers"] != per_checkpoint["num_layers"] + 1]).empty:
        raise ValueError("a layer average needs every layer 0..num_layers; incomplete (model, metric, step): "
                         f"{incomplete.index.tolist()}")
    keep = (rows["layer"] > 0) | embedding
    keep &= ~rows["after_final_norm"] | final_norm
    rows = rows[keep]
    keys = ["model", "metric", "step", *(["duplicate"] if "duplicate" in rows else [])]
    return rows.groupby(keys, as_index=False)[["mean", "std"]].mean()


def layer_average_text(embedding: bool, final_norm: bool) -> str:
    return (f"Mean over layers {'0 (embeddings)' if embedding else '1'}..L, the last layer "
            f"{'included' if final_norm else 'left out'} where it follows the final norm.")


def final_checkpoints(rows: pd.DataFrame, duplicates: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each model's rows at its final checkpoint: the largest step (a single checkpoint, e.g. step -1, is final),
    among checkpoints whose weights are their own unless `duplicates="mark"`; and the flagged checkpoints that matter
    for the footnote: those that would otherwise be (omit) or are (mark) a model's final one."""
    rows, flagged = apply_duplicate_policy(rows, duplicates)
    rows = rows[rows["step"] == rows.groupby("model")["step"].transform("max")]
    names_per_model = rows.groupby("model")["checkpoint"].nunique()
    if (ambiguous := names_per_model[names_per_model > 1]).size:
        raise ValueError(f"model(s) {ambiguous.index.tolist()} have several checkpoints at their largest step; "
                         "pass one checkpoint per model")
    final_steps = rows.groupby("model")["step"].max()
    return rows, flagged[[step >= final_steps.get(model, -1) for model, step in flagged[["model", "step"]].values]]


def plot_band(ax, x, mean, std, hollow=None, **line_style) -> None:
    """A line at `mean` with a shaded mean +- std band of the same colour; points where `hollow` is True get hollow
    markers (checkpoints drawn although their weights are another's)."""
    x, mean, std = (np.asarray(values, dtype=float) for values in (x, mean, std))
    (line,) = ax.plot(x, mean, **line_style)
    ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=BAND_ALPHA, linewidth=0)
    if hollow is not None and (hollow := np.asarray(hollow, dtype=bool)).any():
        ax.scatter(x[hollow], mean[hollow], s=40, facecolors="white", edgecolors=line.get_color(), zorder=3)


def new_figure(ncols: int, width_per_panel: float, sharey: bool) -> tuple[matplotlib.figure.Figure, list]:
    import matplotlib.figure
    import seaborn as sns

    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        figure = matplotlib.figure.Figure(figsize=(width_per_panel * ncols, 4.2), layout="constrained")
        axes = figure.subplots(1, ncols, sharey=sharey, squeeze=False)[0]
    return figure, list(axes)


def palette(n: int) -> list:
    """n colours of seaborn's colour-blind palette."""
    import seaborn as sns

    return sns.color_palette("colorblind", n)


def integer_ticks(axis) -> None:
    import matplotlib.ticker

    axis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


def step_axis(ax) -> None:
    """Training step on x: symlog (linear below 1, so step 0 is shown, logarithmic above), plain-number ticks."""
    ax.set_xscale("symlog", linthresh=1)
    ax.xaxis.set_major_formatter(format_step)
    ax.set_xlabel("Training step (symlog scale)")


def save(figure: matplotlib.figure.Figure, out_png: Path, out_pdf: Path) -> matplotlib.figure.Figure:
    """Write the figure as PNG (150 dpi) and PDF, creating parent dirs; no timestamps, so output is reproducible."""
    for path in (out_png, out_pdf):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_png, dpi=150, bbox_inches="tight")  # tight: the footnote lies below the axes
    figure.savefig(out_pdf, metadata={"CreationDate": None}, bbox_inches="tight")
    return figure


def anisotropy_by_layer(summary: pd.DataFrame, out_png: Path, out_pdf: Path, *, metric: str,
                        models: Iterable[str] | None = None, duplicates: str) -> matplotlib.figure.Figure:
    """Figure 1: `metric` per layer at each model's final checkpoint, encoders and decoders in two panels.

    The final checkpoint is the one with the largest step (a model with a single checkpoint, e.g. step -1, uses it),
    among checkpoints whose weights are their own unless `duplicates="mark"` (then a duplicate is drawn dashed).
    x is the layer index (0 = embedding output), or the relative depth layer / num_layers when models of different
    depth share a panel. One line per model, bands mean +- std across batches; y shared between panels.
    """
    rows, flagged = final_checkpoints(select(summary, [metric], models), duplicates)
    kinds = [kind for kind in ("encoder", "decoder") if kind in set(rows["kind"])]
    figure, axes = new_figure(len(kinds), 5.0, sharey=True)
    colours = dict(zip(sorted(rows["model"].unique()), palette(rows["model"].nunique())))
    for ax, kind in zip(axes, kinds):
        panel = rows[rows["kind"] == kind]
        relative = panel["num_layers"].nunique() > 1
        for model, line in panel.groupby("model"):
            x = line["layer"] / line["num_layers"] if relative else line["layer"]
            label = f"{model} ({line['checkpoint'].iloc[0]})" if line["step"].iloc[0] >= 0 else model
            dashed = bool(line.get("duplicate", pd.Series([False])).iloc[0])
            plot_band(ax, x, line["mean"], line["std"], color=colours[model], label=label, marker="o", markersize=3,
                      linestyle="--" if dashed else "-")
        ax.set_title(f"{kind.capitalize()}s")
        if not relative:
            integer_ticks(ax.xaxis)
        ax.set_xlabel("Relative depth (layer / number of layers)" if relative else "Layer (0 = embeddings)")
        ax.legend(fontsize="small")
    axes[0].set_ylabel(metric_label(metric))
    figure.suptitle(f"{metric_label(metric)} across layers: " + ", ".join(sorted(rows["model"].unique())))
    footnote(figure, flagged, duplicates)
    return save(figure, out_png, out_pdf)


def profile_across_checkpoints(summary: pd.DataFrame, model: str, out_png: Path, out_pdf: Path, *,
                               metric: str, duplicates: str) -> matplotlib.figure.Figure:
    """Figures 2 and 3: `metric` per layer, one line per training checkpoint of `model`, coloured by step.

    The colour scale is symmetric-log in the step (linear below 1, so step 0 has a colour), with a colourbar.
    x is the layer index (0 = embedding output); bands mean +- std across batches. Step -1 checkpoints are skipped;
    checkpoints whose weights are another's are left out, or dashed with `duplicates="mark"`.
    """
    import matplotlib.cm
    import matplotlib.colors
    import seaborn as sns

    rows, flagged = apply_duplicate_policy(select(summary, [metric], [model]), duplicates)
    rows = training_checkpoints(rows)
    steps = sorted(rows["step"].unique())
    norm = matplotlib.colors.SymLogNorm(linthresh=1, vmin=0, vmax=max(steps[-1], 1))
    cmap = sns.color_palette("viridis", as_cmap=True)
    figure, (ax,) = new_figure(1, 6.5, sharey=False)
    for step, line in rows.groupby("step"):
        dashed = bool(line.get("duplicate", pd.Series([False])).iloc[0])
        plot_band(ax, line["layer"], line["mean"], line["std"], color=cmap(norm(step)),
                  label=line["checkpoint"].iloc[0] + (" (duplicate)" if dashed else ""),
                  linestyle="--" if dashed else "-")
    colourbar = figure.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="Training step")
    colourbar.ax.yaxis.set_major_formatter(format_step)
    integer_ticks(ax.xaxis)
    ax.set_xlabel("Layer (0 = embeddings)")
    ax.set_ylabel(metric_label(metric))
    ax.set_title(f"{model}: {metric_label(metric)} across layers during training")
    footnote(figure, flagged, duplicates)
    return save(figure, out_png, out_pdf)


def id_across_checkpoints(summary: pd.DataFrame, models: Iterable[str], out_png: Path, out_pdf: Path, *,
                          metric: str, duplicates: str, layer_average_over: dict) -> matplotlib.figure.Figure:
    """Figure 4: intrinsic dimension averaged over layers vs training step, one line per model.

    The line is the mean over layers (`layer_average_over`: the config's figures.layer_average, {embedding,
    final_norm}; see `layer_average`) of the per-layer mean; the band is +- the mean over layers of the per-layer std
    across batches (the typical batch-to-batch spread of one layer, not the spread between layers). x is symlog
    (linear below 1) so step 0 is shown. Step -1 checkpoints are skipped; checkpoints whose weights are another's
    are left out, or drawn as hollow markers with `duplicates="mark"`.
    """
    rows, flagged = apply_duplicate_policy(select(summary, [metric], models), duplicates)
    averages = layer_average(training_checkpoints(rows), **layer_average_over)
    figure, (ax,) = new_figure(1, 6.5, sharey=False)
    colours = palette(averages["model"].nunique())
    for colour, (model, line) in zip(colours, averages.groupby("model")):
        plot_band(ax, line["step"], line["mean"], line["std"], hollow=line.get("duplicate"), color=colour,
                  label=model, marker="o", markersize=3)
    step_axis(ax)
    ax.set_ylabel(f"{metric_label(metric)}, mean over layers")
    ax.set_title(f"{metric_label(metric)} during training: " + ", ".join(averages["model"].unique()))
    ax.legend(fontsize="small")
    footnote(figure, flagged, duplicates, layer_average_text(**layer_average_over))
    return save(figure, out_png, out_pdf)


def id_estimators(summary: pd.DataFrame, model: str, out_png: Path, out_pdf: Path, *,
                  metrics: Iterable[str], duplicates: str, layer_average_over: dict) -> matplotlib.figure.Figure:
    """Figure 5: the layer-averaged intrinsic dimension of `model` vs training step, one panel per estimator.

    Line, band, layer average and duplicates as in `id_across_checkpoints`; each panel has its own y scale (the
    estimators differ in level, the figure compares their shapes).
    """
    metrics = list(metrics)
    rows, flagged = apply_duplicate_policy(select(summary, metrics, [model]), duplicates)
    averages = layer_average(training_checkpoints(rows), **layer_average_over)
    figure, axes = new_figure(len(metrics), 4.3, sharey=False)
    for ax, colour, metric in zip(axes, palette(len(metrics)), metrics):
        line = averages[averages["metric"] == metric]
        plot_band(ax, line["step"], line["mean"], line["std"], hollow=line.get("duplicate"), color=colour,
                  label=metric, marker="o", markersize=3)
        step_axis(ax)
        ax.set_title(metric_label(metric))
    axes[0].set_ylabel("Intrinsic dimension, mean over layers")
    figure.suptitle(f"{model}: intrinsic dimension estimators during training")
    footnote(figure, flagged, duplicates, layer_average_text(**layer_average_over))
    return save(figure, out_png, out_pdf)


MODALITY_ORDER = ("text", "image", "audio")
GROUP_STYLES = {"subword-level": "-", "character-level": "--", "byte-level": ":", "transformer": "-", "CNN": "--"}


def by_modality(summary: pd.DataFrame, out_png: Path, out_pdf: Path, *, groups: dict[str, dict],
                metric: str, models: Iterable[str] | None = None, duplicates: str) -> matplotlib.figure.Figure:
    """Godey et al. (2023): `metric` per relative depth (layer / num_layers) at each model's final checkpoint, one
    panel per modality (text, image, audio), one line per model.

    `groups` maps each model to ``{"modality": ..., "group": ...}`` (`shape_of_learning.experiment.model_group`): the
    line style tells transformers (solid) from CNNs (dashed), and subword (solid) from character- (dashed) and
    byte-level (dotted) text models. Bands mean +- std across batches; y shared between panels. The final checkpoint
    is chosen among those whose weights are their own, as in `anisotropy_by_layer`.
    """
    rows, flagged = final_checkpoints(select(summary, [metric], models), duplicates)
    if missing := sorted(set(rows["model"]) - set(groups)):
        raise ValueError(f"model(s) {missing} have no modality group; pass groups for every plotted model")
    modalities = [m for m in MODALITY_ORDER if any(groups[model]["modality"] == m for model in rows["model"].unique())]
    figure, axes = new_figure(len(modalities), 5.0, sharey=True)
    colours = dict(zip(sorted(rows["model"].unique()), palette(rows["model"].nunique())))
    for ax, modality in zip(axes, modalities):
        for model, line in rows.groupby("model"):
            group = groups[model]
            if group["modality"] != modality:
                continue
            plot_band(ax, line["layer"] / line["num_layers"], line["mean"], line["std"], color=colours[model],
                      linestyle=GROUP_STYLES.get(group["group"], "-"), marker="o", markersize=3,
                      label=f"{model} ({group['group']})")
        ax.set_title(modality.capitalize())
        ax.set_xlabel("Relative depth (layer / number of layers)")
        ax.legend(fontsize="small")
    axes[0].set_ylabel(metric_label(metric))
    figure.suptitle(f"{metric_label(metric)} across layers by modality: transformers vs CNNs, characters vs subwords")
    footnote(figure, flagged, duplicates)
    return save(figure, out_png, out_pdf)


@dataclass(frozen=True)
class FigureKind:
    """A kind of figure, declared once: its plotting function, its report caption and label, its file names.

    Its entry under `figures:` in the config (one schema entry, named as the function) gives one figure, or one per
    item of a list, or with `per_model` one per entry of its `models` (drawn with `model=`). Files:
    results/figures/{stem}.png and .pdf, `stem` formatted with the figure's arguments. The plotting function gets the
    entry's fields as keyword arguments, and those of `duplicates`, `layer_average_over` and `groups` it takes, from
    the config (`shape_of_learning.experiment.plan`).
    """

    draw: Callable
    caption: str  # under workflow/report/: a Jinja template, as every Snakemake report caption
    label: str  # the report's "figure" column
    stem: str
    per_model: bool = False


FIGURE_KINDS: dict[str, FigureKind] = {kind.draw.__name__: kind for kind in [
    FigureKind(anisotropy_by_layer, "anisotropy_by_layer.rst", "1: anisotropy, encoders vs decoders",
               "anisotropy_by_layer"),
    FigureKind(profile_across_checkpoints, "profile_across_checkpoints.rst", "2-3: profile across checkpoints",
               "profile_{model}_{metric}"),
    FigureKind(id_across_checkpoints, "id_across_checkpoints.rst", "4: intrinsic dimension vs step",
               "id_across_checkpoints"),
    FigureKind(id_estimators, "id_estimators.rst", "5: three ID estimators", "id_estimators_{model}", per_model=True),
    FigureKind(by_modality, "by_modality.rst", "Godey et al.: anisotropy by modality", "by_modality"),
]}
