"""The predicates on a series, a profile across layers or a training run across checkpoints: one interior peak (a
bell, a rise then a fall), a fall from the peak, growth then a plateau, a loss that falls steadily. A rise or a fall
counts where it clears a margin in standard deviations of the difference (`predicates.separation`) and spans a share
of the peak (`claims.min_change`, `changes`): batches that agree to 0.1% make a 1% blip clear any margin.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from shape_of_learning.claims.predicates import NotMeasurable, Verdict, clears, num, separation, std_units


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
