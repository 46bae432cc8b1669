"""The claims' predicates on generated inputs: metric profiles (per-layer means and batch stds) and training series
(over log-spaced steps) built around each claim's boundary. A shape or a comparison that holds by the margin (the
margin x (1 + a generated slack), with min_change where the rule reads it) gives "yes"; one whose deciding difference
lies within the noise (under margin_std std of the difference) never does; a relative claim's verdict does not
change when a metric is scaled or shifted; two values with no spread closer than the floor never count.

Each property's docstring names the rule it guards and what it failed on: today's rule before issue 57, or a
deliberate mutation of the new one, each run against this file (the mutation applied to a copy of the package).
"""

import functools
import math

import numpy as np
import pandas as pd
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_claims import summary

from shape_of_learning.claims import predicates as P
from shape_of_learning.claims import series as S
from shape_of_learning.claims.claim import Group
from shape_of_learning.claims.profiles import Profile, exceeds
from shape_of_learning.claims.razzhigaev_checks import check_uniform

MIDDLE, EARLY = (0.2, 0.8), (0.0, 0.5)  # the paper config's `middle`, and `early` as a rise then a fall reads it
margins = st.builds(P.Margin, st.floats(1.0, 3.0), st.floats(0.001, 0.03))  # margin_std, spread_floor
slacks = st.floats(0.01, 0.5)
inside = st.floats(0.0, 0.99)  # a share of the noise: under 1, inside it


def holds(check, *arguments, **keywords) -> bool | None:
    """The verdict's `holds`, None where the check says it cannot be judged."""
    try:
        return check(*arguments, **keywords).holds
    except P.NotMeasurable:
        return None


def noise(margin: P.Margin, high: tuple[float, float], low: tuple[float, float]) -> float:
    """margin_std std of the difference of two values, the std floored (`predicates.separation`), for `low` below
    `high` > 0."""
    return margin.std * max(math.hypot(high[1], low[1]), margin.floor * abs(high[0]))


# --- shapes: a resolved peak (a bell across layers, a rise then a fall over training) ----------------------------

layers = st.integers(5, 20).map(lambda depth: np.arange(depth + 1, dtype=float))


@st.composite
def log_spaced_steps(draw) -> np.ndarray:
    """Step 0, log-spaced steps up to 0.4 of training, and 2-4 late steps from 0.55 of it to its last."""
    last = draw(st.integers(1000, 200_000))
    early = np.unique(np.round(np.geomspace(1, 0.4 * last, draw(st.integers(3, 8)))))
    late = np.round(np.linspace(0.55 * last, last, draw(st.integers(2, 4))))
    return np.concatenate([[0.0], early, late])


@st.composite
def resolved_peaks(draw, positions: st.SearchStrategy, within: tuple[float, float], unit: str):
    """(series, margin, min_change): one maximum whose tie interval (the points within min_change or margin_std of it,
    each below it: the maximum is one point) lies inside `within`; every point outside it lies below the maximum by
    margin_std x (1 + slack) std of the difference and by min_change x (1 + slack) of the peak; both flanks
    monotone."""
    where = draw(positions)
    count, fraction = len(where), where / where[-1]
    inside = [index for index in range(1, count - 1) if within[0] < fraction[index] < within[1]]
    peak = draw(st.sampled_from(inside))
    first = draw(st.sampled_from([i for i in inside if i <= peak and set(range(i, peak + 1)) <= set(inside)]))
    last = draw(st.sampled_from([i for i in inside if i >= peak and set(range(peak, i + 1)) <= set(inside)]))
    margin, min_change, slack = draw(margins), draw(st.floats(0.0, 0.25)), draw(slacks)
    top = draw(st.floats(0.1, 1000.0))
    stds = np.array(draw(st.lists(st.floats(0.0, 0.03), min_size=count, max_size=count))) * top
    means = np.full(count, top)
    # the tie interval: under the least threshold any of its points could have (the floor's), monotone to the peak
    tie = max(min_change * top, margin.std * margin.floor * top)
    for side in (range(peak - 1, first - 1, -1), range(peak + 1, last + 1)):
        drops = sorted(draw(st.lists(st.floats(0.001, 0.99), min_size=len(side), max_size=len(side))))
        means[list(side)] = top - tie * np.array(drops)
    # the flanks: each point below the peak by a change that counts, and below its inner neighbour
    for side in (range(first - 1, -1, -1), range(last + 1, count)):
        drop = 0.0
        for index in side:
            needed = max(min_change * top, noise(margin, (top, stds[peak]), (0.0, stds[index])))
            drop = max(drop, (1 + slack) * needed) + draw(st.floats(0.0, 0.02)) * top
            means[index] = top - drop
    return S.Series(where, means, stds, unit), margin, min_change


def peak_verdict(shape, within) -> bool | None:
    series, margin, min_change = shape
    return holds(S.interior_peak, series, margin=margin, min_change=min_change, within=within)


@settings(max_examples=150)
@given(bell=resolved_peaks(layers, MIDDLE, "layer"), steps=resolved_peaks(log_spaced_steps(), EARLY, "step"))
def test_a_peak_resolved_inside_its_interval_by_the_margin_is_a_bell_or_a_rise_then_a_fall(bell, steps):
    """`interior_peak` holds where the ends and flanks lie below the peak by margin_std x (1 + slack) std of the
    difference and min_change x (1 + slack) of the peak, and its tie interval lies inside `within` (the middle layers;
    early training). Guards the rule against reaching too far: fails on a mutation that refuses a peak tied with any
    neighbour (a unique maximum), and on one that takes the std of a difference as the sum of the two stds."""
    assert peak_verdict(bell, MIDDLE) is True
    assert peak_verdict(steps, EARLY) is True


@st.composite
def unresolved_peaks(draw, positions: st.SearchStrategy, within: tuple[float, float], unit: str):
    """A resolved peak with one point outside `within` (an end, or an interior point) moved to within the noise of
    the maximum: less than margin_std std of the difference below it."""
    series, margin, min_change = draw(resolved_peaks(positions, within, unit))
    fraction, peak = series.positions / series.positions[-1], int(np.argmax(series.means))
    outside = [index for index, share in enumerate(fraction) if not within[0] < share < within[1]]
    moved = draw(st.sampled_from(outside))
    top = (series.means[peak], series.stds[peak])
    means = series.means.copy()
    means[moved] = top[0] - draw(inside) * noise(margin, top, (0.0, series.stds[moved]))
    return S.Series(series.positions, means, series.stds, series.unit), margin, min_change


@settings(max_examples=150)
@given(bell=unresolved_peaks(layers, MIDDLE, "layer"), steps=unresolved_peaks(log_spaced_steps(), EARLY, "step"))
def test_a_peak_with_a_point_outside_its_interval_inside_the_noise_is_never_a_bell_or_a_rise_then_a_fall(bell, steps):
    """A point outside `within` less than margin_std std of the difference below the maximum: its position is not
    resolved (or an end does not lie below it), never "yes". Fails on today's rule, a bare argmax (mutation: the tie
    interval is the maximum alone), e.g. layers 0-5 at 0.977, 0.992, 1, 0.977, 0.977, 0.977 with no spread (margin 1,
    floor 1/64): layer 1, at 0.2 of the depth, lies 0.5 std under the peak at layer 2; and on today's separation,
    without the floor (the same example: +inf std)."""
    assert peak_verdict(bell, MIDDLE) is not True
    assert peak_verdict(steps, EARLY) is not True


# --- profiles of two models set side by side by relative depth ----------------------------------------------------


@st.composite
def profiles(draw, low_std: float = 0.0) -> Profile:
    """A model's profile across 1-16 layers: means in [0.05, 1], stds in [low_std, low_std + 0.05]."""
    depth = draw(st.integers(1, 16))
    means = draw(st.lists(st.floats(0.05, 1.0), min_size=depth + 1, max_size=depth + 1))
    stds = np.array(draw(st.lists(st.floats(0.0, 0.05), min_size=depth + 1, max_size=depth + 1))) + low_std
    return Profile(np.arange(depth + 1, dtype=float), np.array(means), stds, depth)


def shifted(profile: Profile, shift: float = 0.0, scale: float = 1.0) -> Profile:
    return Profile(profile.layers, (profile.means + shift) * scale, profile.stds * scale, profile.depth)


def lifted(high: Profile, low: Profile, margin: P.Margin, factor: float) -> Profile:
    """`high` shifted by the least constant that puts it above `low` by `factor` x margin_std std of the difference
    at every depth of either (the floor's share of the lifted value solved by iteration: it contracts, its factor
    under 0.14)."""
    depths, shift = np.union1d(high.depths, low.depths), 0.0
    for _ in range(100):
        needed = max(
            low.at(depth)[0]
            + factor
            * margin.std
            * max(
                math.hypot(high.at(depth)[1], low.at(depth)[1]),
                margin.floor * max(abs(high.at(depth)[0] + shift), abs(low.at(depth)[0])),
            )
            - high.at(depth)[0]
            for depth in depths
        )
        if abs(needed - shift) < 1e-13:
            break
        shift = needed
    return shifted(high, shift)


@st.composite
def profiles_above(draw):
    """(high, low, margin): `high` above `low` by margin_std x (1 + slack) at every relative depth of either."""
    margin, low = draw(margins), draw(profiles())
    return lifted(draw(profiles()), low, margin, 1 + draw(slacks)), low, margin


@settings(max_examples=100)
@given(pair=profiles_above())
def test_a_profile_above_another_by_the_margin_at_every_depth_exceeds_it(pair):
    """`exceeds` holds where the high profile clears the low one by margin_std x (1 + slack) at every depth of either,
    each interpolated. Fails on a mutation that takes the std of a difference as the sum of the two stds, and on one
    that adds the floor to the spread (hypot + floor x the larger |mean|)."""
    high, low, margin = pair
    assert exceeds(high, low, margin=margin).holds is True


@st.composite
def profiles_within_noise_somewhere(draw):
    """A profile above another by the margin but at one layer of either, moved to within the noise of the other
    there: the high one's lowered, or the low one's raised."""
    high, low, margin = draw(profiles_above())
    if draw(st.booleans()):
        layer = draw(st.integers(0, high.depth))
        below, means = low.at(high.depths[layer]), high.means.copy()
        means[layer] = below[0] + draw(inside) * noise(margin, (below[0], high.stds[layer]), (0.0, below[1]))
        return Profile(high.layers, means, high.stds, high.depth), low, margin
    layer = draw(st.integers(0, low.depth))
    over, means = high.at(low.depths[layer]), low.means.copy()
    means[layer] = over[0] - draw(inside) * noise(margin, over, (0.0, low.stds[layer]))
    return high, Profile(low.layers, means, low.stds, low.depth), margin


@settings(max_examples=100)
@given(pair=profiles_within_noise_somewhere())
def test_a_profile_within_the_noise_of_another_at_one_depth_never_exceeds_it(pair):
    """Fails on today's rule, the means over layers compared (mutation: `exceeds` on the layer means and their mean
    stds), e.g. 1.024, 1.024 against 1.024, 0.5, no spread (margin 1, floor 1/64): equal at layer 0, the layer means
    +16 std apart; on a mutation that compares at the high profile's own depths only (the low one's layers between
    them unseen); and on today's separation, without the floor."""
    high, low, margin = pair
    assert exceeds(high, low, margin=margin).holds is not True


# --- encoder_uniform: the decoders' median range above the encoders' / uniform_ratio ----------------------------


class Tables:
    """A reader of summary tables held in memory, as `inputs.Reader.summary` returns them."""

    def __init__(self, tables: dict[str, pd.DataFrame]):
        self.tables = tables

    def summary(self, group, model: str) -> pd.DataFrame:
        return self.tables[model]


def relative_range(means: np.ndarray, stds: np.ndarray) -> tuple[float, float]:
    """(max - min) / max, and hypot(std at the max, std at the min) / max: the claim's rule, computed here."""
    high, low = int(np.argmax(means)), int(np.argmin(means))
    return (means[high] - means[low]) / means[high], math.hypot(stds[high], stds[low]) / means[high]


@st.composite
def shaped(draw, share: float) -> tuple[np.ndarray, np.ndarray]:
    """A profile across 2-12 layers whose range is `share` of its peak: means top x (1 - share x shape), the shape
    spanning [0, 1]; stds up to 2% of the peak."""
    count = draw(st.integers(3, 13))
    shape = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=count, max_size=count, unique=True)))
    shape, top = (shape - shape.min()) / (shape.max() - shape.min()), draw(st.floats(0.05, 10.0))
    stds = np.array(draw(st.lists(st.floats(0.0, 0.02), min_size=count, max_size=count))) * top
    return top * (1 - share * shape), stds


def uniform_verdict(encoders: list, decoders: list, margin: P.Margin, ratio: float) -> bool | None:
    kinds = {f"encoder{n}": "encoder" for n in range(len(encoders))} | {
        f"decoder{n}": "decoder" for n in range(len(decoders))
    }
    tables = {
        model: summary(model, {300: {"anisotropy": list(means)}}, kind=kinds[model], std=list(stds))
        for model, (means, stds) in zip(kinds, [*encoders, *decoders])
    }
    group = Group("encoder_uniform", "encoders and decoders", tuple(kinds), arguments={"kinds": kinds})
    thresholds = {"margin_std": margin.std, "spread_floor": margin.floor, "uniform_ratio": ratio}
    return holds(check_uniform, group, Tables(tables), thresholds)


def with_range(profile: tuple[np.ndarray, np.ndarray], share: float) -> tuple[np.ndarray, np.ndarray]:
    """A profile of `shaped` rescaled to range `share` of its peak, its stds and the layers of its max and min kept."""
    means, stds = profile
    return means.max() * (1 - share * (means.max() - means) / (means.max() - means.min())), stds


@st.composite
def uniform_groups(draw, within_noise: bool):
    """(encoders, decoders, margin, ratio). Every decoder's range is the least share that puts the decoders' median
    above the encoders' median / ratio by margin_std x (1 + slack); or, `within_noise`, each decoder's range under
    margin_std x its own std."""
    margin, ratio, slack = draw(margins), draw(st.floats(0.4, 0.7)), draw(slacks)
    encoders = [draw(shaped(draw(st.floats(0.0, 0.2)))) for _ in range(draw(st.integers(1, 3)))]
    templates = [draw(shaped(0.5)) for _ in range(draw(st.integers(1, 3)))]
    if within_noise:
        shares = [min(draw(inside) * margin.std * relative_range(*found)[1], 1.0) for found in templates]
        return encoders, [with_range(found, share) for found, share in zip(templates, shares)], margin, ratio
    bound = [value / ratio for value in np.median([relative_range(*found) for found in encoders], axis=0)]
    spread = math.hypot(float(np.median([relative_range(*found)[1] for found in templates])), bound[1])
    share = bound[0]
    for _ in range(100):  # the floor's share of the decoders' median: a contraction, as in `lifted`
        share = bound[0] + (1 + slack) * margin.std * max(spread, margin.floor * max(share, bound[0]))
    share += 0.001  # any share above the least holds; the least is 0 where nothing has a spread
    return encoders, [with_range(found, share) for found in templates], margin, ratio


@settings(max_examples=40)
@given(groups=uniform_groups(within_noise=False))
def test_decoders_whose_median_range_clears_the_encoders_by_the_margin_are_less_uniform(groups):
    """encoder_uniform (`check_uniform`) holds where the decoders' median range lies above the encoders' median range /
    uniform_ratio by margin_std x (1 + slack) std of the difference. Fails on a mutation that divides the encoders'
    median range by uniform_ratio twice, and on one that takes the std of a difference as the sum of the two stds."""
    assert uniform_verdict(*groups) is True


@settings(max_examples=40)
@given(groups=uniform_groups(within_noise=True))
def test_decoders_whose_range_lies_within_its_noise_are_never_less_uniform(groups):
    """Each decoder's range under margin_std x its std: never "yes", however flat the encoders. Fails on today's rule,
    the ratio of the medians of the ranges, their stds unread (mutation: `spread_ratio` as median(uniform) <=
    max_ratio x median(varied)), e.g. a flat encoder against a flat decoder, no spread anywhere: 0 <= 0.5 x 0."""
    assert uniform_verdict(*groups) is not True


# --- growth then a plateau, over log-spaced steps ---------------------------------------------------------------


@st.composite
def growth(draw, within_noise: bool):
    """(series, margin): a layer average over log-spaced steps rising monotonically from its first point, flat within
    0.9 x stable_share (0.25) of its rise from half its last step on; its rise margin_std x (1 + slack) std of the
    difference (the floor's share of the last point solved by iteration), or, `within_noise`, under margin_std."""
    steps, margin = draw(log_spaced_steps()), draw(margins)
    count, late = len(steps), steps >= 0.5 * steps[-1]
    stds = np.array(draw(st.lists(st.floats(0.0, 0.05), min_size=count, max_size=count)))
    base = draw(st.floats(0.05, 10.0))
    spread = math.hypot(stds[0], stds[-1])
    if within_noise:
        rise = draw(inside) * margin.std * max(spread, margin.floor * base)
    else:
        rise, factor = 0.0, 1 + draw(slacks)
        for _ in range(100):
            rise = factor * margin.std * max(spread, margin.floor * (base + rise))
        rise = max(rise, 1e-9)
    settled = int(late.sum())  # the late steps: a suffix
    plateau = 1 - 0.9 * 0.25 * np.sort(draw(st.lists(st.floats(0.0, 1.0), min_size=settled, max_size=settled)))[::-1]
    climb = np.sort(draw(st.lists(st.floats(0.0, 1.0), min_size=count - settled, max_size=count - settled)))
    shape = np.concatenate([np.minimum(climb, plateau[0]), plateau])
    shape[0], shape[-1] = 0.0, 1.0
    return S.Series(steps, base + rise * shape, stds, "step"), margin


def grows(series: S.Series, margin: P.Margin) -> bool | None:
    return holds(S.grows_then_stabilises, series, margin=margin, stable_from=0.5, stable_share=0.25)


@settings(max_examples=100)
@given(grown=growth(within_noise=False))
def test_a_rise_that_clears_the_margin_then_a_plateau_grows_then_stabilises(grown):
    """`grows_then_stabilises` holds where the rise clears margin_std x (1 + slack) and the late stretch moves under
    stable_share of it. Fails on a mutation that takes the std of a difference as the sum of the two stds, and on one
    that adds the floor to the spread."""
    assert grows(*grown) is True


@settings(max_examples=100)
@given(grown=growth(within_noise=True))
def test_a_rise_within_the_noise_never_grows(grown):
    """Fails on today's separation, without the floor, e.g. a rise from 1 to 1.0078 between points with no spread:
    +inf std (margin 1, floor 1/64: 0.5 std); on a mutation that counts any rise (`grown > 0`); and on an absolute
    floor, max(hypot, floor)."""
    assert grows(*grown) is not True


# --- a loss that falls steadily, in its standard errors -----------------------------------------------------------


@st.composite
def losses(draw, within_noise: bool):
    """(steps, losses, standard errors, margin): a loss falling over log-spaced steps, each step's fall drawn, its
    total fall margin_std x (1 + slack) standard errors of the difference (the floor's share solved by iteration),
    or, `within_noise`, a total fall or one rise somewhere under margin_std."""
    steps, margin = draw(log_spaced_steps()), draw(margins)
    count = len(steps)
    errors = np.array(draw(st.lists(st.floats(0.001, 0.2), min_size=count, max_size=count)))
    end = draw(st.floats(1.0, 5.0))
    spread = math.hypot(errors[0], errors[-1])
    fall, factor = 0.0, (draw(inside) if within_noise else 1 + draw(slacks))
    for _ in range(100):
        fall = factor * margin.std * max(spread, margin.floor * (end + fall))
    shares = np.sort(draw(st.lists(st.floats(0.0, 1.0), min_size=count - 2, max_size=count - 2)))[::-1]
    values = end + fall * np.concatenate([[1.0], shares, [0.0]])
    return steps, values, errors, margin


@settings(max_examples=60)
@given(found=losses(within_noise=False))
def test_a_loss_that_falls_by_the_margin_and_never_rises_falls_steadily(found):
    """Fails on a mutation that reads the margin in nats (the fall against margin_std itself)."""
    steps, values, errors, margin = found
    assert holds(S.falls_steadily, steps, values, errors, margin=margin) is True


@settings(max_examples=60)
@given(found=losses(within_noise=True))
def test_a_loss_whose_fall_lies_within_its_noise_never_falls_steadily(found):
    """Fails on the rule before issue 57, which read a fixed 0.2 nats whatever the loss's standard error (a fall of
    0.3 nats within 0.4 nats of noise: "yes")."""
    steps, values, errors, margin = found
    assert holds(S.falls_steadily, steps, values, errors, margin=margin) is not True


# --- relative claims: unchanged when a metric is shifted or scaled -----------------------------------------------

scales = st.floats(1e-3, 1e3)
# a separation / margin_std: mostly within a tenth of the boundary, never within a thousandth of it (rounding)
NEAR = st.one_of(st.floats(0.9, 0.999), st.floats(1.001, 1.1), st.floats(0.3, 0.999), st.floats(1.001, 3.0))


@st.composite
def comparisons(draw, count: int = 1):
    """(pairs, margin, shift): `count` pairs of values, (high, low) each (mean, std), the high `NEAR` x margin_std std
    of the difference above the low; the stds over the floor before and after adding `shift` (the floor never
    binds), so that the separation, not the floor, decides."""
    margin, pairs, reaches = draw(margins), [], []
    for _ in range(count):
        stds = draw(st.floats(0.01, 1.0)), draw(st.floats(0.01, 1.0))
        spread = math.hypot(*stds)
        reaches.append(spread / (1.01 * margin.floor) / 3)  # |low|, |high| - |low| and |shift| each within it
        low = draw(st.floats(-reaches[-1], reaches[-1]))
        pairs.append(((low + draw(NEAR) * margin.std * spread, stds[0]), (low, stds[1])))
    return pairs, margin, draw(st.floats(-1.0, 1.0)) * min(reaches)


def moved(value: tuple[float, float], shift: float = 0.0, scale: float = 1.0) -> tuple[float, float]:
    return (value[0] + shift) * scale, value[1] * scale


def compared(pairs, margin: P.Margin, share: float) -> tuple:
    """The verdicts of the comparisons on `pairs`: each `above`, `groups_apart` of the highs over the lows, and a
    `majority` of their separations."""
    over = functools.partial(P.above, margin=margin, what="x")
    highs = {f"h{n}": high for n, (high, _) in enumerate(pairs)}
    lows = {f"l{n}": low for n, (_, low) in enumerate(pairs)}
    apart = holds(P.groups_apart, highs, lows, over)
    most = holds(P.majority, {f"{n}": margin.counts(high, low) for n, (high, low) in enumerate(pairs)}, share=share)
    return tuple(over(high, low).holds for high, low in pairs), apart, most


@settings(max_examples=150)
@given(found=comparisons(count=3), scale=scales, share=st.floats(0.3, 0.7))
def test_comparisons_are_unchanged_by_shifting_or_scaling_a_metric(found, scale, share):
    """`above`, `groups_apart` and a `majority` of separations read differences in std of the difference: adding a
    constant to a metric (where the floor does not bind) or scaling its means and stds by c > 0 changes none. Fails
    on a mutation that adds the floor to the spread (hypot + floor x the larger |mean|) under a shift, and on an
    absolute floor, max(hypot, floor), under scaling."""
    pairs, margin, shift = found
    before = compared(pairs, margin, share)
    assert compared([(moved(h, shift), moved(l, shift)) for h, l in pairs], margin, share) == before
    for factor in (scale, 1 / scale):
        assert compared([(moved(h, scale=factor), moved(l, scale=factor)) for h, l in pairs], margin, share) == before


@st.composite
def profiles_near(draw):
    """(high, low, margin, shift): `high` lifted to `NEAR` x margin_std above `low` at its closest depth; the stds
    over the floor before and after adding `shift` to both."""
    margin, shift = draw(margins), draw(st.floats(-1.0, 1.0))
    least = 10 * margin.floor * (1 + abs(shift))  # a generous bound on the floor's share, checked below
    low = draw(profiles(least))
    high = lifted(draw(profiles(least)), low, margin, draw(NEAR))
    reach = max(np.abs(np.concatenate([high.means, low.means])).max() + abs(shift), 1.0)
    assume(min(high.stds.min(), low.stds.min()) >= 1.01 * margin.floor * reach)
    return high, low, margin, shift


@settings(max_examples=200)
@given(found=profiles_near(), scale=scales)
def test_the_profile_comparison_is_unchanged_by_shifting_or_scaling_a_metric(found, scale):
    """`exceeds`, as the comparisons: fails on a mutation that interpolates the other profile's means geometrically
    (the exponential of their interpolated logarithms) under a shift, and on the absolute floor under scaling."""
    high, low, margin, shift = found
    before = exceeds(high, low, margin=margin).holds
    assert exceeds(shifted(high, shift), shifted(low, shift), margin=margin).holds == before
    for factor in (scale, 1 / scale):
        assert exceeds(shifted(high, scale=factor), shifted(low, scale=factor), margin=margin).holds == before


def scaled(series: S.Series, power: int) -> S.Series:
    return S.Series(series.positions, series.means * 2.0**power, series.stds * 2.0**power, series.unit)


@settings(max_examples=100)
@given(
    bell=st.one_of(resolved_peaks(layers, MIDDLE, "layer"), unresolved_peaks(layers, MIDDLE, "layer")),
    grown=st.one_of(growth(within_noise=False), growth(within_noise=True)),
    power=st.integers(-20, 20),
)
def test_shapes_are_unchanged_by_scaling_a_metric(bell, grown, power):
    """A bell (`interior_peak`), a fall from the peak and growth then a plateau, scaled by 2^k (exact in floating
    point: the rule's invariance, not rounding, is on test). Not under a shift: min_change is a share of the peak's
    value, which a constant changes (a rise of a tenth of the peak is a twentieth once the peak's value is added).
    Fails on a mutation that reads min_change as an absolute change (`>= min_change`, not `x |peak|`), and on an
    absolute floor."""
    series, margin, min_change = bell

    def shapes(found: S.Series) -> tuple:
        fall = holds(lambda: S.falls_from_peak(found, margin=margin, min_change=min_change)[0])
        return peak_verdict((found, margin, min_change), MIDDLE), fall

    assert shapes(scaled(series, power)) == shapes(series)
    assert grows(scaled(grown[0], power), grown[1]) == grows(*grown)


# --- the floor: values with no spread -----------------------------------------------------------------------------


@settings(max_examples=100)
@given(
    value=st.one_of(st.floats(1e-3, 1e3), st.floats(-1e3, -1e-3)),
    closer=st.floats(-0.99, 0.99),
    floor=st.floats(0.001, 0.1),
)
def test_two_values_with_no_spread_closer_than_twice_the_floor_never_count(value, closer, floor):
    """Two values with std 0 less than 2 x spread_floor x their magnitude apart: never "yes" at margin_std 2, either
    way round. Fails on today's separation, without the floor (a difference with std 0 on both sides is +-inf std),
    e.g. 1 against 1.0625 with a floor of 0.0625: +inf std, where the floor makes it 0.9 std."""
    other = value * (1 + 2 * floor * closer)
    margin = P.Margin(2.0, floor)
    assert P.above((value, 0.0), (other, 0.0), margin=margin, what="x").holds is not True
    assert P.above((other, 0.0), (value, 0.0), margin=margin, what="x").holds is not True
