"""Godey et al. (2023), "Is Anisotropy Inherent to Transformers?": metrics per relative depth, one panel per
modality and metric, transformers against CNNs and subword against character- and byte-level text models, each
beside the same architecture at initialisation."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from shape_of_learning.corpus import MODALITIES
from shape_of_learning.figures.rows import final_checkpoints, initial_checkpoints, select
from shape_of_learning.figures.style import footnote, metric_label, new_figure, palette, plot_band, save

if TYPE_CHECKING:
    import matplotlib.figure

GROUP_STYLES = {"subword-level": "-", "character-level": "--", "byte-level": ":", "transformer": "-", "CNN": "--"}
BASELINE_STYLE = dict(linewidth=1.0, alpha=0.6, marker="x", markersize=4)  # thin, faded, in the model's colour


def model_group(entry: dict) -> dict:
    """Where the modality figure draws a model: its modality's panel, and its line style (what a token is)."""
    modality = entry["modality"]
    if modality == "text":
        return {"modality": modality, "group": f"{entry['text_unit']}-level"}
    return {"modality": modality, "group": "CNN" if entry["kind"] == "cnn" else "transformer"}


def profile_by_modality(
    summary: pd.DataFrame,
    out_png: Path,
    out_pdf: Path,
    *,
    groups: dict[str, dict],
    metrics: list[str],
    random_init_seed: int,
    positions_per_window: int | None,
    models: Iterable[str] | None = None,
    flagged: str,
) -> matplotlib.figure.Figure:
    """Godey et al. (2023), "Is Anisotropy Inherent to Transformers?": each metric per relative depth (0 = embedding
    output or first stage, 1 = last block or stage) at each model's final checkpoint, one panel per modality and
    metric, and in the same colour, thin with x markers, the same architecture at initialisation: its step-0
    checkpoint, else its config with seeded random weights. Line style: transformers solid, CNNs dashed; subword text
    models solid, character-level dashed, byte-level dotted. The paper finds high average cosine in transformers of
    every modality, character- and byte-level ones included, and not in CNNs. ResNet's states follow a ReLU, so their
    entries are non-negative and any two of them have a cosine >= 0, trained or not: read ResNet against its own
    initialisation and in the centred cosine (the mean vector removed), not against zero.

    `groups` maps each model to ``{"modality": ..., "group": ...}`` (`model_group`), which sets its panel and line
    style. `positions_per_window` (extraction.positions_per_window) is how text was sampled, said in the caption.
    Bands mean +- std across batches; y shared within a metric's row. The final checkpoint is chosen among
    those whose weights are their own, as in `anisotropy_by_layer`; the initialisation is `rows.initial_checkpoints`'s.
    """
    rows = select(summary, metrics, models, baselines=True)
    finals, noted = final_checkpoints(rows[~rows["random_init"]], flagged)
    initial = initial_checkpoints(rows)
    if missing := sorted(set(rows["model"]) - set(groups)):
        raise ValueError(f"model(s) {missing} have no modality group; pass groups for every plotted model")
    modalities = [m for m in MODALITIES if any(groups[model]["modality"] == m for model in rows["model"].unique())]
    figure, axes = new_figure(len(modalities), 5.0, sharey=True, nrows=len(metrics))
    colours = dict(zip(sorted(rows["model"].unique()), palette(rows["model"].nunique())))
    for row, metric in enumerate(metrics):
        for column, modality in enumerate(modalities):
            ax = axes[row * len(modalities) + column]
            for model in sorted(model for model in colours if groups[model]["modality"] == modality):
                _draw_model(ax, model, groups[model]["group"], colours[model], finals, initial, metric)
            ax.set_title(modality.capitalize() if row == 0 else "")
            ax.set_xlabel("Relative depth (layer / number of layers)")
            if column == 0:
                ax.set_ylabel(metric_label(metric))
            if row == 0:
                ax.plot([], [], color="grey", label="at initialisation", **BASELINE_STYLE)
                ax.legend(fontsize="small")
    figure.suptitle(
        "Across layers by modality, trained and at initialisation: transformers vs CNNs, characters vs subwords"
    )
    footnote(
        figure,
        rows,
        noted,
        flagged,
        " ".join([initialisation_text(initial, random_init_seed), text_sampling_text(positions_per_window)]),
    )
    return save(figure, out_png, out_pdf)


def _draw_model(ax, model: str, group: str, colour, finals: pd.DataFrame, initial: pd.DataFrame, metric: str) -> None:
    """One model's `metric` per relative depth: at its final checkpoint with its band, and thin at initialisation,
    in its colour and its group's line style."""
    style = dict(color=colour, linestyle=GROUP_STYLES.get(group, "-"))
    line = finals[(finals["model"] == model) & (finals["metric"] == metric)]
    plot_band(
        ax,
        line["layer"] / line["num_layers"],
        line["mean"],
        line["std"],
        marker="o",
        markersize=3,
        label=f"{model} ({group})",
        **style,
    )
    start = initial[(initial["model"] == model) & (initial["metric"] == metric)]
    ax.plot(
        start["layer"] / start["num_layers"],
        start["mean"],
        label=f"_{model} at initialisation",
        **style,
        **BASELINE_STYLE,
    )


def text_sampling_text(positions_per_window: int | None) -> str:
    """How the text models' tokens were sampled: k per window for all, or every token of the first windows."""
    if positions_per_window is None:
        return (
            "Text: every token of the first windows, so a byte-level model's vectors come from fewer windows than a "
            "subword model's, as many times fewer as it has more tokens per window (extraction.positions_per_window: "
            "null)."
        )
    return (
        f"Text: {positions_per_window} tokens drawn from each window by every model (extraction.positions_per_window), "
        "so every model's vectors come from the same number of windows."
    )


def initialisation_text(initial: pd.DataFrame, seed: int) -> str:
    """Which initialisation each model is drawn with: a step-0 checkpoint, or random weights of `seed`."""
    random = sorted(initial.loc[initial["random_init"], "model"].unique())
    step0 = sorted(initial.loc[~initial["random_init"], "model"].unique())
    parts = [f"step 0 of its training ({', '.join(step0)})"] * bool(step0)
    parts += [f"its config.json with random weights, torch seed {seed} ({', '.join(random)})"] * bool(random)
    return "At initialisation: " + "; ".join(parts) + "."
