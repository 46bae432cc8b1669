"""Which member of a group of checkpoints that are one model holds its own step (the tight rule).

The members share one set of weights, hence one loss. A genuine member's loss lies where the series puts its step:
between the losses of its nearest checkpoints outside the group, at the point its step takes between theirs. The
rule interpolates ln(loss) linearly in ln(1 + step) between the two neighbours (training losses fall about as a
power of the step, and the series' steps are log-spaced; the 1 keeps step 0 defined), and a member fits its step
when its ln(loss) lies within `standard_errors` combined standard errors of that point. Past the series' last
neighbour the loss may have fallen by any amount, so a member there fits unless its loss lies above its last
neighbour's; before the first neighbour, unless it lies below the first neighbour's. A member with no neighbour on
either side cannot be judged.

The standard error is that of each mean over the loss's tokens (`sum_squares` in the manifest), taken as
independent between checkpoints: the tokens are the same at every checkpoint, so the error of a difference is
smaller than this, and the tolerance errs towards "fits", hence towards leaving a group out as undecided.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

FITS, MISFITS, UNKNOWN = "fits", "misfits", "unknown"


@dataclass(frozen=True)
class Placement:
    """A member's loss against its place: `verdict` (FITS, MISFITS or UNKNOWN), the loss the neighbours put at its
    step (`expected`, with `relation` '~', '<=' or '>=': the point, or the bound, past an end), and the tolerance
    in ln(loss) it was judged by."""

    verdict: str
    expected: float = float("nan")
    relation: str = ""
    tolerance: float = float("nan")

    def describe(self, loss: float, step: int) -> str:
        if self.verdict == UNKNOWN:
            return f"no checkpoint outside the group on either side of step {step}"
        return (
            f"loss {loss:.3g} where its neighbours put step {step}'s at {self.relation} {self.expected:.3g} "
            f"(tolerance {self.tolerance:.2g} in ln loss)"
        )


def standard_error(tokens: int, total: float, sum_squares: float | None) -> float:
    """The standard error of a mean of `tokens` per-token losses from their sum and sum of squares: the sample
    standard deviation over sqrt(tokens); nan where it cannot be computed (no sum of squares, under two tokens)."""
    if sum_squares is None or tokens is None or tokens < 2 or pd.isna(sum_squares):
        return float("nan")
    variance = max(0.0, (sum_squares - total * total / tokens) / (tokens - 1))
    return float(np.sqrt(variance / tokens))


def place(step: int, loss: float, se: float, neighbours: pd.DataFrame, standard_errors: float) -> Placement:
    """Does a member at `step` with `loss` (standard error `se`) fit its step among `neighbours` (columns step,
    loss, loss_se: the series' checkpoints outside the group that are not broken)? Module docstring."""
    before = neighbours[neighbours["step"] < step].sort_values("step").tail(1)
    after = neighbours[neighbours["step"] > step].sort_values("step").head(1)
    if before.empty and after.empty:
        return Placement(UNKNOWN)
    log_se = se / loss  # the standard error of ln(loss), to first order

    def ln(frame):
        row = frame.iloc[0]
        return np.log(row["loss"]), row["loss_se"] / row["loss"], np.log1p(row["step"])

    if not before.empty and not after.empty:
        (y_a, s_a, x_a), (y_b, s_b, x_b) = ln(before), ln(after)
        w = (np.log1p(step) - x_a) / (x_b - x_a)
        expected, spread = (1 - w) * y_a + w * y_b, np.hypot((1 - w) * s_a, w * s_b)
        tolerance = standard_errors * np.hypot(log_se, spread)
        fits, relation = abs(np.log(loss) - expected) <= tolerance, "~"
    else:
        below = before.empty  # before the first neighbour: its loss is a lower bound
        expected, spread, _ = ln(after if below else before)
        tolerance = standard_errors * np.hypot(log_se, spread)
        deviation = np.log(loss) - expected
        fits, relation = (deviation >= -tolerance) if below else (deviation <= tolerance), ">=" if below else "<="
    return Placement(FITS if fits else MISFITS, float(np.exp(expected)), relation, float(tolerance))


def by_design_unit(names: list[str], series: list[str], by_design: list[str]) -> list[str]:
    """The members of a group (`names`) that are one model by design: those named in `by_design` that are the
    series' first checkpoints (`series`: its training checkpoints in step order), if there are two or more."""
    unit = []
    for name in series:
        if name not in names or name not in by_design:
            break
        unit.append(name)
    return unit if len(unit) > 1 else []


def resolve(
    members: pd.DataFrame, series: list[str], neighbours: pd.DataFrame, by_design: list[str], standard_errors: float
) -> dict[str, tuple[str | None, str | None, float]]:
    """checkpoint -> (health, drawn_as, the loss its neighbours put at its step) for the `members` of one group
    (rows with checkpoint, step, loss, loss_se, broken), all with a loss; a broken member holds no step.

    The members that are one model by design (`by_design_unit`: Pythia's step0 = step1 = step2) are one unit,
    judged at the first of them and drawn once there; every other training member is a unit of its own. The group
    resolves to the one unit that does not misfit its step (`place`); where every unit misfits, or more than one
    does not (a flat stretch, or no checkpoint outside the group), every member is left out, named with the others.
    A member without a training step (step < 0) is drawn as the unit that holds its step, or left out with the rest.
    """
    rows = members.set_index("checkpoint")
    names = rows.index.tolist()
    designed = by_design_unit(names, series, by_design)
    units = ([designed] if designed else []) + [
        [name] for name in names if name not in designed and rows.loc[name, "step"] >= 0
    ]
    placed = {
        head: Placement(MISFITS)
        if pd.notna(rows.loc[head, "broken"])
        # its loss contradicts any step
        else place(
            rows.loc[head, "step"], rows.loc[head, "loss"], rows.loc[head, "loss_se"], neighbours, standard_errors
        )
        for head in (unit[0] for unit in units)
    }
    holders = [head for head, placement in placed.items() if placement.verdict != MISFITS]
    holder = holders[0] if len(holders) == 1 else None
    verdicts = {}
    for unit in units:
        head, placement = unit[0], placed[unit[0]]
        health = (
            None
            if head == holder
            else _left_out(unit, names, holders, placement.describe(rows.loc[head, "loss"], rows.loc[head, "step"]))
        )
        verdicts |= {
            name: (health, head if health is None and name != head else None, placement.expected) for name in unit
        }
    for name in rows.index[rows["step"] < 0]:
        verdicts[name] = (
            (None, holder, np.nan)
            if holder
            else (_left_out([name], names, holders, "no training step to place it by"), None, np.nan)
        )
    return verdicts


def _left_out(unit: list[str], names: list[str], holders: list[str], evidence: str) -> str:
    """Why the members of `unit` are left out, `holders` being the group's units that do not misfit their step."""
    others = ", ".join(name for name in names if name not in unit)
    if len(holders) == 1:
        return (
            f"another step's model: same model as {others}, of which {holders[0]} holds its own step; here {evidence}"
        )
    if not holders:
        return f"same model as {others}, and its loss fits none of their steps; here {evidence}"
    return (
        f"same model as {others}, and the losses cannot tell which holds its own step ({', '.join(holders)} "
        f"fit: a flat stretch, or no checkpoint outside the group); here {evidence}"
    )
