"""The tests every claim is stated with. Each turns a vague word of a paper ("bell-shaped", "stabilises", "more
uniform", "much more anisotropic in most layers", "costs less") into a test on numbers against a stated threshold
and returns a `Verdict`: whether it holds, what was measured, and why not. Pure functions of numbers; which numbers
each claim gives them is shape_of_learning.claims.catalogue's business.

A difference "counts" when it clears a margin in standard deviations of the difference (`separation`): a batch-to-
batch std for the main paper's metrics, a seed-to-seed one for Rajaee & Pilehvar (`claims.margin_std`).
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

HOLDS = {True: "yes", False: "no", None: "not measurable"}  # the scorecard's words for a verdict


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
    return f"{apart:+.1f} std"


def interior_peak(positions: Sequence[float], means: Sequence[float], stds: Sequence[float], *, margin: float,
                  within: tuple[float, float], name: Callable[[float], str]) -> Verdict:
    """A bell, or a rise then a fall: the maximum of `means` lies strictly inside the series, above the first and
    the last point by at least `margin` std of the difference each (`separation`), at a position whose fraction of
    the last position (a layer's relative depth, a step's share of training) lies within `within`. `name` says a
    position in words ("layer 3", "step 1000"). Needs three points."""
    means, stds, positions = np.asarray(means, float), np.asarray(stds, float), np.asarray(positions, float)
    if len(means) < 3:
        raise NotMeasurable(f"{len(means)} point(s): an interior maximum needs 3")
    peak, last = int(np.argmax(means)), len(means) - 1
    fraction = positions[peak] / positions[last] if positions[last] else math.nan
    above = {end: separation((means[peak], stds[peak]), (means[end], stds[end])) for end in (0, last)}
    measured = (f"peak {num(means[peak])} at {name(positions[peak])} ({fraction:.2f} of the way to "
                f"{name(positions[last])}), "
                f"{std_units(above[0])} over {name(positions[0])}, {std_units(above[last])} over "
                f"{name(positions[last])}")
    if peak in (0, last):
        return Verdict(False, measured, f"the maximum is at the {'first' if peak == 0 else 'last'} point, "
                                        f"{name(positions[peak])}")
    failures = [f"the peak is {std_units(above[end])} over {name(positions[end])}, under {margin}"
                for end in (0, last) if not clears(above[end], margin)]
    if not within[0] <= fraction <= within[1]:
        failures.append(f"the peak lies at {fraction:.2f}, outside [{within[0]}, {within[1]}]")
    return Verdict(not failures, measured, "; ".join(failures))


def grows_then_stabilises(steps: Sequence[float], means: Sequence[float], stds: Sequence[float], *, margin: float,
                          stable_from: float, stable_share: float) -> Verdict:
    """Grows: the last checkpoint lies above the first by `margin` std of the difference. Then stabilises: from step
    `stable_from` x the last step on, the values move (max - min) by at most `stable_share` of the rise from the
    first to the last checkpoint. Needs two checkpoints in that late stretch."""
    steps, means, stds = np.asarray(steps, float), np.asarray(means, float), np.asarray(stds, float)
    late = steps >= stable_from * steps[-1]
    if late.sum() < 2:
        raise NotMeasurable(f"{late.sum()} checkpoint(s) from step {stable_from * steps[-1]:g} on: stabilising "
                            "needs 2")
    grown = separation((means[-1], stds[-1]), (means[0], stds[0]))
    rise, moved = means[-1] - means[0], float(means[late].max() - means[late].min())
    measured = (f"{num(means[0])} at step {steps[0]:g} to {num(means[-1])} at step {steps[-1]:g} "
                f"({std_units(grown)}); moves {num(moved)} from step {steps[late][0]:g} on")
    if not clears(grown, margin):
        return Verdict(False, measured, f"grows by {std_units(grown)}, under {margin}")
    if moved > stable_share * rise:
        return Verdict(False, measured, f"moves {num(moved)} from step {steps[late][0]:g} on, more than "
                                        f"{stable_share} of its rise {num(rise)}")
    return Verdict(True, measured)


def falls_steadily(steps: Sequence[float], losses: Sequence[float], *, tolerance: float) -> Verdict:
    """A loss that improves steadily: it ends lower than it starts by more than `tolerance`, and no checkpoint's
    loss exceeds the one before it by more than `tolerance`. Needs two checkpoints."""
    steps, losses = np.asarray(steps, float), np.asarray(losses, float)
    if len(losses) < 2:
        raise NotMeasurable(f"{len(losses)} checkpoint(s) with a loss: a trend needs 2")
    drop, rises = losses[0] - losses[-1], np.diff(losses)
    worst = int(np.argmax(rises))
    measured = (f"loss {num(losses[0])} at step {steps[0]:g} to {num(losses[-1])} at step {steps[-1]:g}, "
                f"largest rise {num(max(rises[worst], 0))}")
    failures = []
    if drop <= tolerance:
        failures.append(f"it falls by {num(drop)}, not more than {tolerance}")
    if rises[worst] > tolerance:
        failures.append(f"it rises by {num(rises[worst])} from step {steps[worst]:g} to {steps[worst + 1]:g}, more "
                        f"than {tolerance}")
    return Verdict(not failures, measured, "; ".join(failures))


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


def groups_apart(high: dict[str, tuple[float, float]], low: dict[str, tuple[float, float]], *, margin: float
                 ) -> Verdict:
    """Every member of `high` lies above every member of `low`: the lowest of `high` above the highest of `low` by
    `margin` std of their difference. Each value is (mean, std)."""
    if not high or not low:
        raise NotMeasurable("a comparison needs a model on each side")
    lowest, highest = min(high, key=lambda name: high[name][0]), max(low, key=lambda name: low[name][0])
    apart = separation(high[lowest], low[highest])
    measured = f"lowest {lowest} {num(high[lowest][0])} against highest {highest} {num(low[highest][0])}"
    measured += f" ({std_units(apart)})"
    return Verdict(clears(apart, margin), measured,
                   "" if clears(apart, margin) else f"{lowest} is {std_units(apart)} over {highest}, under {margin}")


def majority(counted: dict[str, bool], *, share: float) -> Verdict:
    """More than `share` of the items (layers) count."""
    if not counted:
        raise NotMeasurable("nothing to count")
    found = sum(counted.values())
    measured = f"{found} of {len(counted)} ({', '.join(name for name, ok in counted.items() if ok) or 'none'})"
    holds = found > share * len(counted)
    return Verdict(holds, measured, "" if holds else f"{found} of {len(counted)}, not more than {share} of them")


def every(verdicts: dict[str, Verdict]) -> Verdict:
    """The verdicts of a claim's parts (its models, its settings) joined: no where any is no; not measurable where
    none is no and any is not measurable; yes where all hold. Each part's values and reasons are named by its key."""
    if not verdicts:
        raise NotMeasurable("nothing to judge")
    holds = (False if any(v.holds is False for v in verdicts.values()) else
             None if any(v.holds is None for v in verdicts.values()) else True)
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
