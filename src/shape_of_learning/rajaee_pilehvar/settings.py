"""The isotropy settings of Rajaee & Pilehvar (2021, section 3.2) as transforms of an n x D token matrix X.

- ``baseline``: X as is.
- ``zero_mean``: X - mean(X).
- ``cluster_zero_mean``: k-means (k = 27 in the paper) and each cluster centred on its own mean (Cai et al. 2021).
- ``global`` (Mu & Viswanath 2018, "All-but-the-top"): centre, then remove the projections on the top d principal
  components (d = 12): x <- x~ - sum_{i<=d} (u_i^T x~) u_i.
- ``cluster_based`` (Rajaee & Pilehvar 2021): cluster, centre each cluster, remove each cluster's own top d
  components.

Table 2 removes the d *least* dominant components instead (``which="least"``, d = 100 and 700). A point set's
components are what the authors' notebook removes, scikit-learn's ``PCA().fit(cluster).components_``: the right
singular vectors of the centred set, min(n, D) of them, of which at most n - 1 carry variance (`Components`). The
least d are the last d of those, so that in a cluster of fewer than D tokens they are directions of the cluster and
not of the null space its tokens do not reach; a set with no more than d components loses them all and collapses to
the origin. Global is the same removal on X as one set. Every setting but the baseline returns float64, as the
notebook's `cluster_based` does. Clustering is the notebook's k-means by default (`cluster_labels`); the components
can be computed once (`Components.of`, `cluster_components`) and passed to every variant.
"""

from dataclasses import astuple, dataclass

import numpy as np
from scipy.cluster.vq import kmeans2
from sklearn.cluster import KMeans

SETTINGS = ("baseline", "zero_mean", "cluster_zero_mean", "global", "cluster_based")
KMEANS = ("reference", "sklearn")


def zero_mean(X: np.ndarray) -> np.ndarray:
    """X less its mean, in float64 (the notebook sums a cluster's float32 rows into a float64 mean)."""
    X = X.astype(np.float64)
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
    out = np.empty(X.shape)
    for label in np.unique(labels):
        members = labels == label
        out[members] = zero_mean(X[members])
    return out


@dataclass(frozen=True)
class Components:
    """The principal components of a point set as scikit-learn's ``PCA().fit(X).components_`` holds them (the
    authors' notebook): the rows V^T of the thin SVD X~ = U S V^T of the centred set X~ (float64), min(n, D) of
    them, by singular value, largest first. `rank` of them carry variance: those whose singular value exceeds
    numpy's `matrix_rank` tolerance, max(S) max(n, D) eps; a centred set of n points has rank at most n - 1."""

    vectors: np.ndarray
    rank: int

    @classmethod
    def of(cls, X: np.ndarray) -> "Components":
        centred = zero_mean(X)
        _, singular, vectors = np.linalg.svd(centred, full_matrices=False)
        tolerance = singular.max(initial=0.0) * max(centred.shape) * np.finfo(np.float64).eps
        return cls(vectors, int((singular > tolerance).sum()))

    def chosen(self, count: int, which: str) -> tuple[np.ndarray, int]:
        """The `count` top or least components (all of them where there are no more than `count`), as rows, and how
        many of those carry variance."""
        available = len(self.vectors)
        taken = min(count, available)
        if which == "top":
            return self.vectors[:taken], min(taken, self.rank)
        return self.vectors[available - taken :], max(0, self.rank - (available - taken))


@dataclass(frozen=True)
class Removal:
    """What a setting removed: `directions` in all (summed over clusters), `with_variance` of them carrying variance
    (`Components.rank`), and `collapsed`, the point sets (clusters; X for Global) that had variance and lost every
    direction carrying it, so that each of their vectors is now the origin."""

    directions: int = 0
    with_variance: int = 0
    collapsed: int = 0

    def __add__(self, other: "Removal") -> "Removal":
        return Removal(*(a + b for a, b in zip(astuple(self), astuple(other))))


def remove_directions(
    X: np.ndarray, count: int, which: str = "top", components: Components | None = None
) -> tuple[np.ndarray, Removal]:
    """Centre X, then subtract its projections on its `count` top (most variance) or least principal components
    (`components`: X's `Components`, computed here when not given): x <- x~ - sum_u (u^T x~) u. With what it
    removed."""
    if which not in ("top", "least"):
        raise ValueError(f"which must be 'top' or 'least', got {which!r}")
    if not 0 <= count <= X.shape[1]:
        raise ValueError(f"cannot remove {count} of {X.shape[1]} directions; choose 0 <= count <= {X.shape[1]}")
    components = Components.of(X) if components is None else components
    removed, with_variance = components.chosen(count, which)
    centred = zero_mean(X)
    collapsed = int(0 < components.rank == with_variance)
    return centred - (centred @ removed.T) @ removed, Removal(len(removed), with_variance, collapsed)


def cluster_components(X: np.ndarray, labels: np.ndarray) -> dict:
    """The `Components` of each cluster, by label."""
    return {label: Components.of(X[labels == label]) for label in np.unique(labels)}


def cluster_remove_directions(
    X: np.ndarray, labels: np.ndarray, count: int, which: str = "top", components: dict | None = None
) -> tuple[np.ndarray, Removal]:
    """Per cluster: centre it and remove its own `count` top or least principal components (`components`: the
    `cluster_components`, computed here when not given). With what it removed, summed over the clusters."""
    components = cluster_components(X, labels) if components is None else components
    out, removal = np.empty(X.shape), Removal()
    for label in np.unique(labels):
        members = labels == label
        out[members], removed = remove_directions(X[members], count, which, components[label])
        removal += removed
    return out, removal


def transform(
    X: np.ndarray,
    setting: str,
    *,
    labels: np.ndarray | None = None,
    directions: int = 12,
    which: str = "top",
    components: Components | None = None,
    clusters: dict | None = None,
) -> tuple[np.ndarray, Removal]:
    """X under one of `SETTINGS`, with what it removed; the clustered ones need the k-means `labels` of X.
    `components` and `clusters` are the optional precomputed `Components` of X and `cluster_components`."""
    if setting == "baseline":
        return X, Removal()
    if setting == "zero_mean":
        return zero_mean(X), Removal()
    if setting == "global":
        return remove_directions(X, directions, which, components)
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {SETTINGS}")
    if labels is None:
        raise ValueError(f"setting {setting!r} needs the k-means labels of X (cluster_labels)")
    if setting == "cluster_zero_mean":
        return cluster_zero_mean(X, labels), Removal()
    return cluster_remove_directions(X, labels, directions, which, clusters)
