"""The paper's figures (Razzhigaev et al., EACL 2024, Figures 1-5), drawn from the tidy summary table.

Every function reads the summary (`shape_of_learning.metrics.tables.SUMMARY_COLUMNS`: one row per model,
checkpoint, layer and metric with the mean and std of the metric over batches), writes a PNG and a PDF, and returns
the matplotlib Figure. Lines are the summary's means and bands mean +- std across batches; no metric is recomputed
here. Checkpoints that are not their step's model (the summary's `health`: out of place, or another's weights
without a loss to tell which is genuine; `shape_of_learning.health`) are never drawn as a training state:
`flagged="omit"` leaves them out, `"mark"` draws them hollow and dashed; either way a footnote names them and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from shape_of_learning.figures.rows import (
    apply_health,
    final_checkpoints,
    layer_average,
    layer_average_text,
    select,
    training_checkpoints,
)
from shape_of_learning.figures.style import (
    footnote,
    format_step,
    integer_ticks,
    metric_label,
    new_figure,
    palette,
    plot_band,
    save,
    step_axis,
)

if TYPE_CHECKING:
    import matplotlib.figure

KIND_TITLES = {"encoder": "Encoders", "decoder": "Decoders", "cnn": "CNNs"}  # Figure 1's panels, in order (model kinds)


def anisotropy_by_layer(
    summary: pd.DataFrame,
    out_png: Path,
    out_pdf: Path,
    *,
    metric: str,
    models: Iterable[str] | None = None,
    flagged: str,
) -> matplotlib.figure.Figure:
    """Figure 1 of the paper: a metric of every layer at each model's final checkpoint, encoders and decoders in two
    panels (and CNNs, `kind: cnn`, in a third: their layers are stages, not blocks); x is the layer index (0 =
    embedding output), or the relative depth layer / number of layers in a panel whose models differ in depth. The
    paper finds flat profiles for encoders and a bell shape, peaking in the middle layers, for decoders.

    The final checkpoint is the one with the largest step (a model with a single checkpoint, e.g. step -1, uses it),
    among the checkpoints that are their step's model unless `flagged="mark"` (then one that is not is drawn dashed;
    `rows.apply_health`).
    One line per model, bands mean +- std across batches; y shared between panels.
    """
    rows, noted = final_checkpoints(select(summary, [metric], models), flagged)
    kinds = [kind for kind in KIND_TITLES if kind in set(rows["kind"])]
    figure, axes = new_figure(len(kinds), 5.0, sharey=True)
    colours = dict(zip(sorted(rows["model"].unique()), palette(rows["model"].nunique())))
    for ax, kind in zip(axes, kinds):
        panel = rows[rows["kind"] == kind]
        relative = panel["num_layers"].nunique() > 1
        for model, line in panel.groupby("model"):
            x = line["layer"] / line["num_layers"] if relative else line["layer"]
            label = f"{model} ({line['label'].iloc[0]})" if line["step"].iloc[0] >= 0 else model
            dashed = bool(line.get("flagged", pd.Series([False])).iloc[0])
            plot_band(
                ax,
                x,
                line["mean"],
                line["std"],
                color=colours[model],
                label=label,
                marker="o",
                markersize=3,
                linestyle="--" if dashed else "-",
            )
        ax.set_title(KIND_TITLES[kind])
        if not relative:
            integer_ticks(ax.xaxis)
        ax.set_xlabel("Relative depth (layer / number of layers)" if relative else "Layer (0 = embeddings)")
        ax.legend(fontsize="small")
    axes[0].set_ylabel(metric_label(metric))
    figure.suptitle(f"{metric_label(metric)} across layers: " + ", ".join(sorted(rows["model"].unique())))
    footnote(figure, rows, noted, flagged)
    return save(figure, out_png, out_pdf)


def profile_across_checkpoints(
    summary: pd.DataFrame, model: str, out_png: Path, out_pdf: Path, *, metric: str, flagged: str
) -> matplotlib.figure.Figure:
    """Figures 2 and 3 of the paper: a metric of every layer of one model, one line per training checkpoint,
    coloured by training step. The paper finds anisotropy growing during training, then stabilising.

    The colour scale is symmetric-log in the step (linear below 1, so step 0 has a colour), with a colourbar.
    x is the layer index (0 = embedding output); bands mean +- std across batches. Step -1 checkpoints are skipped;
    checkpoints that are not their step's model are left out, or dashed with `flagged="mark"`; a group that is one
    model is one line, labelled with all its names.
    """
    import matplotlib.cm
    import matplotlib.colors
    import seaborn as sns

    rows, noted = apply_health(select(summary, [metric], [model]), flagged)
    rows = training_checkpoints(rows)
    steps = sorted(rows["step"].unique())
    norm = matplotlib.colors.SymLogNorm(linthresh=1, vmin=0, vmax=max(steps[-1], 1))
    cmap = sns.color_palette("viridis", as_cmap=True)
    figure, (ax,) = new_figure(1, 6.5, sharey=False)
    for step, line in rows.groupby("step"):
        dashed = bool(line.get("flagged", pd.Series([False])).iloc[0])
        plot_band(
            ax,
            line["layer"],
            line["mean"],
            line["std"],
            color=cmap(norm(step)),
            label=line["label"].iloc[0] + (" (not its step's model)" if dashed else ""),
            linestyle="--" if dashed else "-",
        )
    colourbar = figure.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="Training step")
    colourbar.ax.yaxis.set_major_formatter(format_step)
    integer_ticks(ax.xaxis)
    ax.set_xlabel("Layer (0 = embeddings)")
    ax.set_ylabel(metric_label(metric))
    ax.set_title(f"{model}: {metric_label(metric)} across layers during training")
    footnote(figure, rows, noted, flagged)
    return save(figure, out_png, out_pdf)


def id_across_checkpoints(
    summary: pd.DataFrame,
    models: Iterable[str],
    out_png: Path,
    out_pdf: Path,
    *,
    metric: str,
    flagged: str,
    layer_average_over: dict,
) -> matplotlib.figure.Figure:
    """Figure 4 of the paper: the intrinsic dimension averaged over layers against training step, one line per
    model. The paper finds a rise early in training followed by a decline. Estimates from a few thousand vectors per
    batch underestimate high dimensions: compare models and steps, not absolute values.

    The line is the mean over layers (`layer_average_over`: the config's figures.layer_average, {embedding,
    final_norm}; see `layer_average`) of the per-layer mean; the band is +- the mean over layers of the per-layer std
    across batches (the typical batch-to-batch spread of one layer, not the spread between layers). x is symlog
    (linear below 1) so step 0 is shown. Step -1 checkpoints are skipped; checkpoints that are not their step's model
    are left out, or drawn as hollow markers with `flagged="mark"`.
    """
    rows, noted = apply_health(select(summary, [metric], models), flagged)
    averages = layer_average(training_checkpoints(rows), **layer_average_over)
    figure, (ax,) = new_figure(1, 6.5, sharey=False)
    colours = palette(averages["model"].nunique())
    for colour, (model, line) in zip(colours, averages.groupby("model")):
        plot_band(
            ax,
            line["step"],
            line["mean"],
            line["std"],
            hollow=line.get("flagged"),
            color=colour,
            label=model,
            marker="o",
            markersize=3,
        )
    step_axis(ax)
    ax.set_ylabel(f"{metric_label(metric)}, mean over layers")
    ax.set_title(f"{metric_label(metric)} during training: " + ", ".join(averages["model"].unique()))
    ax.legend(fontsize="small")
    footnote(figure, rows, noted, flagged, layer_average_text(**layer_average_over))
    return save(figure, out_png, out_pdf)


def id_estimators(
    summary: pd.DataFrame,
    model: str,
    out_png: Path,
    out_pdf: Path,
    *,
    metrics: Iterable[str],
    flagged: str,
    layer_average_over: dict,
) -> matplotlib.figure.Figure:
    """Figure 5 of the paper: the layer-averaged intrinsic dimension of one model against training step, one panel per
    estimator (one exact k-nearest-neighbour search per batch feeds all of them). The paper reports that the
    estimators correlate.

    Line, band, layer average and flagged checkpoints as in `id_across_checkpoints`; each panel has its own y scale (the
    estimators differ in level, the figure compares their shapes).
    """
    metrics = list(metrics)
    rows, noted = apply_health(select(summary, metrics, [model]), flagged)
    averages = layer_average(training_checkpoints(rows), **layer_average_over)
    figure, axes = new_figure(len(metrics), 4.3, sharey=False)
    for ax, colour, metric in zip(axes, palette(len(metrics)), metrics):
        line = averages[averages["metric"] == metric]
        plot_band(
            ax,
            line["step"],
            line["mean"],
            line["std"],
            hollow=line.get("flagged"),
            color=colour,
            label=metric,
            marker="o",
            markersize=3,
        )
        step_axis(ax)
        ax.set_title(metric_label(metric))
    axes[0].set_ylabel("Intrinsic dimension, mean over layers")
    figure.suptitle(f"{model}: intrinsic dimension estimators during training")
    footnote(figure, rows, noted, flagged, layer_average_text(**layer_average_over))
    return save(figure, out_png, out_pdf)
