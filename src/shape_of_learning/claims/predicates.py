"""The tests every claim is stated with. Each turns a vague word of a paper ("bell-shaped", "stabilises", "more
uniform", "much more anisotropic in most layers", "costs less") into a test on numbers against a stated threshold
and returns a `Verdict`: whether it holds, what was measured, and why not. Pure functions of numbers; which numbers
each claim gives them is the business of the catalogue (one module per paper).

A difference "counts" when it clears a margin in standard deviations of the difference (`separation`): a batch-to-
batch std for the main paper's metrics, a seed-to-seed one for Rajaee & Pilehvar (`claims.margin_std`). A rise or a
fall of a shape (a bell, a rise then a fall) must also span a share of its peak (`claims.min_change`, `changes`):
batches that agree to 0.1% make a 1% blip clear any margin.
"""

import math
from collections.abc import Callable, Sequence
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


@dataclass(frozen=True)
class Series:
    """Points of a profile (per layer) or of a training run (per checkpoint): positions, means, stds, and how a
    position reads ("layer 3", "step 1000")."""

    positions: np.ndarray
    means: np.ndarray
    stds: np.ndarray
    name: Callable[[float], str]

    @classmethod
    def of(cls, positions, means, stds, name: Callable[[float], str], *, least: int, shape: str) -> "Series":
        """The points, or NotMeasurable where there are fewer than `least` (`shape` says what needs them)."""
        series = cls(*(np.asarray(values, float) for values in (positions, means, stds)), name)
        if len(series.means) < least:
            raise NotMeasurable(f"{len(series.means)} point(s): {shape} needs {least}")
        return series

    def at(self, index: int) -> str:
        return f"{self.name(self.positions[index])} ({num(self.means[index])})"

    def point(self, index: int) -> tuple[float, float]:
        return self.means[index], self.stds[index]


def changes(series: Series, start: int, end: int, *, margin: float, min_change: float, scale: float) -> bool:
    """Whether the series rises from point `start` to point `end` by a change that counts: it clears `margin` std of
    the difference and spans at least `min_change` x |`scale`| (a share of the shape's peak)."""
    high, low = series.point(end), series.point(start)
    return clears(separation(high, low), margin) and high[0] - low[0] >= min_change * abs(scale)


def _reversal(series: Series, first: int, last: int, rising: bool, counts: Callable[[int, int], bool]) -> str:
    """The first pair of points between `first` and `last` where a flank meant to rise falls (or one meant to fall
    rises) by a change that counts: a second peak. Empty where there is none."""
    for later in range(first + 1, last + 1):
        for earlier in range(first, later):
            if counts(*((later, earlier) if rising else (earlier, later))):
                moves = "falls" if rising else "rises"
                return f"it {moves} from {series.at(earlier)} to {series.at(later)}: a second peak"
    return ""


def interior_peak(series: Series, *, margin: float, min_change: float, within: tuple[float, float]) -> Verdict:
    """A bell, or a rise then a fall: one interior maximum, the series rising up to it and falling after it.

    The maximum lies strictly inside; it lies above the first and the last point by a change that counts
    (`changes`: `margin` std of the difference and `min_change` of the peak); no earlier point lies above a later
    one before the peak, no later point above an earlier one after it, by a change that counts (a second peak); its
    position as a fraction of the last position (a layer's relative depth, a step's share of training) lies strictly
    inside `within`. Where every interior point lies inside `within`, where the peak lies cannot fail: not
    measurable (a shape that fails is still no). Needs three points."""
    means, last = series.means, len(series.means) - 1
    peak = int(np.argmax(means))
    fraction = series.positions[peak] / series.positions[last] if series.positions[last] else math.nan
    above = {end: separation(series.point(peak), series.point(end)) for end in (0, last)}
    measured = (
        f"peak {num(means[peak])} at {series.name(series.positions[peak])} ({fraction:.2f} of the way to "
        f"{series.name(series.positions[last])}), "
        + ", ".join(f"{std_units(above[end])} over {series.name(series.positions[end])}" for end in (0, last))
    )
    if peak in (0, last):
        return Verdict(
            False,
            measured,
            f"the maximum is at the {'first' if peak == 0 else 'last'} point, {series.name(series.positions[peak])}",
        )

    def counts(start: int, end: int) -> bool:
        return changes(series, start, end, margin=margin, min_change=min_change, scale=means[peak])

    failures = [
        f"the peak lies {std_units(above[end])} and {num(means[peak] - means[end])} over "
        f"{series.name(series.positions[end])}, not {margin} std and {min_change} of the peak"
        for end in (0, last)
        if not counts(end, peak)
    ]
    failures += filter(None, [_reversal(series, 0, peak, True, counts), _reversal(series, peak, last, False, counts)])
    if failures:
        return Verdict(False, measured, "; ".join(failures))
    interior = series.positions[1:last] / series.positions[last]
    if ((within[0] < interior) & (interior < within[1])).all():
        raise NotMeasurable(
            f"{measured}; every interior point lies inside ({within[0]}, {within[1]}): where the "
            f"peak lies cannot fail with {last + 1} points"
        )
    if not within[0] < fraction < within[1]:
        return Verdict(False, measured, f"the peak lies at {fraction:.2f}, outside ({within[0]}, {within[1]})")
    return Verdict(True, measured)


def falls_from_peak(series: Series, *, margin: float, min_change: float) -> tuple[Verdict, int]:
    """The series falls after its maximum: the last point lies below it by a change that counts (`changes`, scaled
    by the maximum). The verdict, and the maximum's index. Needs two points."""
    peak, last = int(np.argmax(series.means)), len(series.means) - 1
    fall = separation(series.point(peak), series.point(last))
    measured = f"peaks at {series.at(peak)}, {series.at(last)} at the end ({std_units(fall)})"
    holds = changes(series, last, peak, margin=margin, min_change=min_change, scale=series.means[peak])
    return Verdict(
        holds,
        measured,
        ""
        if holds
        else f"it falls {std_units(fall)} and "
        f"{num(series.means[peak] - series.means[last])} after its peak, not {margin} std and "
        f"{min_change} of the peak",
    ), peak


def grows_then_stabilises(series: Series, *, margin: float, stable_from: float, stable_share: float) -> Verdict:
    """Grows: the last point lies above the first by `margin` std of the difference (the rise: last less first).
    Never falls back: from the first point that far above the first on, no point lies below an earlier one by a
    fall that clears `margin` std and exceeds `stable_share` of the rise (a spike that collapses). Then stabilises:
    from step `stable_from` x the last step on, the points move (max - min) by at most `stable_share` of the rise,
    or by less than `margin` std of the difference (a plateau jittering in its noise). Needs 2 points in that stretch.
    """
    steps, means, last = series.positions, series.means, len(series.means) - 1
    late = np.flatnonzero(steps >= stable_from * steps[last])
    if len(late) < 2:
        raise NotMeasurable(f"{len(late)} point(s) from step {stable_from * steps[last]:g} on: stabilising needs 2")
    grown, rise = separation(series.point(last), series.point(0)), means[last] - means[0]
    high, low = late[np.argmax(means[late])], late[np.argmin(means[late])]
    moved, jitter = means[high] - means[low], separation(series.point(high), series.point(low))
    measured = (
        f"{series.at(0)} to {series.at(last)} ({std_units(grown)}); moves {num(moved)} ({std_units(jitter)}) "
        f"from step {steps[late[0]]:g} on"
    )
    if not clears(grown, margin):
        return Verdict(False, measured, f"grows by {std_units(grown)}, under {margin}")
    risen = next(index for index in range(last + 1) if clears(separation(series.point(index), series.point(0)), margin))
    for later in range(risen + 1, last + 1):
        top = risen + int(np.argmax(means[risen:later]))
        if clears(separation(series.point(top), series.point(later)), margin) and (
            means[top] - means[later] > stable_share * rise
        ):
            return Verdict(
                False,
                measured,
                f"after its rise it falls from {series.at(top)} to {series.at(later)}, "
                f"more than {margin} std and {stable_share} of its rise {num(rise)}",
            )
    if moved > stable_share * rise and clears(jitter, margin):
        return Verdict(
            False,
            measured,
            f"moves {num(moved)} from step {steps[late[0]]:g} on, more than "
            f"{stable_share} of its rise {num(rise)} and {std_units(jitter)}",
        )
    return Verdict(True, measured)


def falls_steadily(steps: Sequence[float], losses: Sequence[float], *, tolerance: float) -> Verdict:
    """A loss that improves steadily: it ends lower than it starts by more than `tolerance`, and over no stretch of
    checkpoints (from any one to any later one, not only neighbours) does it rise by more than `tolerance`: a loss
    creeping up in small steps is no improvement. Needs two checkpoints."""
    steps, losses = np.asarray(steps, float), np.asarray(losses, float)
    if len(losses) < 2:
        raise NotMeasurable(f"{len(losses)} checkpoint(s) with a loss: a trend needs 2")
    lowest_before = np.minimum.accumulate(losses)[:-1]
    rises = losses[1:] - lowest_before
    worst = int(np.argmax(rises)) + 1
    start = int(np.flatnonzero(losses[:worst] == lowest_before[worst - 1])[-1])
    drop = losses[0] - losses[-1]
    measured = (
        f"loss {num(losses[0])} at step {steps[0]:g} to {num(losses[-1])} at step {steps[-1]:g}, "
        f"largest rise over any stretch {num(max(rises[worst - 1], 0))}"
    )
    failures = []
    if drop <= tolerance:
        failures.append(f"it falls by {num(drop)}, not more than {tolerance}")
    if rises[worst - 1] > tolerance:
        failures.append(
            f"it rises by {num(rises[worst - 1])} from step {steps[start]:g} to {steps[worst]:g}, more than {tolerance}"
        )
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
