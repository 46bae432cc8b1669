"""Intrinsic-dimension estimators read from sorted nearest-neighbour distances.

Each function takes `distances`, an (n, k) array whose row i holds r_1 <= ... <= r_k, the distances from
point i to its k nearest neighbours (the point itself excluded): `knn_distances(X, k)` after
`deduplicate(X)`. TwoNN, MADA and MoM reproduce scikit-dimension 0.5.0 (`skdim.id.TwoNN`, `MADA`, `MOM`
with their defaults) on the same data to float64 rounding; GRIDE follows DADApy's conventions.

At n = 4096 every estimator badly underestimates high dimensions: on an isotropic Gaussian in D = 768 they
give TwoNN ~163, MADA ~141, MoM ~119. This is a property of the estimators (too few points to see the
dimension at the scale of the nearest neighbours), not a bug, and it holds for hidden states too: compare
values across layers and checkpoints at one batch size, never against D.
"""

import logging

import numpy as np
from scipy.optimize import brentq

logger = logging.getLogger(__name__)


def _columns(distances, k: int, estimator: str) -> np.ndarray:
    distances = np.asarray(distances.cpu() if hasattr(distances, "cpu") else distances, dtype=np.float64)
    if distances.ndim != 2 or distances.shape[1] < k:
        raise ValueError(
            f"{estimator} needs the sorted distances to the first {k} neighbours of every point, "
            f"got an array of shape {distances.shape}: call knn_distances(X, k={k})"
        )
    return distances


def _finite_mean(pointwise: np.ndarray, estimator: str) -> float:
    finite = np.isfinite(pointwise)
    if not finite.all():  # tied distances (r_k == r_{k/2}): the pointwise estimate is infinite
        logger.warning(
            "%s: ignoring %d of %d points with tied neighbour distances", estimator, (~finite).sum(), len(pointwise)
        )
    return float(pointwise[finite].mean())


def twonn(distances, discard_fraction: float = 0.1) -> float:
    """TwoNN (Facco et al. 2017, Sci. Rep. 7:12140), linear-fit form as in scikit-dimension.

    mu_i = r_2 / r_1 follows a Pareto law, P(mu <= x) = 1 - x^(-d). With the N finite ratios sorted and the
    largest `discard_fraction` (default 0.1) discarded, keeping the n_keep = int(N (1 - discard_fraction))
    smallest, d is the least-squares slope through the origin of y_i = -log(1 - i / N) on x_i = log mu_(i):
    d = sum(x y) / sum(x^2), i = 1..n_keep. The largest ratio never enters (its y = -log 0 is infinite), so
    `discard_fraction=0` keeps N - 1 ratios where scikit-dimension would return inf.
    """
    distances = _columns(distances, 2, "TwoNN")
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = distances[:, 1] / distances[:, 0]
    mu = mu[np.isfinite(mu)]
    n_keep = min(int(len(mu) * (1 - discard_fraction)), len(mu) - 1)
    if n_keep < 2:
        raise ValueError(f"TwoNN needs at least 2 ratios after discarding, got {n_keep} of {len(mu)}")
    x = np.log(np.sort(mu)[:n_keep])
    y = -np.log(1 - np.arange(1, n_keep + 1) / len(mu))
    return float(x @ y / (x @ x))


def mada(distances, k: int = 20) -> float:
    """MADA, manifold-adaptive dimension estimation (Farahmand, Szepesvari & Audibert 2007, ICML).

    Pointwise d_i = ln 2 / ln(r_k / r_{floor(k/2)}), with k = 20 by default (scikit-dimension's); the estimate is
    the mean over points. Points with r_k == r_{k/2} (ties) have infinite d_i; they are left out with a warning
    (scikit-dimension would return inf).
    """
    distances = _columns(distances, k, "MADA")
    with np.errstate(divide="ignore"):
        pointwise = np.log(2) / np.log(distances[:, k - 1] / distances[:, k // 2 - 1])
    return _finite_mean(pointwise, "MADA")


def mom(distances, k: int = 100) -> float:
    """Method of moments (Amsaleg et al. 2018, Data Min. Knowl. Disc. 32:1768), as in scikit-dimension.

    Pointwise, with w = r_k and m1 = (r_1 + ... + r_k) / k the first moment of the neighbour distances,
    d_i = m1 / (w - m1); k = 100 by default (scikit-dimension's). The estimate is the mean over points.
    """
    distances = _columns(distances, k, "MoM")
    first_moment = distances[:, :k].mean(1)
    with np.errstate(divide="ignore"):
        pointwise = first_moment / (distances[:, k - 1] - first_moment)
    return _finite_mean(pointwise, "MoM")


def gride(distances, n1: int = 1, n2: int = 2) -> float:
    """GRIDE, generalized ratios ID estimator (Denti, Doimo, Laio & Mira 2022, Sci. Rep. 12:20005).

    mu_i = r_{n2} / r_{n1} has density d (mu^d - 1)^(n2 - n1 - 1) / (B(n2 - n1, n1) mu^((n2 - 1) d + 1)) on mu > 1;
    d is the maximum-likelihood root of the score
        (N - 1) / d + (n2 - n1 - 1) sum log(mu) / (1 - mu^-d) - (n2 - 1) sum log(mu) = 0,
    which has exactly one root. Conventions of DADApy (sissa-data-science/DADApy, the reference implementation)
    and of scikit-dimension's `GRIDE`, which this reproduces: (N - 1) in place of N (unbiased at n1 = 1), and ratios
    mu >= q50 + 20 (q95 - q50) dropped as overlapping points. Defaults n1 = 1, n2 = 2 (DADApy's and skdim's), where
    the estimate is the unbiased Pareto MLE (N - 1) / sum(log mu): TwoNN by maximum likelihood, without the
    discarded tail. Larger n1 (with n2 = 2 n1) probes larger scales and is less sensitive to noise at the
    scale of the nearest neighbours.
    """
    distances = _columns(distances, n2, "GRIDE")
    if not 1 <= n1 < n2:
        raise ValueError(f"GRIDE needs 1 <= n1 < n2, got n1={n1}, n2={n2}")
    with np.errstate(divide="ignore", invalid="ignore"):
        log_mu = np.log(distances[:, n2 - 1] / distances[:, n1 - 1])
    log_mu = log_mu[np.isfinite(log_mu) & (log_mu > 0)]  # ties (mu = 1) carry no information on d
    q50, q95 = np.percentile(np.exp(log_mu), [50, 95])
    log_mu = log_mu[np.exp(log_mu) < q50 + 20 * (q95 - q50)]
    n = len(log_mu)
    if n < 2:
        raise ValueError(f"GRIDE needs at least 2 untied ratios r_{n2}/r_{n1}, got {n}")
    sum_log_mu = log_mu.sum()

    def score(d):  # decreasing from +inf (d -> 0) to -n1 sum(log mu) (d -> inf)
        return (n - 1) / d + (n2 - n1 - 1) * np.sum(log_mu / -np.expm1(-d * log_mu)) - (n2 - 1) * sum_log_mu

    upper = 1.0
    while score(upper) > 0:
        upper *= 2
    return float(brentq(score, 1e-8, upper, xtol=1e-12, rtol=1e-12))
