"""Each model's loss against training step, with its checkpoints' health: the performance the paper reads its two
phases of intrinsic dimension against (section 3.3, citing section 4.3 and Figure 5), and the evidence behind every
checkpoint left out or drawn once in the other figures."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from shape_of_learning.figures.rows import describe
from shape_of_learning.figures.style import new_figure, palette, save, step_axis

if TYPE_CHECKING:
    import matplotlib.figure

LOSS_LABELS = {"next-token": "Next-token loss (nats)", "masked-lm": "Masked-LM loss (nats)"}
TOKENS = {"next-token": "predicted tokens", "masked-lm": "masked tokens"}


def loss_across_checkpoints(
    health: pd.DataFrame, model: str, out_png: Path, out_pdf: Path, standard_errors: float
) -> matplotlib.figure.Figure:
    """A model's loss on the corpus windows against training step, from its own head: next-token loss for decoders,
    masked-LM loss for encoders, each with a bar of +- `standard_errors` standard errors of its own
    (health.standard_errors: the margin its rules read, in standard errors of a difference, which pairing over the
    same tokens makes smaller: docs/checkpoint-health.md); checkpoints that are not their step's model are crossed
    out, off the line, and named in the footnote, with why.

    `health` is the model's health table (`shape_of_learning.health.assess.COLUMNS`). Every checkpoint with a loss
    is drawn, flagged ones marked whatever figures.flagged says, since this figure is their evidence. x is symlog
    (linear below 1), so step 0 is shown.
    """
    rows = health[(health["model"] == model) & (health["step"] >= 0)].sort_values("step")
    if rows.empty or rows["loss"].isna().all():
        reasons = sorted(set(health.loc[health["model"] == model, "loss_kind"].dropna())) or ["none recorded"]
        raise ValueError(
            f"model {model!r} has no loss at any training checkpoint (loss kinds: {reasons}); a model "
            "reports one with a language-model head (extraction.loss): leave it out of "
            "figures.loss_across_checkpoints"
        )
    rows = rows[rows["loss"].notna()]
    figure, (ax,) = new_figure(1, 6.5, sharey=False)
    (colour, warning) = palette(2)
    kept = rows[rows["health"].isna()]
    ax.plot(kept["step"], kept["loss"], marker="o", markersize=4, color=colour, label=model)
    bar = standard_errors * rows["loss_se"]
    ax.errorbar(
        rows["step"],
        rows["loss"],
        yerr=bar,
        fmt="none",
        color=colour,
        alpha=0.6,
        capsize=2,
        label=f"+- {standard_errors:g} standard errors, each loss's own (a difference's, paired, is smaller)",
    )
    if len(bad := rows[rows["health"].notna()]):
        ax.scatter(bad["step"], bad["loss"], marker="x", s=80, color=warning, zorder=3, label="not its step's model")
    step_axis(ax)
    ax.set_yscale("log")  # a broken checkpoint's loss can be orders of magnitude off
    for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        axis(lambda loss, _position: f"{loss:g}")
    kind = rows["loss_kind"].iloc[0]
    ax.set_ylabel(LOSS_LABELS[kind])
    ax.set_title(
        f"{model}: loss on the corpus during training ({int(rows['loss_tokens'].iloc[0])} {TOKENS[kind]} each)"
    )
    ax.legend(fontsize="small")
    noted = health[(health["model"] == model) & (health["health"].notna() | health["drawn_as"].notna())]
    if len(noted):
        note = noted.rename(columns={"health": "reason"})[["model", "checkpoint", "reason", "drawn_as"]]
        figure.text(0.0, 0.0, textwrap.fill(describe(note), 150), ha="left", va="top", fontsize="x-small")
    return save(figure, out_png, out_pdf)
