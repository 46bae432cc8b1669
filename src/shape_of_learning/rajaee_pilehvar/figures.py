"""Figures 1 and 2 of Rajaee & Pilehvar (2021), drawn from the analysis outputs with the project's figure helpers."""

from collections import Counter
from pathlib import Path

import matplotlib.cm
import matplotlib.colors
import matplotlib.figure
import matplotlib.ticker
from matplotlib.lines import Line2D
import numpy as np
import pandas as pd
import seaborn as sns

from shape_of_learning.extraction.loading import load_preprocessor
from shape_of_learning.figures.style import new_figure, save
from shape_of_learning.models.checkpoints import Checkpoint

from . import CITATION

LINES = {
    ("pre-trained", "all"): "Pre-trained, all tokens",
    ("fine-tuned", "all"): "Fine-tuned, all tokens",
    ("fine-tuned", "cls"): "Fine-tuned, [CLS]",
}


def labelled(files, analyses) -> pd.DataFrame:
    """The outputs of analysis jobs (`shape_of_learning.rajaee_pilehvar.plan.Analysis`), one file each, in one frame with
    the job's pair (or model, `Analysis.label`), model and state."""
    return pd.concat(
        [
            pd.read_parquet(path).assign(pair=job.label, model=job.model, state=job.state)
            for job, path in zip(analyses, files)
        ],
        ignore_index=True,
    )


CONVENTIONS = {  # Figure 1's two I(W) per line: column -> line style and what it says in the legend
    "isotropy": ("-", "sign-free"),
    "isotropy_notebook": ("--", "the notebook's"),
}


def isotropy_by_layer(layers: pd.DataFrame, out_png: Path, out_pdf: Path, *, dataset: str):
    """Figure 1: -log I(W) (natural log; higher = less isotropic) per layer, one panel per model pair, lines for the
    pre-trained space (all tokens), the fine-tuned space (all tokens) and the fine-tuned [CLS] vectors, each in both
    conventions of I(W) (`CONVENTIONS`): solid the sign-free `isotropy`, dashed the notebook's `isotropy_notebook`,
    since whether fine-tuning raises I(W) can differ between them. A fine-tuned line is the mean over the seeds'
    runs, with a band of +- one std. A layer whose view is degenerate in any run (fewer distinct vectors than
    dimensions, see `analysis.per_layer`: layer 0's [CLS] is one vector) is left out of its line, and the legend
    says which.

    `layers` has columns pair, state, tokens ("all" | "cls"), layer, degenerate, isotropy and isotropy_notebook, one
    row per run.
    """
    pairs = list(dict.fromkeys(layers["pair"]))
    figure, axes = new_figure(len(pairs), 4.5, sharey=False)
    colours = dict(zip(LINES, sns.color_palette("colorblind", len(LINES))))
    for ax, pair in zip(axes, pairs):
        legend = [Line2D([], [], color="grey", linestyle=style, label=name) for style, name in CONVENTIONS.values()]
        for (state, tokens), label in LINES.items():
            line = layers[(layers["pair"] == pair) & (layers["state"] == state) & (layers["tokens"] == tokens)]
            degenerate = sorted(set(line.loc[line["degenerate"], "layer"]))
            line = line[~line["layer"].isin(degenerate)]
            if degenerate:
                label += f" (degenerate, left out: layer {', '.join(map(str, degenerate))})"
            legend.append(Line2D([], [], color=colours[state, tokens], label=label))
            for column, (style, convention) in CONVENTIONS.items():
                runs = (-np.log(line[column])).groupby(line["layer"]).agg(["mean", "std"])
                ax.plot(
                    runs.index,
                    runs["mean"],
                    style,
                    marker="o",
                    markersize=3,
                    color=colours[state, tokens],
                    label=f"{label}, {convention}",
                )
                ax.fill_between(
                    runs.index,
                    runs["mean"] - runs["std"],
                    runs["mean"] + runs["std"],
                    color=colours[state, tokens],
                    alpha=0.15,
                    linewidth=0,
                )  # nothing where std is NaN
        ax.set_title(pair)
        ax.set_xlabel("Layer (0 = embeddings)")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.legend(handles=legend, fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    axes[0].set_ylabel("-log I(W)")
    figure.suptitle(f"{CITATION}, Figure 1: isotropy per layer, pre-trained vs fine-tuned, on {dataset}")
    return save(figure, out_png, out_pdf)


def corpus_frequencies(
    entry: dict, checkpoint: Checkpoint, pin: dict, corpus: Path, chunk_lines: int = 2000
) -> Counter:
    """How often each token id of the model's tokenizer occurs when the cleaned corpus is tokenized line by line
    (special tokens left out). The tokenizer loads as extraction loads it (`load_preprocessor`)."""
    tokenizer = load_preprocessor(entry, checkpoint, pin["commit_sha"])
    counts = Counter()
    lines = Path(corpus).read_text(encoding="utf-8").splitlines()
    for start in range(0, len(lines), chunk_lines):
        for ids in tokenizer(lines[start : start + chunk_lines], add_special_tokens=False)["input_ids"]:
            counts.update(ids)
    return counts


def frequency_view(views: pd.DataFrame, frequencies: dict[str, Counter], out_png: Path, out_pdf: Path):
    """Figure 2: the 2-D PCA view of pre-trained and fine-tuned token vectors, one row per model pair, coloured by
    log10(1 + the token's count in the corpus); frequent tokens are darker, as in the paper.

    `views` has columns pair, model, state, pc1, pc2, token_id; `frequencies` maps each pair to its tokenizer's counts.
    """
    pairs = list(dict.fromkeys(views["pair"]))
    shade = np.log10(1 + np.array([frequencies[p].get(t, 0) for p, t in zip(views["pair"], views["token_id"])]))
    norm = matplotlib.colors.Normalize(0, max(float(shade.max()), 1.0))
    cmap = sns.color_palette("rocket_r", as_cmap=True)
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        figure = matplotlib.figure.Figure(figsize=(8.4, 3.8 * len(pairs)), layout="constrained")
        axes = figure.subplots(len(pairs), 2, squeeze=False)
    for row, pair in zip(axes, pairs):
        for ax, state in zip(row, ("pre-trained", "fine-tuned")):
            rows = ((views["pair"] == pair) & (views["state"] == state)).to_numpy()
            ax.scatter(views["pc1"][rows], views["pc2"][rows], s=4, c=shade[rows], cmap=cmap, norm=norm, linewidths=0)
            ax.set_title(f"{views['model'][rows].iloc[0]} ({state})", fontsize="medium")
            ax.set_xlabel("PC 1")
            ax.set_ylabel("PC 2")
    figure.colorbar(
        matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=list(axes.flat), label="log10(1 + corpus frequency)"
    )
    figure.suptitle(f"{CITATION}, Figure 2: token vectors by corpus frequency")
    return save(figure, out_png, out_pdf)
