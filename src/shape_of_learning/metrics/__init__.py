"""Geometry of a set of vectors: anisotropy, average cosine, intrinsic dimension, isotropy.

`compute_metrics(X)` runs the paper's batch protocol (section 2.2) and returns per-batch values and their
summary; each estimator is also a function of its own:

    anisotropy(X, centred=True)         sigma_1^2 / sum sigma_i^2 of the centred (or raw) matrix
    average_cosine(X, centred=False)    mean pairwise cosine, exact in O(n D)
    twonn / mada / mom / gride(d)       ID from sorted neighbour distances d = knn_distances(deduplicate(X)[0], k)
    isotropy_iw(X), isoscore(X)         Mu & Viswanath's I(W), Rudman et al.'s IsoScore

Any metric function also accepts a `Vectors` (the batch centred once in float64 on a device, with its Gram
matrix, Lanczos top eigenvalues and the float32 eigendecomposition behind I(W) cached) to share work.
The metrics themselves are declared once, in `registry.METRICS` (name, function, figure label, what each needs).
From the shell: `shape-metrics vectors.npy` (see `cli`).

The estimators import torch; they are loaded on first use, so that reading `METRICS` (as the workflow does when it
plans a DAG) stays fast.
"""

from importlib import import_module

from .registry import METRICS, Metric

_MODULES = {  # name -> module; no module shares a name with a function it exports (an import would rebind it)
    "MetricsResult": "batches",
    "compute_metrics": "batches",
    "anisotropy": "explained_variance",
    "average_cosine": "cosine",
    "gride": "intrinsic_dimension",
    "mada": "intrinsic_dimension",
    "mom": "intrinsic_dimension",
    "twonn": "intrinsic_dimension",
    "isoscore": "isotropy",
    "isotropy_iw": "isotropy",
    "deduplicate": "neighbours",
    "knn_distances": "neighbours",
    "Vectors": "vectors",
}
__all__ = ["METRICS", "Metric", *_MODULES]


def __getattr__(name: str):
    if name in _MODULES:
        return getattr(import_module(f".{_MODULES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
