"""How every figure looks: one seaborn style, bands, axes, the footnote, and reproducible files.

Figures are built with `matplotlib.figure.Figure` (no pyplot, so no GUI backend and no global figure registry) and
saved with a fixed PDF creation date, so the same summary gives byte-identical files. matplotlib and seaborn are
imported where a figure is drawn, not while a DAG is planned.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from shape_of_learning.figures.rows import degenerate_text, describe, dtype_text
from shape_of_learning.metrics.registry import METRICS

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn, not while a DAG is planned
    import matplotlib.figure

BAND_ALPHA = 0.2


def format_step(step: float, _position) -> str:
    """Tick label for a training step: 1,000 rather than 10^3."""
    return f"{step:,.0f}"


def estimator_settings(metrics: list[str], overrides: dict[str, dict]) -> str:
    """The settings the `metrics` ran with (their functions' defaults, `overrides` applied: the config's
    metrics.settings), e.g. "TwoNN: discard_fraction 0.1"; empty where none has a setting."""
    described = []
    for metric in dict.fromkeys(metrics):
        settings = METRICS[metric].settings(overrides.get(metric))
        if settings:
            label = METRICS[metric].label.removeprefix("Intrinsic dimension (").removesuffix(")")
            described.append(f"{label}: " + ", ".join(f"{key} {value}" for key, value in settings.items()))
    return "; ".join(described)


def metric_label(metric: str) -> str:
    """The metric's axis label (`METRICS`); a name the registry does not know is its own label."""
    return METRICS[metric].label if metric in METRICS else metric


def footnote(figure, rows: pd.DataFrame, noted: pd.DataFrame, policy: str, settings: str = "") -> None:
    """Text under the figure: the dtype of the forward passes behind its `rows`, the settings it depends on, the
    checkpoints left out or marked for not being their step's model, with why, those drawn once for a group that
    is one model (`rows.apply_health`), and the degenerate layers, which have no value to draw."""
    lines = [dtype_text(rows), *([settings] if settings else []), *filter(None, [degenerate_text(rows)])]
    if len(flagged := noted.dropna(subset="reason")):
        verb = "Left out" if policy == "omit" else "Hollow markers / dashed lines"
        lines.append(f"{verb}, not their step's model: " + describe(flagged))
    if len(merged := noted.dropna(subset="drawn_as")):
        lines.append(
            "Drawn once, as the first of their group (one model by design at the start of training, "
            "health.identical_by_design): " + describe(merged)
        )
    if lines:
        figure.text(
            0.0, 0.0, "\n".join(textwrap.fill(line, 150) for line in lines), ha="left", va="top", fontsize="x-small"
        )


def plot_band(ax, x, mean, std, hollow=None, **line_style) -> None:
    """A line at `mean` with a shaded mean +- std band of the same colour; points where `hollow` is True get hollow
    markers (checkpoints drawn although they are not their step's model)."""
    x, mean, std = (np.asarray(values, dtype=float) for values in (x, mean, std))
    (line,) = ax.plot(x, mean, **line_style)
    ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=BAND_ALPHA, linewidth=0)
    if hollow is not None and (hollow := np.asarray(hollow, dtype=bool)).any():
        ax.scatter(x[hollow], mean[hollow], s=40, facecolors="white", edgecolors=line.get_color(), zorder=3)


def new_figure(
    ncols: int, width_per_panel: float, sharey: bool, nrows: int = 1
) -> tuple[matplotlib.figure.Figure, list]:
    """A figure of `nrows` x `ncols` panels, their axes row by row; `sharey` shares y within each row."""
    import matplotlib.figure
    import seaborn as sns

    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        figure = matplotlib.figure.Figure(figsize=(width_per_panel * ncols, 4.2 * nrows), layout="constrained")
        axes = figure.subplots(nrows, ncols, sharey="row" if sharey else False, squeeze=False)
    return figure, list(axes.flat)


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
