"""Which member of a group of checkpoints that are one model holds its own step.

The members share one set of weights, hence one loss. A member can hold its step when that loss keeps the series'
order there: it rises above no checkpoint before its step and lies below no checkpoint after it by more than the
order's tolerance (`loss_order`: `health.standard_errors` standard errors of the difference in ln(loss), at least
`health.loss_floor`), against the series' models in order outside the group (its neighbours: checkpoints, and
groups at the span of their steps where that lies on one side). The group resolves to its one member that can; where
none can, or several can (a flat stretch, where the losses move less than their errors; members past the series'
last neighbour, as round steps serving the final model), the losses cannot tell, and no member is drawn: never at a
step it may not hold.

The rule reads only the order of the losses, not a model of the curve between two neighbours: where the curve
bends, a genuine member may lie far from a line through its neighbours and an impostor close to it, but a genuine
member never runs against the order beyond its noise.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Placement:
    """A member's loss against the order at its step: whether it can hold the step, and the evidence (the neighbour
    it runs against furthest, or the neighbours it lies between)."""

    can_hold: bool
    evidence: str


def standard_error(tokens: int, total: float, sum_squares: float | None) -> float:
    """The standard error of a mean of `tokens` per-token losses from their sum and sum of squares: the sample
    standard deviation over sqrt(tokens); nan where it cannot be computed (no sum of squares, under two tokens)."""
    if sum_squares is None or tokens is None or tokens < 2 or pd.isna(sum_squares):
        return float("nan")
    variance = max(0.0, (sum_squares - total * total / tokens) / (tokens - 1))
    return float(np.sqrt(variance / tokens))


def place(step: int, loss: float, neighbours: pd.DataFrame, tolerance: np.ndarray) -> Placement:
    """Can a member at `step` with `loss` hold its step among `neighbours` (columns checkpoint, first, last, loss: the
    series' models in order outside the group, by step, a group of one model at the span of its steps), `tolerance`
    the order's t between it and each of them (`loss_order.Errors.tolerance`)? A neighbour whose span holds `step`
    constrains nothing (at one of its steps it keeps the order with any loss). Module docstring."""
    before, after = (neighbours["last"] < step).to_numpy(), (neighbours["first"] > step).to_numpy()
    if not (before.any() or after.any()):
        return Placement(True, f"no checkpoint outside the group on either side of step {step}")
    gap = np.log(loss / neighbours["loss"].to_numpy()) * np.where(before, 1, -1)  # > 0: against the order
    against = [
        (
            g / t,
            f"loss {loss:.3g} {'above' if b else 'below'} {other}'s {value:.3g} by {g:.2g} in ln loss (tolerance {t:.2g})",
        )
        for g, t, b, a, other, value in zip(gap, tolerance, before, after, neighbours["checkpoint"], neighbours["loss"])
        if (b or a) and g > t
    ]
    if against:
        return Placement(False, f"at step {step}: {max(against)[1]}")
    sides = [frame for frame in (neighbours[before].tail(1), neighbours[after].head(1)) if len(frame)]
    beside = " and ".join(f"{frame['checkpoint'].iloc[0]}'s {frame['loss'].iloc[0]:.3g}" for frame in sides)
    return Placement(True, f"loss {loss:.3g} keeps the order at step {step} (beside {beside})")


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
    members: pd.DataFrame, series: list[str], neighbours: pd.DataFrame, by_design: list[str], tolerance
) -> dict[str, tuple[str | None, str | None]]:
    """checkpoint -> (health, drawn_as) for the `members` of one group (rows with checkpoint, step, loss, broken),
    all with a loss and its standard error; a broken member holds no step. `neighbours` are sorted by step;
    `tolerance(name, names)` is the order's t between a member and each of them.

    The members that are one model by design (`by_design_unit`: Pythia's step0 = step1 = step2) are one unit,
    judged at the first of them and drawn once there; every other training member is a unit of its own. The group
    resolves to the one unit that can hold its step (`place`); where none can, or several, every member is left out,
    named with the others. A member without a training step (step < 0) is drawn as the unit that holds its step, or
    left out with the rest.
    """
    rows = members.set_index("checkpoint")
    names = rows.index.tolist()
    designed = by_design_unit(names, series, by_design)
    units = ([designed] if designed else []) + [
        [name] for name in names if name not in designed and rows.loc[name, "step"] >= 0
    ]
    placed = {
        head: Placement(False, rows.loc[head, "broken"])
        if pd.notna(rows.loc[head, "broken"])
        else place(
            rows.loc[head, "step"],
            rows.loc[head, "loss"],
            neighbours,
            tolerance(head, neighbours["head"].tolist()),
        )
        for head in (unit[0] for unit in units)
    }
    holders = [head for head, placement in placed.items() if placement.can_hold]
    holder = holders[0] if len(holders) == 1 else None
    verdicts = {}
    for unit in units:
        head = unit[0]
        health = None if head == holder else _left_out(unit, names, holders, placed[head].evidence)
        verdicts |= {name: (health, head if health is None and name != head else None) for name in unit}
    for name in rows.index[rows["step"] < 0]:
        verdicts[name] = (
            (None, holder) if holder else (_left_out([name], names, holders, "no training step to place it by"), None)
        )
    return verdicts


def _left_out(unit: list[str], names: list[str], holders: list[str], evidence: str) -> str:
    """Why the members of `unit` are left out, `holders` being the group's units that can hold their step."""
    others = ", ".join(name for name in names if name not in unit)
    if len(holders) == 1:
        return (
            f"another step's model: same model as {others}, of which {holders[0]} holds its own step; here {evidence}"
        )
    if not holders:
        return f"same model as {others}, and its loss holds none of their steps; here {evidence}"
    return (
        f"same model as {others}, and the losses cannot tell which holds its own step ({', '.join(holders)} "
        f"can: a flat stretch, or no checkpoint outside the group on one side); here {evidence}"
    )
