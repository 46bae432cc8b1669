"""Does a checkpoint's loss fit its place in its series? Training lowers the loss, so along the steps of one run the
losses fall, up to noise; a checkpoint far off that trend is not its step's model.

The rule: fit ln(loss) over the checkpoints ordered by step with the non-increasing function closest to it in absolute
deviation (isotonic median regression, by pooling adjacent violators; Robertson, Wright & Dykstra 1988, "Order
Restricted Statistical Inference", section 1.4). Where the checkpoint furthest from the fit lies further than
`tolerance`, set it aside and fit the rest again, until every checkpoint kept lies within `tolerance` (trimming: a
far outlier pools the genuine checkpoints around it into one flat stretch, so one fit alone would flag them with it).
A checkpoint set aside is then judged against the fit of those kept: out of place if its ln(loss) lies further than
`tolerance` from every value that keeps the series non-increasing between its kept neighbours.

The fit uses only the order of the steps, so it needs no spacing. It holds at both ends: a broken last checkpoint
(bloom-560m-intermediate's global_step600000, perplexity 320,322 after about 50 at 500000: its discussion #2) stands
far above the checkpoints before it; a first checkpoint serving a later model (pythia#205's step0) stands far below
those after it. Step 0, an initialisation, is judged like any other point. Two checkpoints that contradict each other
by more than twice the tolerance, with no other checkpoint to decide between them, are both out of place.
"""

import numpy as np


def non_increasing_fit(values) -> np.ndarray:
    """The non-increasing sequence closest to `values` in absolute deviation: pool adjacent violators, each pool at
    its median (the midpoint of the two middle values for an even pool)."""
    pools = []
    for value in np.asarray(values, dtype=float):
        pools.append([value])
        while len(pools) > 1 and np.median(pools[-2]) < np.median(pools[-1]):
            last = pools.pop()
            pools[-1] += last
    return np.concatenate([np.full(len(pool), np.median(pool)) for pool in pools]) if pools else np.array([])


def out_of_place(losses, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """For losses ordered by step: the loss the series runs at at each checkpoint (exp of the trimmed ln-loss fit), and
    whether each lies further than `tolerance` from it in ln(loss)."""
    logs = np.log(np.asarray(losses, dtype=float))
    kept = np.ones(len(logs), dtype=bool)
    while True:
        fit = non_increasing_fit(logs[kept])
        deviation = np.abs(logs[kept] - fit)
        worst = (deviation > tolerance) & (deviation >= deviation.max(initial=0) - 1e-12)
        if not worst.any() or worst.all():  # within tolerance, or nothing left to decide by
            break
        kept[np.flatnonzero(kept)[worst]] = False
    expected = np.empty_like(logs)
    expected[kept] = fit
    positions = np.flatnonzero(kept)
    for index in np.flatnonzero(~kept):  # the value closest to it that keeps the series non-increasing
        after = positions[positions > index]
        before = positions[positions < index]
        lowest = expected[after[0]] if len(after) else -np.inf
        highest = expected[before[-1]] if len(before) else np.inf
        expected[index] = np.clip(logs[index], lowest, highest)
    return np.exp(expected), np.abs(logs - expected) > tolerance
