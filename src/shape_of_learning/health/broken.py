"""Is a checkpoint broken (the lenient rule)? Either of two signs, each loose enough that no genuine checkpoint of a
training run shows it:

- its loss lies above ln(V) + `uniform_margin` nats, V the head's number of classes, at a step from
  `warmup_steps` on: a uniform guess over the classes scores ln(V) and a model at initialisation about that (the
  demo's decoder at step 0: 0.04 nats above it), so a trained model above it has unlearned everything, as
  bloom-560m-intermediate's global_step600000 has (perplexity 320,322, 0.24 nats above ln 250,880: its discussion
  #2). The first steps are exempt: they sit at about ln(V), a little above by their initialisation's spread, and
  Pythia's barely move while its learning rate warms up. The bound holds at both ends of a series, where the next
  rule sees only one side;
- its loss is out of place in its series (`position.out_of_place`, tolerance `out_of_place` in ln loss), judged
  among the checkpoints that are not above the bound.

Both need a series: a model with fewer than two training checkpoints with a loss is judged by its files and
fingerprints alone, and its rows say so (`note`), as do those of a model whose loss record lacks `vocab_size` (the
bound is skipped).
"""

import numpy as np
import pandas as pd

from shape_of_learning.health.loss_trend import out_of_place


def judge(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """For `rows` (one per checkpoint of one model, in step order, columns step, loss, vocab_size): `loss_fit` (the
    non-increasing fit's loss at each), `out_of_place` (bool), `broken` (why, or None) and `note` (which of the
    rules could not run, or None), indexed as `rows`."""
    judged = pd.DataFrame(
        {"loss_fit": np.nan, "out_of_place": False, "broken": None, "note": None}, index=rows.index
    ).astype({"broken": object, "note": object})
    series = rows["loss"].notna() & (rows["step"] >= 0)
    if series.sum() < 2:
        judged.loc[rows.index, "note"] = (
            "no loss: judged by its files and fingerprint only"
            if not series.any()
            else "the only training checkpoint with a loss: no series to judge it by (place, ln V bound), "
            "judged by its files and fingerprint only"
        )
        return judged
    vocab = pd.to_numeric(rows["vocab_size"], errors="coerce")
    bound = np.log(vocab) + settings["uniform_margin"]
    checked = series & (rows["step"] >= settings["warmup_steps"]) & vocab.notna()
    above = checked & (rows["loss"] > bound)
    for index in rows.index[above]:
        judged.loc[index, "broken"] = (
            f"loss {rows.loc[index, 'loss']:.3g} above ln V + "
            f"{settings['uniform_margin']:g} = {bound[index]:.3g} (V = "
            f"{int(vocab[index])}: a uniform guess scores ln V)"
        )
    judged.loc[series & vocab.isna(), "note"] = "no vocab_size recorded with the loss: the ln V bound is skipped"
    placed = series & ~above
    if placed.sum() > 1:
        fit, flagged = out_of_place(rows.loc[placed, "loss"], settings["out_of_place"])
        judged.loc[placed, "loss_fit"], judged.loc[placed, "out_of_place"] = fit, flagged
        for index in rows.index[placed][flagged]:
            judged.loc[index, "broken"] = (
                f"out of place: loss {rows.loc[index, 'loss']:.3g} where its series runs "
                f"at {judged.loc[index, 'loss_fit']:.3g} (|ln ratio| > "
                f"{settings['out_of_place']})"
            )
    return judged
