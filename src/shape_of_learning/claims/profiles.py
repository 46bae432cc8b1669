"""Comparisons of profiles across layers: a model's metric per layer at one checkpoint, set beside another model's
(of another depth) by relative depth, layer / layers, or beside its own untrained floor. A point counts where the
difference clears the margin (`predicates.Margin`); a mean over layers would let a model above at one depth and below
at four pass as above.
"""

from dataclasses import dataclass

import numpy as np

from shape_of_learning.claims.predicates import Margin, NotMeasurable, Verdict, std_units


@dataclass(frozen=True)
class Profile:
    """A model's metric across its layers at one checkpoint: the layers measured (in order), each one's mean and std,
    and the model's depth (its last layer), so that layer / depth is a relative depth in [0, 1]."""

    layers: np.ndarray
    means: np.ndarray
    stds: np.ndarray
    depth: int

    @classmethod
    def of(cls, layers, means, stds, depth: int) -> "Profile":
        """The profile, or NotMeasurable where it has no layer or the model no depth to take a share of."""
        profile = cls(*(np.asarray(values, float) for values in (layers, means, stds)), int(depth))
        if not len(profile.layers) or profile.depth < 1:
            raise NotMeasurable(f"{len(profile.layers)} layer(s) of a model {depth} deep: no profile across depth")
        return profile

    @property
    def depths(self) -> np.ndarray:
        return self.layers / self.depth

    def at(self, depth: float) -> tuple[float, float]:
        """The mean and the std at a relative depth, each linearly interpolated between the layers beside it."""
        return float(np.interp(depth, self.depths, self.means)), float(np.interp(depth, self.depths, self.stds))


def _separations(high: Profile, low: Profile, margin: Margin) -> dict[float, float]:
    """Relative depth -> how far `high` lies above `low` there in std of the difference (`Margin.apart`), at every
    depth of either profile inside the span both cover."""
    first, last = max(high.depths[0], low.depths[0]), min(high.depths[-1], low.depths[-1])
    depths = np.union1d(high.depths, low.depths)
    depths = depths[(depths >= first) & (depths <= last)]
    if not depths.size:
        raise NotMeasurable("the two profiles cover no relative depth in common")
    return {float(depth): margin.apart(high.at(depth), low.at(depth)) for depth in depths}


def _where(depths: list[float], high: Profile, low: Profile) -> str:
    """Depths as the reader knows them: layers where both profiles are of one depth, else relative depths."""
    if high.depth == low.depth:
        return "layer(s) " + ", ".join(f"{round(depth * high.depth)}" for depth in depths)
    return "depth(s) " + ", ".join(f"{depth:.2f}" for depth in depths)


def exceeds(high: Profile, low: Profile, *, margin: Margin) -> Verdict:
    """`high` lies above `low` by `margin` at every relative depth of either profile (inside the span both cover),
    the other's per-layer mean and std linearly interpolated to it."""
    apart = _separations(high, low, margin)
    short = [depth for depth, found in apart.items() if not margin.clears(found)]
    least = min(apart, key=apart.get)
    measured = (
        f"above by the margin at {len(apart) - len(short)} of {len(apart)} depths, the least "
        f"{std_units(apart[least])} at {_where([least], high, low)}"
    )
    return Verdict(not short, measured, f"not {margin.std} std above at {_where(short, high, low)}" if short else "")


def nowhere_above(high: Profile, low: Profile, *, margin: Margin) -> Verdict:
    """`high` lies above `low` by `margin` at no relative depth of either profile (compared as `exceeds` compares);
    where it does, the reason names those depths."""
    apart = _separations(high, low, margin)
    over = [depth for depth, found in apart.items() if margin.clears(found)]
    most = max(apart, key=apart.get)
    measured = f"above by the margin at {len(over)} of {len(apart)} depths, the most {std_units(apart[most])} at "
    measured += _where([most], high, low)
    return Verdict(not over, measured, f"{margin.std} std or more above at {_where(over, high, low)}" if over else "")
