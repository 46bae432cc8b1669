"""Godey et al. (2023), "Is Anisotropy Inherent to Transformers?": a metric per relative depth, one panel per
modality, transformers against CNNs and subword against character- and byte-level text models."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from shape_of_learning.corpus import MODALITIES
from shape_of_learning.figures.rows import final_checkpoints, select
from shape_of_learning.figures.style import footnote, metric_label, new_figure, palette, plot_band, save

if TYPE_CHECKING:
    import matplotlib.figure

GROUP_STYLES = {"subword-level": "-", "character-level": "--", "byte-level": ":", "transformer": "-", "CNN": "--"}


def model_group(entry: dict) -> dict:
    """Where the modality figure draws a model: its modality's panel, and its line style (what a token is)."""
    modality = entry["modality"]
    if modality == "text":
        return {"modality": modality, "group": f"{entry['text_unit']}-level"}
    return {"modality": modality, "group": "CNN" if entry["kind"] == "cnn" else "transformer"}


def by_modality(summary: pd.DataFrame, out_png: Path, out_pdf: Path, *, groups: dict[str, dict],
                metric: str, models: Iterable[str] | None = None, flagged: str) -> matplotlib.figure.Figure:
    """Godey et al. (2023), "Is Anisotropy Inherent to Transformers?": a metric per relative depth (0 = embedding
    output or first stage, 1 = last block or stage) at each model's final checkpoint, one panel per modality. Line
    style: transformers solid, CNNs dashed; subword text models solid, character-level dashed, byte-level dotted. The
    paper finds high average cosine in transformers of every modality, character- and byte-level ones included, and
    not in CNNs.

    `groups` maps each model to ``{"modality": ..., "group": ...}`` (`model_group`), which sets its panel and line
    style. Bands mean +- std across batches; y shared between panels. The final checkpoint is chosen among those whose
    weights are their own, as in `anisotropy_by_layer`.
    """
    rows, noted = final_checkpoints(select(summary, [metric], models), flagged)
    if missing := sorted(set(rows["model"]) - set(groups)):
        raise ValueError(f"model(s) {missing} have no modality group; pass groups for every plotted model")
    modalities = [m for m in MODALITIES if any(groups[model]["modality"] == m for model in rows["model"].unique())]
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
    footnote(figure, rows, noted, flagged)
    return save(figure, out_png, out_pdf)
