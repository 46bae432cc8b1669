"""The isotropy settings of Rajaee & Pilehvar (2021, section 3.2) as transforms of an n x D token matrix X.

- ``baseline``: X as is.
- ``zero_mean``: X - mean(X).
- ``cluster_zero_mean``: k-means (k = 27 in the paper) and each cluster centred on its own mean (Cai et al. 2021).
- ``global`` (Mu & Viswanath 2018, "All-but-the-top"): centre, then remove the projections on the top d principal
  directions (d = 12): x <- x~ - sum_{i<=d} (u_i^T x~) u_i.
- ``cluster_based`` (Rajaee & Pilehvar 2021): cluster, centre each cluster, remove each cluster's own top d
  directions.

Table 2 removes the d *least* dominant directions instead (``which="least"``, d = 100 and 700). Principal directions
are the eigenvectors of the covariance (`numpy.linalg.eigh`, all D of them, so "least" is defined even when a cluster
has fewer than D points; float64 `torch.linalg.eigh` is ~50x slower on CPU); clustering is the authors' notebook's
k-means by default (`cluster_labels`). The bases can be computed once (`principal_directions`, `cluster_directions`)
and passed to every variant.
"""

import numpy as np
from scipy.cluster.vq import kmeans2
from sklearn.cluster import KMeans

SETTINGS = ("baseline", "zero_mean", "cluster_zero_mean", "global", "cluster_based")
KMEANS = ("reference", "sklearn")


def zero_mean(X: np.ndarray) -> np.ndarray:
    return X - X.mean(axis=0)


def cluster_labels(X: np.ndarray, clusters: int, seed: int = 0, method: str = "reference") -> np.ndarray:
    """k-means labels of the rows of X, k capped at the number of distinct rows (`rajaee_pilehvar.kmeans`).

    - ``reference`` (the default): Rajaee & Pilehvar's notebook, ``scipy.cluster.vq.kmeans2(X, k, minit="points")``:
      one run from k distinct rows drawn at random (here by `seed`), Lloyd's iterations until the centroids move
      less than 1e-5 or 10 iterations; a cluster left empty only warns, so fewer than k labels can occur.
    - ``sklearn``: scikit-learn's KMeans, k-means++ seeding and the best of 3 runs by inertia.
    """
    if method not in KMEANS:
        raise ValueError(f"unknown k-means {method!r}; choose one of {KMEANS} (rajaee_pilehvar.kmeans)")
    clusters = min(clusters, len(np.unique(X, axis=0)))
    if method == "sklearn":
        return KMeans(n_clusters=clusters, n_init=3, random_state=seed).fit_predict(X)
    return kmeans2(X, clusters, minit="points", missing="warn", rng=seed)[1]


def cluster_zero_mean(X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    out = np.empty_like(X)
    for label in np.unique(labels):
        members = labels == label
        out[members] = zero_mean(X[members])
    return out


def principal_directions(X: np.ndarray) -> np.ndarray:
    """All D eigenvectors of the covariance of X, as columns, most dominant (largest variance) first."""
    centred = zero_mean(X.astype(np.float64))
    _, vectors = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
    return vectors[:, ::-1]


def cluster_directions(X: np.ndarray, labels: np.ndarray) -> dict:
    """`principal_directions` of each cluster, by label."""
    return {label: principal_directions(X[labels == label]) for label in np.unique(labels)}


def remove_directions(X: np.ndarray, count: int, which: str = "top", basis: np.ndarray | None = None) -> np.ndarray:
    """Centre X, then subtract its projections on the `count` top (most variance) or least principal directions
    (`basis`: X's `principal_directions`, computed here when not given)."""
    if which not in ("top", "least"):
        raise ValueError(f"which must be 'top' or 'least', got {which!r}")
    if not 0 <= count <= X.shape[1]:
        raise ValueError(f"cannot remove {count} of {X.shape[1]} directions; choose 0 <= count <= {X.shape[1]}")
    directions = principal_directions(X) if basis is None else basis
    removed = directions[:, :count] if which == "top" else directions[:, X.shape[1] - count :]
    centred = zero_mean(X.astype(np.float64))
    return (centred - centred @ removed @ removed.T).astype(X.dtype)


def cluster_remove_directions(
    X: np.ndarray, labels: np.ndarray, count: int, which: str = "top", bases: dict | None = None
) -> np.ndarray:
    """Per cluster: centre it and remove its own `count` top or least principal directions (`bases`: the
    `cluster_directions`, computed here when not given)."""
    bases = cluster_directions(X, labels) if bases is None else bases
    out = np.empty_like(X)
    for label in np.unique(labels):
        members = labels == label
        out[members] = remove_directions(X[members], count, which, bases[label])
    return out


def transform(
    X: np.ndarray,
    setting: str,
    *,
    labels: np.ndarray | None = None,
    directions: int = 12,
    which: str = "top",
    basis: np.ndarray | None = None,
    bases: dict | None = None,
) -> np.ndarray:
    """X under one of `SETTINGS`; the clustered ones need the k-means `labels` of X. `basis` and `bases` are the
    optional precomputed `principal_directions` of X and `cluster_directions` of its clusters."""
    if setting == "baseline":
        return X
    if setting == "zero_mean":
        return zero_mean(X)
    if setting == "global":
        return remove_directions(X, directions, which, basis)
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {SETTINGS}")
    if labels is None:
        raise ValueError(f"setting {setting!r} needs the k-means labels of X (cluster_labels)")
    if setting == "cluster_zero_mean":
        return cluster_zero_mean(X, labels)
    return cluster_remove_directions(X, labels, directions, which, bases)
