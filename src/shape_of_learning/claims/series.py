"""The predicates on a series, a profile across layers or a training run across checkpoints: one interior peak (a
bell, a rise then a fall), a fall from the peak, growth then a plateau, a loss that falls steadily. A rise or a fall
counts where it clears a margin in standard deviations of the difference (`predicates.Margin`) and spans a share of
the peak (`claims.min_change`, `changes`): batches that agree to 0.1% make a 1% blip clear any margin in std. A peak's
position is resolved only as far as the points around it lie below it by such a change (`interior_peak`).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from shape_of_learning.claims.predicates import Margin, NotMeasurable, Verdict, num, std_units


@dataclass(frozen=True)
class Series:
    """Points of a profile (per layer) or of a training run (per checkpoint): positions, means, stds, and what a
    position is ("layer", "step")."""

    positions: np.ndarray
    means: np.ndarray
    stds: np.ndarray
    unit: str

    @classmethod
    def of(cls, positions, means, stds, unit: str, *, least: int, shape: str) -> "Series":
        """The points, or NotMeasurable where there are fewer than `least` (`shape` says what needs them)."""
        series = cls(*(np.asarray(values, float) for values in (positions, means, stds)), unit)
        if len(series.means) < least:
            raise NotMeasurable(f"{len(series.means)} point(s): {shape} needs {least}")
        return series

    def name(self, position: float) -> str:
        """ "layer 3", "step 1000"."""
        return f"{self.unit} {position:g}"

    def span(self, first: int, last: int) -> str:
        """Points `first` to `last` by position: "layers 1-7" (one point: "layer 4")."""
        if first == last:
            return self.name(self.positions[first])
        return f"{self.unit}s {self.positions[first]:g}-{self.positions[last]:g}"

    def at(self, index: int) -> str:
        return f"{self.name(self.positions[index])} ({num(self.means[index])})"

    def point(self, index: int) -> tuple[float, float]:
        return self.means[index], self.stds[index]


def changes(series: Series, start: int, end: int, *, margin: Margin, min_change: float, scale: float) -> bool:
    """Whether the series rises from point `start` to point `end` by a change that counts: it clears `margin` and
    spans at least `min_change` x |`scale`| (a share of the shape's peak)."""
    high, low = series.point(end), series.point(start)
    return margin.counts(high, low) and high[0] - low[0] >= min_change * abs(scale)


def _reversal(series: Series, first: int, last: int, rising: bool, counts: Callable[[int, int], bool]) -> str:
    """The first pair of points between `first` and `last` where a flank meant to rise falls (or one meant to fall
    rises) by a change that counts: a second peak. Empty where there is none."""
    for later in range(first + 1, last + 1):
        for earlier in range(first, later):
            if counts(*((later, earlier) if rising else (earlier, later))):
                moves = "falls" if rising else "rises"
                return f"it {moves} from {series.at(earlier)} to {series.at(later)}: a second peak"
    return ""


def _shape_failures(
    series: Series, peak: int, counts: Callable[[int, int], bool], margin: Margin, min_change: float
) -> list[str]:
    """Why the series is no single peak at `peak`: an end not below it by a change that counts, a second peak."""
    last = len(series.means) - 1
    failures = [
        f"the peak lies {std_units(margin.apart(series.point(peak), series.point(end)))} and "
        f"{num(series.means[peak] - series.means[end])} over {series.name(series.positions[end])}, not "
        f"{margin.std} std and {min_change} of the peak"
        for end in (0, last)
        if not counts(end, peak)
    ]
    return failures + list(
        filter(None, [_reversal(series, 0, peak, True, counts), _reversal(series, peak, last, False, counts)])
    )


def interior_peak(series: Series, *, margin: Margin, min_change: float, within: tuple[float, float]) -> Verdict:
    """A bell, or a rise then a fall: one resolved interior maximum, the series rising up to it and falling after it.

    The maximum lies above the first and the last point by a change that counts (`changes`: `margin` and
    `min_change` of the peak); no earlier point lies above a later one before it, no later point above an earlier
    one after it, by a change that counts (a second peak). Where it lies is resolved to an interval: the positions
    of every point the maximum does not exceed by a change that counts, its own included; as fractions of the last
    position (a layer's relative depth, a step's share of training) that whole interval lies strictly inside
    `within`. Where every interior point lies inside `within`, where the peak lies cannot fail: not measurable (a
    shape that fails is still no). Needs three points."""
    means, last = series.means, len(series.means) - 1
    peak = int(np.argmax(means))
    fraction = series.positions / series.positions[last] if series.positions[last] else np.full(last + 1, np.nan)
    measured = (
        f"peak {num(means[peak])} at {series.name(series.positions[peak])} ({fraction[peak]:.2f} of the way to "
        f"{series.name(series.positions[last])}), "
        + ", ".join(
            f"{std_units(margin.apart(series.point(peak), series.point(end)))} over "
            f"{series.name(series.positions[end])}"
            for end in (0, last)
        )
    )
    if peak in (0, last):
        return Verdict(
            False,
            measured,
            f"the maximum is at the {'first' if peak == 0 else 'last'} point, {series.name(series.positions[peak])}",
        )

    def counts(start: int, end: int) -> bool:
        return changes(series, start, end, margin=margin, min_change=min_change, scale=means[peak])

    if failures := _shape_failures(series, peak, counts, margin, min_change):
        return Verdict(False, measured, "; ".join(failures))
    if ((within[0] < fraction[1:last]) & (fraction[1:last] < within[1])).all():
        raise NotMeasurable(
            f"{measured}; every interior point lies inside ({within[0]}, {within[1]}): where the "
            f"peak lies cannot fail with {last + 1} points"
        )
    tied = [index for index in range(last + 1) if not counts(index, peak)]  # the peak itself among them
    first, end = tied[0], tied[-1]
    if first != end:
        measured += f"; within its margin: {series.span(first, end)} ({fraction[first]:.2f} to {fraction[end]:.2f})"
    if within[0] < fraction[first] and fraction[end] < within[1]:
        return Verdict(True, measured)
    if first == end:
        return Verdict(False, measured, f"the peak lies at {fraction[peak]:.2f}, outside ({within[0]}, {within[1]})")
    return Verdict(
        False,
        measured,
        f"{series.span(first, end)} lie within the margin of the peak: its position is not resolved to "
        f"({within[0]}, {within[1]})",
    )


def falls_from_peak(series: Series, *, margin: Margin, min_change: float) -> tuple[Verdict, int]:
    """The series falls after its maximum: the last point lies below it by a change that counts (`changes`, scaled
    by the maximum). The verdict, and the maximum's index. Needs two points."""
    peak, last = int(np.argmax(series.means)), len(series.means) - 1
    fall = margin.apart(series.point(peak), series.point(last))
    measured = f"peaks at {series.at(peak)}, {series.at(last)} at the end ({std_units(fall)})"
    holds = changes(series, last, peak, margin=margin, min_change=min_change, scale=series.means[peak])
    return Verdict(
        holds,
        measured,
        ""
        if holds
        else f"it falls {std_units(fall)} and "
        f"{num(series.means[peak] - series.means[last])} after its peak, not {margin.std} std and "
        f"{min_change} of the peak",
    ), peak


def grows_then_stabilises(series: Series, *, margin: Margin, stable_from: float, stable_share: float) -> Verdict:
    """Grows: the last point lies above the first by `margin` (the rise: last less first). Never falls back: from the
    first point that far above the first on, no point lies below an earlier one by a fall that clears `margin` and
    exceeds `stable_share` of the rise (a spike that collapses). Then stabilises: from step `stable_from` x the last
    step on, the points move (max - min) by at most `stable_share` of the rise, or by less than `margin` (a plateau
    jittering in its noise). Needs 2 points in that stretch."""
    steps, means, last = series.positions, series.means, len(series.means) - 1
    late = np.flatnonzero(steps >= stable_from * steps[last])
    if len(late) < 2:
        raise NotMeasurable(f"{len(late)} point(s) from step {stable_from * steps[last]:g} on: stabilising needs 2")
    grown, rise = margin.apart(series.point(last), series.point(0)), means[last] - means[0]
    high, low = late[np.argmax(means[late])], late[np.argmin(means[late])]
    moved, jitter = means[high] - means[low], margin.apart(series.point(high), series.point(low))
    measured = (
        f"{series.at(0)} to {series.at(last)} ({std_units(grown)}); moves {num(moved)} ({std_units(jitter)}) "
        f"from step {steps[late[0]]:g} on"
    )
    if not margin.clears(grown):
        return Verdict(False, measured, f"grows by {std_units(grown)}, under {margin.std}")
    risen = next(index for index in range(last + 1) if margin.counts(series.point(index), series.point(0)))
    for later in range(risen + 1, last + 1):
        top = risen + int(np.argmax(means[risen:later]))
        if margin.counts(series.point(top), series.point(later)) and (means[top] - means[later] > stable_share * rise):
            return Verdict(
                False,
                measured,
                f"after its rise it falls from {series.at(top)} to {series.at(later)}, "
                f"more than {margin.std} std and {stable_share} of its rise {num(rise)}",
            )
    if moved > stable_share * rise and margin.clears(jitter):
        return Verdict(
            False,
            measured,
            f"moves {num(moved)} from step {steps[late[0]]:g} on, more than "
            f"{stable_share} of its rise {num(rise)} and {std_units(jitter)}",
        )
    return Verdict(True, measured)


def falls_steadily(
    steps: Sequence[float], losses: Sequence[float], errors: Sequence[float], *, margin: Margin
) -> Verdict:
    """A loss that improves steadily: it ends lower than it starts by `margin` (in standard errors of the difference,
    from each loss's own standard error `errors`), and over no stretch of checkpoints (from any one to any later
    one, not only neighbours) does it rise by `margin`: a loss creeping up in small steps is no improvement. Needs
    two checkpoints, each with its standard error."""
    steps, losses, errors = (np.asarray(values, float) for values in (steps, losses, errors))
    if len(losses) < 2:
        raise NotMeasurable(f"{len(losses)} checkpoint(s) with a loss: a trend needs 2")
    if np.isnan(errors).any():
        raise NotMeasurable(
            "a loss without its standard error (manifests written before extraction recorded `sum_squares`): "
            "rerun their extraction (`snakemake -R extract_hidden_states`)"
        )
    later, earlier = np.triu_indices(len(losses), k=1)[::-1]  # every pair, the later first
    rises = [margin.apart((losses[j], errors[j]), (losses[i], errors[i])) for j, i in zip(later, earlier)]
    worst = int(np.argmax(rises))
    fall = margin.apart((losses[0], errors[0]), (losses[-1], errors[-1]))
    measured = (
        f"loss {num(losses[0])} at step {steps[0]:g} to {num(losses[-1])} at step {steps[-1]:g} "
        f"({std_units(-fall)}), largest rise over any stretch {std_units(max(rises[worst], 0.0))}"
    )
    failures = []
    if not margin.clears(fall):
        failures.append(f"it falls {std_units(fall)}, under {margin.std}")
    if margin.clears(rises[worst]):
        j, i = later[worst], earlier[worst]
        failures.append(
            f"it rises {std_units(rises[worst])} from step {steps[i]:g} ({num(losses[i])}) to step {steps[j]:g} "
            f"({num(losses[j])}), at least {margin.std}"
        )
    return Verdict(not failures, measured, "; ".join(failures))
