"""The tests every claim is stated with. Each turns a vague word of a paper ("bell-shaped", "stabilises", "more
uniform", "much more anisotropic in most layers", "costs less") into a test on numbers against a stated threshold
and returns a `Verdict`: whether it holds, what was measured, and why not. Pure functions of numbers; which numbers
each claim gives them is the business of the catalogue (one module per paper). Here: the verdict, the margin a
difference must clear, and comparisons of values (of models, of layers); the shapes of a series (a bell, a rise then
a fall, growth that stabilises, a falling loss) are in `series`.

A difference "counts" when it clears a margin in standard deviations of the difference (`separation`): a batch-to-
batch std for the main paper's metrics, a seed-to-seed one for Rajaee & Pilehvar (`claims.margin_std`). A rise or a
fall of a shape must also span a share of its peak (`series.changes`).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

HOLDS = {True: "yes", False: "no", None: "not measurable"}  # the scorecard's words for a verdict
ERROR = "error"  # the scorecard's word for a check that raised: a defect of the check, never a finding


class NotMeasurable(Exception):
    """A claim cannot be judged on this run; the message says why (a table missing, a model that cannot be had, too
    few checkpoints, no spread to measure a margin in)."""


@dataclass(frozen=True)
class Verdict:
    """holds: True, False, or None where the claim is not measurable; measured: the values it was judged on;
    reason: why it does not hold, or why it is not measurable (empty where it holds)."""

    holds: bool | None
    measured: str = ""
    reason: str = ""

    def __post_init__(self):  # a numpy bool is no `True`: `every` tells the three by identity
        object.__setattr__(self, "holds", None if self.holds is None else bool(self.holds))


def num(value: float) -> str:
    """A measured value as the scorecard prints it: 3 significant digits."""
    return f"{value:.3g}"


def separation(high: tuple[float, float], low: tuple[float, float]) -> float:
    """How far `high` lies above `low`, each (mean, std), in std of their difference: (m_h - m_l) /
    sqrt(s_h^2 + s_l^2). Where both stds are 0 (a value no seed or batch changes), +-inf by the sign of the
    difference, 0 for none. A NaN std (one batch, one seed) is the caller's to refuse: it raises here."""
    difference, spread = high[0] - low[0], math.hypot(high[1], low[1])
    if math.isnan(spread):
        raise NotMeasurable("no standard deviation to measure a margin in")
    if spread == 0:
        return math.copysign(math.inf, difference) if difference else 0.0
    return difference / spread


def clears(apart: float, margin: float) -> bool:
    """A separation that counts: at least `margin` std, and a difference at all (a margin of 0 still asks for one)."""
    return apart >= margin and apart > 0


def std_units(apart: float) -> str:
    """A separation as the scorecard prints it: "+2.3 std" ("+1.2e+04 std" where no noise to speak of)."""
    return f"{apart:+.1f} std" if abs(apart) < 1e4 else f"{apart:+.2g} std"


def spread_ratio(uniform: dict[str, float], varied: dict[str, float], *, max_ratio: float) -> Verdict:
    """The models of `uniform` vary less than those of `varied`: the median of the first's spreads is at most
    `max_ratio` times the median of the second's."""
    if not uniform or not varied:
        raise NotMeasurable("a comparison needs a model on each side")
    low, high = float(np.median(list(uniform.values()))), float(np.median(list(varied.values())))
    ratio = low / high if high else math.inf
    measured = f"median {num(low)} against {num(high)}, ratio {num(ratio)}"
    return Verdict(ratio <= max_ratio, measured, "" if ratio <= max_ratio else f"ratio {num(ratio)} over {max_ratio}")


def at_least(values: dict[str, float], *, level: float) -> Verdict:
    """Every value reaches `level`."""
    if not values:
        raise NotMeasurable("no value to judge")
    below = [f"{name} {num(value)} under {level}" for name, value in values.items() if not value >= level]
    return Verdict(not below, ", ".join(f"{name} {num(value)}" for name, value in values.items()), "; ".join(below))


def above(high: tuple[float, float], low: tuple[float, float], *, margin: float, what: str) -> Verdict:
    """`high` lies above `low` by `margin` std of the difference; `what` names the two ("ViT's over its floor")."""
    apart = separation(high, low)
    measured = f"{what}: {num(high[0])} against {num(low[0])} ({std_units(apart)})"
    return Verdict(
        clears(apart, margin), measured, "" if clears(apart, margin) else f"{what}: {std_units(apart)}, under {margin}"
    )


def groups_apart(
    high: dict[str, tuple[float, float]], low: dict[str, tuple[float, float]], *, margin: float
) -> Verdict:
    """Every member of `high` lies above every member of `low`: the lowest of `high` above the highest of `low` by
    `margin` std of their difference. Each value is (mean, std)."""
    if not high or not low:
        raise NotMeasurable("a comparison needs a model on each side")
    lowest, highest = min(high, key=lambda name: high[name][0]), max(low, key=lambda name: low[name][0])
    apart = separation(high[lowest], low[highest])
    measured = f"lowest {lowest} {num(high[lowest][0])} against highest {highest} {num(low[highest][0])}"
    measured += f" ({std_units(apart)})"
    return Verdict(
        clears(apart, margin),
        measured,
        "" if clears(apart, margin) else f"{lowest} is {std_units(apart)} over {highest}, under {margin}",
    )


def majority(counted: dict[str, bool], *, share: float) -> Verdict:
    """More than `share` of the items (layers) count. Needs two items: of one, "most" says nothing."""
    if len(counted) < 2:
        raise NotMeasurable(f"{len(counted)} item(s) ({', '.join(counted) or 'none'}): 'most' needs 2 or more")
    found = sum(counted.values())
    measured = f"{found} of {len(counted)} ({', '.join(name for name, ok in counted.items() if ok) or 'none'})"
    holds = found > share * len(counted)
    return Verdict(holds, measured, "" if holds else f"{found} of {len(counted)}, not more than {share} of them")


def every(verdicts: dict[str, Verdict]) -> Verdict:
    """The verdicts of a claim's parts (its models, its settings) joined: no where any is no; not measurable where
    none is no and any is not measurable; yes where all hold. Each part's values and reasons are named by its key."""
    if not verdicts:
        raise NotMeasurable("nothing to judge")
    holds = (
        False
        if any(v.holds is False for v in verdicts.values())
        else None
        if any(v.holds is None for v in verdicts.values())
        else True
    )
    measured = "; ".join(f"{name}: {v.measured}" for name, v in verdicts.items() if v.measured)
    reasons = [f"{name}: {v.reason}" for name, v in verdicts.items() if v.reason and v.holds is not True]
    counts = f"{sum(v.holds is True for v in verdicts.values())} of {len(verdicts)} hold"
    return Verdict(holds, measured, "; ".join([counts, *reasons]) if holds is not True else "")


def judged(check: Callable[..., Verdict], *arguments) -> Verdict:
    """`check(*arguments)`, or a not-measurable verdict carrying the reason it raised."""
    try:
        return check(*arguments)
    except NotMeasurable as reason:
        return Verdict(None, "", str(reason))
