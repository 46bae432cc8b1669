"""Geometry of a set of vectors: anisotropy, average cosine, intrinsic dimension, isotropy.

`compute_metrics(X)` runs the paper's batch protocol (section 2.2) and returns per-batch values and their
summary; each estimator is also a function of its own:

    anisotropy(X, centred=True)         sigma_1^2 / sum sigma_i^2 of the centred (or raw) matrix
    average_cosine(X, centred=False)    mean pairwise cosine, exact in O(n D)
    twonn / mada / mom / gride(d)       ID from sorted neighbour distances d = knn_distances(deduplicate(X)[0], k)
    isotropy_iw(X), isoscore(X)         Mu & Viswanath's I(W), Rudman et al.'s IsoScore

Any metric function also accepts a `Vectors` (the batch centred once in float64 on a device, with its Gram
matrix, Lanczos top eigenvalues and the float32 eigendecomposition behind I(W) cached) to share work.
From the shell: `shape-metrics vectors.npy` (see `cli`).
"""

from .anisotropy import anisotropy
from .batches import ALL_METRICS, MetricsResult, compute_metrics
from .cosine import average_cosine
from .intrinsic_dimension import gride, mada, mom, twonn
from .isotropy import isoscore, isotropy_iw
from .neighbours import deduplicate, knn_distances
from .vectors import Vectors

__all__ = [
    "ALL_METRICS", "MetricsResult", "Vectors", "anisotropy", "average_cosine", "compute_metrics", "deduplicate",
    "gride", "isoscore", "isotropy_iw", "knn_distances", "mada", "mom", "twonn",
]
