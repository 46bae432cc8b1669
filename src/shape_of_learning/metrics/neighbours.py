"""Exact k-nearest-neighbour distances by one matrix product, and duplicate removal.

The neighbour-based intrinsic-dimension estimators of a batch (TwoNN, MADA, MoM, GRIDE) all read one
(n, k) table of sorted distances, computed once with k the largest order any of them needs.
"""

import logging

import torch

from .vectors import Vectors

logger = logging.getLogger(__name__)

# Rows whose nearest neighbour is closer than sqrt(RISK_RATIO) * |x| (after centring) get their distances
# recomputed in float64: float32 |x|^2 + |y|^2 - 2 x.y carries an absolute error of a few 1e-7 |x|^2, which is
# a relative error above ~1e-5 on d^2 below this ratio (seen: TwoNN 1.13 instead of 0.99 on a helix).
RISK_RATIO = 1e-2
# Elements of the n x n distance block handled at once (float32: 128 MiB).
BLOCK_ELEMENTS = 1 << 25
# Elements of the float64 differences gathered at once for the rows recomputed exactly (4 MiB): blocks that stay in
# the CPU's cache recompute about 20x faster than one block of BLOCK_ELEMENTS, to the same values (`metrics_speed.py
# --near-duplicates`). Most rows of a byte-level model are at risk: there it was most of a metrics job's time.
EXACT_BLOCK_ELEMENTS = 1 << 19


def deduplicate(X) -> tuple[Vectors, int]:
    """Drop repeated vectors (equal in the float32 copy the distances use); return them and the count removed.

    Duplicates give r1 = 0: mu = r2/r1 is infinite for TwoNN, and floating-point distance formulas turn them
    into spurious tiny distances instead. Repeated tokens make them common in early layers.
    """
    vectors = Vectors.of(X)
    _, inverse = torch.unique(vectors.centred32, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), vectors.n, device=inverse.device)
    first = first.scatter_reduce(0, inverse, torch.arange(vectors.n, device=inverse.device), reduce="amin")
    removed = vectors.n - first.numel()
    return (vectors.take(first.sort().values) if removed else vectors), removed


def _exact_squared_distances(centred: torch.Tensor, rows: torch.Tensor, neighbours: torch.Tensor) -> torch.Tensor:
    """|x_i - x_j|^2 by direct differences in float64, for each row i and its (m, k) candidate neighbours j."""
    out = torch.empty(neighbours.shape, dtype=torch.float64, device=centred.device)
    step = max(1, EXACT_BLOCK_ELEMENTS // (neighbours.shape[1] * centred.shape[1]))
    for start in range(0, len(rows), step):
        stop = start + step
        diff = centred[rows[start:stop], None, :] - centred[neighbours[start:stop]]
        out[start:stop] = diff.square().sum(-1)
    return out


def _nearest(x: torch.Tensor, norms: torch.Tensor, rows: torch.Tensor, k: int):
    """Top-k smallest |x_i|^2 + |x_j|^2 - 2 x_i.x_j over j != i for each i in rows: (squared values, indices)."""
    squared = torch.addmm(norms[rows, None] + norms[None, :], x[rows], x.T, alpha=-2)
    squared[torch.arange(len(rows), device=x.device), rows] = float("inf")
    return torch.topk(squared, k, dim=1, largest=False)


def knn_distances(X, k: int) -> torch.Tensor:
    """Sorted distances to the k nearest neighbours of every vector, itself excluded: an (n, k) float64 tensor.

    Exact search: squared distances |x|^2 + |y|^2 - 2 x.y from one float32 matrix product of the centred
    vectors (on the vectors' device), then top-k. Rows at risk of float32 cancellation (nearest neighbour within
    sqrt(RISK_RATIO) |x|) are searched again in float64 and their k distances recomputed as |x - y| directly.
    Duplicates must be removed first (`deduplicate`): the order among tied distances is arbitrary.
    """
    vectors = Vectors.of(X)
    n = vectors.n
    if not 1 <= k < n:
        raise ValueError(f"k = {k} nearest neighbours need at least k + 1 = {k + 1} vectors, got {n}")
    squared = torch.empty(n, k, dtype=torch.float64, device=vectors.device)
    x32 = vectors.centred32
    norms32 = x32.square().sum(1)
    step = max(1, BLOCK_ELEMENTS // n)
    for rows in torch.arange(n, device=vectors.device).split(step):
        squared[rows] = _nearest(x32, norms32, rows, k).values.clamp_min(0).double()

    x64, norms = vectors.centred, vectors.centred.square().sum(1)
    at_risk = torch.nonzero(squared[:, 0] < RISK_RATIO * norms).squeeze(1)
    if len(at_risk):
        logger.debug("recomputing neighbour distances of %d of %d rows in float64", len(at_risk), n)
    for rows in at_risk.split(step):
        neighbours = _nearest(x64, norms, rows, k).indices
        squared[rows] = _exact_squared_distances(x64, rows, neighbours).sort(dim=1).values
    return squared.sqrt()
