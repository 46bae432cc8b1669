"""Is a checkpoint broken? Three signs that need no other checkpoint's loss, each stated with its margin:

- its loss is not a number (NaN or infinite: the forward pass overflowed, or the weights hold NaN);
- its architecture differs from the series' (`shape`: family, blocks, hidden size, vocabulary from its config.json,
  against the shape most of the series' checkpoints have): pythia-410m and pythia-1.4b both have 24 blocks, so a
  branch serving the other's weights passes the depth check at load and is caught here, by its width;
- its loss lies above ln(V) + `health.uniform_margin` nats by more than `health.standard_errors` standard errors, V
  the head's number of classes, at a step from `health.warmup_steps` on: a uniform guess over the classes scores
  ln(V) and a model at initialisation about that, so a trained model above it has unlearned everything, as
  bloom-560m-intermediate's global_step600000 has (perplexity 320,322, 0.24 nats above ln 250,880: its discussion
  #2). The first steps are exempt (an initialisation may sit a little above ln V, and Pythia's barely move while its
  learning rate warms up); a row inside the warm-up whose loss lies above the bound says so (`note`).

A loss out of place in its series is the order's business (`loss_order`).
"""

import math
from collections import Counter

import numpy as np
import pandas as pd

SHAPE_FIELDS = ("family", "layers", "hidden_size", "vocab_size")  # manifest fields: the model's config.json


def shape(manifest: dict) -> str | None:
    """The architecture a manifest records, as one string ("gpt_neox, layers 4, hidden_size 128, vocab_size 258"),
    from the fields it has; None where it has none."""
    found = [f"{field} {manifest[field]}" for field in SHAPE_FIELDS if manifest.get(field) is not None]
    return ", ".join(found) or None


def judge(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """For `rows` (one per checkpoint of one model, columns step, loss, loss_se, vocab_size, shape): `broken` (why,
    or None) and `note` (what a rule could not judge, or None), indexed as `rows`."""
    judged = pd.DataFrame({"broken": None, "note": None}, index=rows.index, dtype=object)
    for index, why in _not_a_number(rows).items():
        judged.loc[index, "broken"] = why
    for index, why in _other_shape(rows).items():
        judged.loc[index, "broken"] = judged.loc[index, "broken"] or why
    bound, notes = _above_uniform(rows, settings)
    for index, why in bound.items():
        judged.loc[index, "broken"] = judged.loc[index, "broken"] or why
    for index, note in notes.items():
        judged.loc[index, "note"] = note
    return judged


def _not_a_number(rows: pd.DataFrame) -> dict:
    """The checkpoints whose measured loss (one with a `loss_kind`) is NaN or infinite."""
    invalid = rows["loss_kind"].notna() & ~rows["loss"].map(finite)
    return {
        index: f"loss {rows.loc[index, 'loss']}: the forward pass overflowed, or its weights hold NaN"
        for index in rows.index[invalid]
    }


def finite(value) -> bool:
    """A loss that is a number: not None, NaN or infinite."""
    return value is not None and pd.notna(value) and math.isfinite(value)


def _other_shape(rows: pd.DataFrame) -> dict:
    """The checkpoints whose architecture is not the one held by most of the series' checkpoints (all of them, where
    no architecture is)."""
    shapes = rows["shape"].dropna()
    if shapes.nunique() < 2:
        return {}
    counts = Counter(shapes)
    common, held = counts.most_common(1)[0]
    if held * 2 <= len(shapes):
        listed = "; ".join(f"{count} with {found}" for found, count in counts.most_common())
        return {
            index: f"the series' checkpoints disagree on their architecture, none held by most ({listed})"
            for index in shapes.index
        }
    return {
        index: f"another architecture: {found} where {held} of the series' {len(shapes)} checkpoints have {common} (config.json)"
        for index, found in shapes.items()
        if found != common
    }


def _above_uniform(rows: pd.DataFrame, settings: dict) -> tuple[dict, dict]:
    """The checkpoints above the ln V bound beyond noise from `warmup_steps` on; and a note on those inside the
    warm-up that lie above it, and on rows whose loss record lacks vocab_size."""
    vocab = pd.to_numeric(rows["vocab_size"], errors="coerce")
    bound = np.log(vocab) + settings["uniform_margin"]
    margin = settings["standard_errors"] * rows["loss_se"].fillna(0.0)
    measured = rows["loss"].map(finite) & (rows["step"] >= 0)
    above = measured & vocab.notna() & (rows["loss"] - margin > bound)
    warm = rows["step"] < settings["warmup_steps"]
    broken = {
        index: f"loss {rows.loc[index, 'loss']:.3g} above ln V + {settings['uniform_margin']:g} = {bound[index]:.3g} "
        f"(V = {int(vocab[index])}: a uniform guess scores ln V) by more than {settings['standard_errors']:g} "
        "standard errors"
        for index in rows.index[above & ~warm]
    }
    notes = {
        index: f"loss above ln V + {settings['uniform_margin']:g} = {bound[index]:.3g}, inside the warm-up "
        f"(health.warmup_steps {settings['warmup_steps']}): the bound is not applied here"
        for index in rows.index[above & warm]
    }
    notes |= {
        index: "no vocab_size recorded with the loss: the ln V bound is skipped"
        for index in rows.index[measured & vocab.isna()]
    }
    return broken, notes
