"""Does each checkpoint's loss keep its place in its series? Training lowers the loss on a fixed corpus, so along the
steps of one run the losses fall, up to noise; a checkpoint whose loss runs against that order beyond its noise is
not its step's model, or its neighbour is not.

The rule, in standard errors. A later checkpoint j *rises above* an earlier one i when

    ln L_j - ln L_i > t_ij,    t_ij = max(k s_ij, floor),

s_ij the standard error of ln L_j - ln L_i (`Errors`), k `health.standard_errors`, floor `health.loss_floor` (what a
loss with no spread, or computed from bfloat16 logits, cannot resolve). Every checkpoint of a model predicts the same
tokens, so where the loss records carry their per-token losses of one set of targets, s_ij is the standard error of
the mean paired difference (delta method: of l/L per token), far smaller than two independent errors where the
models score the tokens alike; else s_ij = sqrt(s_i^2 + s_j^2), s the standard error of ln L. Either way s is a
(semi)metric, so t_ij + t_jl >= t_il and rising above is a strict partial order: j above i and l above j puts l above
i. A set of checkpoints none of which rises above another is consistent with a falling series; the largest such sets
are the order's largest antichains (Dilworth 1950), of size n less a maximum matching of the order's bipartite graph
(Fulkerson 1956). A checkpoint in every largest consistent set is in order; one in none is out of place: every
fewest-removals repair of the series removes it; one in some but not all cannot be told from the checkpoints it
conflicts with (two neighbours swapped, a defect beside a single genuine checkpoint), and is undecided.

Checkpoints that are one model (a group: one loss under several steps) count once, at the span of their steps: a
group comes after a checkpoint where all its steps do, and conflicts with one between its steps nowhere (at one of
its steps its loss keeps the order with it). The order stays a partial order.

The rule reads only the order of the steps, so it needs no spacing and no model of the curve, and it holds at both
ends: a broken last checkpoint (bloom-560m-intermediate's global_step600000, perplexity 320,322 after about 50 at
500000: its discussion #2) rises above every checkpoint before it; a first checkpoint serving a later model
(pythia#205's step0) lies below every checkpoint after it. A first checkpoint above the rest conflicts with nothing: a
falling series may start anywhere (the ln V bound, `broken`, judges it).
"""

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

IN_ORDER, OUT_OF_PLACE, UNDECIDED = "in order", "out of place", "undecided"


@dataclass(frozen=True)
class Order:
    """Each checkpoint's place (`IN_ORDER`, `OUT_OF_PLACE`, `UNDECIDED`) and the evidence against it (empty in
    order): the checkpoint it runs against furthest beyond the tolerance."""

    places: list[str]
    evidence: list[str]


class Errors:
    """The standard error of the difference of two checkpoints' ln(loss), for the checkpoints of one series: paired
    over their per-token losses where every one has them for the same targets, independent otherwise (module
    docstring). `records` maps a checkpoint to its loss, the loss's standard error, and its per-token losses and
    targets digest (None where its manifest has none)."""

    def __init__(self, records: dict[str, tuple[float, float, list | None, str | None]]):
        self.names = list(records)
        losses = np.array([records[name][0] for name in self.names], dtype=float)
        self.log_se = np.array([records[name][1] for name in self.names], dtype=float) / losses
        targets = {(records[name][3], len(records[name][2] or ())) for name in self.names}
        self.paired = len(targets) == 1 and None not in next(iter(targets)) and len(self.names) > 1
        if self.paired:  # l / L per token: its mean's difference is that of ln L, to first order
            scaled = np.array([records[name][2] for name in self.names], dtype=float) / losses[:, None]
            covariance = np.atleast_2d(np.cov(scaled))
            variance = np.diag(covariance)
            self.difference = np.sqrt(
                np.maximum(variance[:, None] + variance[None, :] - 2 * covariance, 0.0) / scaled.shape[1]
            )
        self.index = {name: i for i, name in enumerate(self.names)}

    def between(self, first: list[str], second: list[str]) -> np.ndarray:
        """[i, j]: the standard error of ln L of `first[i]` less that of `second[j]`."""
        a, b = [self.index[n] for n in first], [self.index[n] for n in second]
        if self.paired:
            return self.difference[np.ix_(a, b)]
        return np.hypot(self.log_se[a][:, None], self.log_se[b][None, :])

    def tolerance(self, first: list[str], second: list[str], standard_errors: float, floor: float) -> np.ndarray:
        """t between each of `first` and each of `second`: `standard_errors` standard errors, at least `floor`."""
        return np.maximum(standard_errors * self.between(first, second), floor)


def rises(log_losses: np.ndarray, tolerance: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """rises[i, j]: j comes after i (all of j's steps after all of i's) and its ln(loss) lies above i's by more than
    t_ij."""
    after = first[None, :] > last[:, None]
    return after & (log_losses[None, :] - log_losses[:, None] > tolerance)


def largest_antichain(order: np.ndarray, members: np.ndarray) -> int:
    """The size of a largest antichain of the strict partial order `order` (a transitive boolean matrix) restricted
    to the boolean mask `members`: their number less a maximum matching of the order's bipartite graph."""
    sub = order[np.ix_(members, members)]
    if not sub.any():
        return int(members.sum())
    matched = maximum_bipartite_matching(csr_matrix(sub.astype(np.int8)), perm_type="column")
    return int(members.sum() - (matched >= 0).sum())


def place(losses, tolerance: np.ndarray, steps, names: list[str]) -> Order:
    """Each checkpoint's place in the order of its series (module docstring). `losses` are finite and positive;
    `tolerance` is t between every two (`Errors.tolerance`); `steps` are each checkpoint's step, or for checkpoints
    that are one model the list of their steps; `names` cite them in the evidence."""
    losses = np.asarray(losses, dtype=float)
    first, last = np.array([np.min(step) for step in steps]), np.array([np.max(step) for step in steps])
    order = rises(np.log(losses), tolerance, first, last)
    conflicts = order | order.T
    everyone = np.ones(len(losses), dtype=bool)
    largest = largest_antichain(order, everyone)
    places = [IN_ORDER] * len(losses)
    for v in np.flatnonzero(conflicts.any(axis=1)):
        without = everyone.copy()
        without[v] = False
        if 1 + largest_antichain(order, without & ~conflicts[v]) < largest:
            places[v] = OUT_OF_PLACE
        elif largest_antichain(order, without) == largest:
            places[v] = UNDECIDED
    return Order(places, _evidence(places, losses, tolerance, order, names))


def _evidence(places: list[str], losses: np.ndarray, tolerance: np.ndarray, order, names: list[str]) -> list[str]:
    """Per checkpoint out of place or undecided: the checkpoint it runs against furthest beyond the tolerance (one
    in order, for a checkpoint out of place; another undecided, for one undecided; any, where none is)."""
    found = []
    for v, where in enumerate(places):
        if where == IN_ORDER:
            found.append("")
            continue
        against = np.flatnonzero(order[v] | order[:, v])
        cited = IN_ORDER if where == OUT_OF_PLACE else UNDECIDED
        others = [u for u in against if places[u] == cited] or list(against)
        u = max(others, key=lambda u: abs(np.log(losses[v] / losses[u])) / tolerance[u, v])
        earlier = bool(order[u, v])
        found.append(
            f"loss {losses[v]:.3g} {'above' if earlier else 'below'} {names[u]}'s {losses[u]:.3g}, "
            f"{'an earlier' if earlier else 'a later'} checkpoint, by {abs(np.log(losses[v] / losses[u])):.2g} in "
            f"ln loss (tolerance {tolerance[u, v]:.2g})"
        )
    return found
