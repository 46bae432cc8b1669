"""The tests every claim is stated with. Each turns a vague word of a paper ("bell-shaped", "stabilises", "more
uniform", "much more anisotropic in most layers", "costs less") into a test on numbers against a stated threshold
and returns a `Verdict`: whether it holds, what was measured, and why not. Pure functions of numbers; which numbers
each claim gives them is the business of the catalogue (one module per paper). Here: the verdict, the margin a
difference must clear, and comparisons of values (of models, of settings); comparisons of profiles across layers are
in `profiles`, the shapes of a series (a bell, a rise then a fall, growth that stabilises, a falling loss) in
`series`.

A difference "counts" when it clears a margin in standard deviations of the difference (`Margin`, `separation`): a
batch-to-batch std for the main paper's metrics, a seed-to-seed one for Rajaee & Pilehvar (`claims.margin_std`), the
std of a difference never taken below a stated share of the values (`claims.spread_floor`). A rise or a fall of a
shape must also span a share of its peak (`series.changes`).
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
    """holds: True, False, or None where the claim is not measurable or turns on a choice (`depends_on`); measured:
    the values it was judged on; reason: why it does not hold, or why it is not measurable (empty where it holds)."""

    holds: bool | None
    measured: str = ""
    reason: str = ""
    depends_on: str = ""  # a choice it holds under and not under another ("the I(W) convention"); holds is None

    def __post_init__(self):  # a numpy bool is no `True`: `every` tells the three by identity
        object.__setattr__(self, "holds", None if self.holds is None else bool(self.holds))

    def noting(self, note: str) -> "Verdict":
        """This verdict with `note` (which checkpoints it read, and why) added to what was measured."""
        return Verdict(self.holds, "; ".join(filter(None, [self.measured, note])), self.reason, self.depends_on)

    @property
    def word(self) -> str:
        """The scorecard's word for it: yes, no, not measurable (`HOLDS`), or "depends on" the choice it turns on."""
        return f"depends on {self.depends_on}" if self.depends_on else HOLDS[self.holds]


def num(value: float) -> str:
    """A measured value as the scorecard prints it: 3 significant digits."""
    return f"{value:.3g}"


@dataclass(frozen=True)
class Margin:
    """How far apart two values, each (mean, std), must lie for their difference to count: `std` standard deviations
    of the difference (claims.margin_std), the std of a difference never taken below `floor` x the larger |mean| of
    the two (claims.spread_floor)."""

    std: float
    floor: float

    @classmethod
    def of(cls, settings: dict) -> "Margin":
        return cls(settings["margin_std"], settings["spread_floor"])

    def apart(self, high: tuple[float, float], low: tuple[float, float]) -> float:
        """`separation` with this margin's floor."""
        return separation(high, low, floor=self.floor)

    def clears(self, apart: float) -> bool:
        """A separation that counts: at least `std`, and a difference at all (a margin of 0 still asks for one)."""
        return apart >= self.std and apart > 0

    def counts(self, high: tuple[float, float], low: tuple[float, float]) -> bool:
        """`high` lies above `low` by this margin."""
        return self.clears(self.apart(high, low))


def separation(high: tuple[float, float], low: tuple[float, float], *, floor: float) -> float:
    """How far `high` lies above `low`, each (mean, std), in std of their difference: (m_h - m_l) / max(sqrt(s_h^2 +
    s_l^2), `floor` x max(|m_h|, |m_l|)).

    The floor is the resolution no spread can beat: a value with no spread (the paper's one run, a value no seed
    changes) or batches that agree to a fraction of it cannot resolve a smaller difference. It keeps a separation
    invariant under scaling both values (means and stds) by c > 0; under adding a constant to both only where the
    spread exceeds the floor before and after (the floor follows the values' magnitude, the spread does not). Where
    the std of the difference is 0 still (a floor of 0, or both values 0), +-inf by the sign of the difference, 0
    for none. A NaN std (one batch, one seed) is the caller's to refuse: it raises here."""
    difference = high[0] - low[0]
    spread = max(math.hypot(high[1], low[1]), floor * max(abs(high[0]), abs(low[0])))
    if math.isnan(spread):
        raise NotMeasurable("no standard deviation to measure a margin in")
    if spread == 0:
        return math.copysign(math.inf, difference) if difference else 0.0
    return difference / spread


def std_units(apart: float) -> str:
    """A separation as the scorecard prints it: "+2.3 std" ("+1.2e+04 std" where no noise to speak of)."""
    return f"{apart:+.1f} std" if abs(apart) < 1e4 else f"{apart:+.2g} std"


def above(high: tuple[float, float], low: tuple[float, float], *, margin: Margin, what: str) -> Verdict:
    """`high` lies above `low` by `margin`; `what` names the two ("ViT's over its floor")."""
    apart = margin.apart(high, low)
    measured = f"{what}: {num(high[0])} against {num(low[0])} ({std_units(apart)})"
    holds = margin.clears(apart)
    return Verdict(holds, measured, "" if holds else f"{what}: {std_units(apart)}, under {margin.std}")


def groups_apart(high: dict, low: dict, compare: Callable[..., Verdict]) -> Verdict:
    """Every member of `high` lies above every member of `low`: `compare(high member, low member)` holds for each
    pair, so that each pair's own spreads decide (not the lowest and the highest means alone)."""
    if not high or not low:
        raise NotMeasurable("a comparison needs a model on each side")
    return every({f"{upper} over {lower}": compare(high[upper], low[lower]) for upper in high for lower in low})


def spread_ratio(
    uniform: dict[str, tuple[float, float]],
    varied: dict[str, tuple[float, float]],
    *,
    max_ratio: float,
    margin: Margin,
    what: str,
) -> Verdict:
    """The models of `uniform` vary less than those of `varied`, each a spread (value, std): the median of `varied`'s
    spreads lies above the median of `uniform`'s / `max_ratio` by `margin` (`above`; medians over models of the value
    and of its std), so a `varied` median within its own noise never holds. `what` names the two."""
    if not uniform or not varied:
        raise NotMeasurable("a comparison needs a model on each side")
    low, high = (
        tuple(float(np.median([found[i] for found in side.values()])) for i in (0, 1)) for side in (uniform, varied)
    )
    return above(high, (low[0] / max_ratio, low[1] / max_ratio), margin=margin, what=what)


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


def under_each(verdicts: dict[str, Verdict], choice: str) -> Verdict:
    """One verdict of a claim judged under each option of a `choice` (the I(W) convention: sign-free, the
    notebook's), by option: their common verdict where all agree, else one that depends on `choice`; either way
    with every option's values and reasons, each named."""
    if len(set(verdicts.values())) == 1:
        return next(iter(verdicts.values()))
    words = {verdict.word for verdict in verdicts.values()}
    measured = "; ".join(f"{name}: {v.measured}" for name, v in verdicts.items() if v.measured)
    reason = "; ".join(f"{name}: {v.reason}" for name, v in verdicts.items() if v.reason)
    if len(words) == 1:
        return Verdict(next(iter(verdicts.values())).holds, measured, reason)
    return Verdict(None, measured, reason, depends_on=choice)


def judged(check: Callable[..., Verdict], *arguments) -> Verdict:
    """`check(*arguments)`, or a not-measurable verdict carrying the reason it raised."""
    try:
        return check(*arguments)
    except NotMeasurable as reason:
        return Verdict(None, "", str(reason))
