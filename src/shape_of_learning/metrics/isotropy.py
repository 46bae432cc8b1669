"""Isotropy scores: I(W) of Mu & Viswanath (2018) and IsoScore of Rudman et al. (2022)."""

import numpy as np
import torch
from scipy.special import logsumexp

from .vectors import Vectors


def isotropy_iw(X, device: str | torch.device = "auto") -> float:
    """I(W) = min_u Z(u) / max_u Z(u), Z(u) = sum_i exp(u^T w_i), over the eigenvectors u of W^T W.

    W is the raw (uncentred) n x D matrix, as in Mu & Viswanath (2018, "All-but-the-top", ICLR) and the
    implementation of Rajaee & Pilehvar (2021). Sign convention: an eigenvector has no sign, so u runs over both u
    and -u (2 D directions) and the result does not depend on the eigensolver's sign choice. The published reference
    code takes each u once, with whatever sign its eigensolver returned (`isotropy_iw_notebook`); since Z(-u) can
    differ from Z(u) by orders of magnitude for an off-centre cloud, that value depends on the solver, and ours is
    never larger (its min is over more terms, its max too): `isotropy_iw_sign_draws` shows how far apart the
    choices of sign lie. log Z is computed with logsumexp (hidden states have norms in the hundreds and a plain exp
    overflows) and the ratio as exp(min log Z - max log Z).

    Cost: the one full eigendecomposition of the batch (`Vectors.eigh_uncentred`, D x D, float32, on the device;
    I(W) needs every eigenvector by definition), then log Z(u) for all 2 D directions from one n x D x D matrix
    product P = Xc V and a logsumexp over the rows of P and -P: u^T w_i = (Xc V)_iu + u^T mean, the offset added
    in float64 after the logsumexp.

    Near 1 for an isotropic cloud of unit scale around the origin when n >> D, and near 0 for a common offset.
    Unlike the other metrics it depends on the scale of the vectors (multiplying W by c multiplies the exponents
    by c) and on n / D: a standard Gaussian sample with n = 4096, D = 768 gives about 0.40, because the sample
    variances along the eigenvectors spread over the Marchenko-Pastur range.
    """
    high, low = _log_partition(X, device)
    return float(torch.exp(low.min() - high.max()))


def isotropy_iw_sign_draws(X, draws: int = 64, seed: int = 0, device: str | torch.device = "auto") -> torch.Tensor:
    """I(W) with each eigenvector taken once, as the reference code does, for `draws` random choices of its signs:
    the spread of that convention over the signs an eigensolver may return (float64, one value per draw).

    Draw k takes, for every eigenvector, u or -u by a fair coin of a generator seeded with `seed`; the coins choose
    between the larger and the smaller of Z(u) and Z(-u), so that the draws do not depend on the signs the solver
    returned either. Every value is at least `isotropy_iw`. Costs nothing beyond `isotropy_iw`'s eigendecomposition
    when given the same `Vectors`.
    """
    high, low = _log_partition(X, device)
    coins = torch.rand(draws, len(high), generator=torch.Generator().manual_seed(seed), dtype=torch.float64) < 0.5
    log_z = torch.where(coins.to(high.device), low, high)
    return torch.exp(log_z.min(1).values - log_z.max(1).values).cpu()


def isotropy_iw_notebook(X) -> float:
    """I(W) as Rajaee & Pilehvar's notebook computes it: `isotropy` of src/Clusterbased_isotropy_enhancement.ipynb
    (github.com/Sara-Rajaee/clusterbased_isotropy_enhancement), transcribed. The eigenvectors of W^T W come from
    `np.linalg.eig` in the dtype of X (their float32 representations), each taken once with the sign it returned.

    Two changes that leave every finite value of theirs as it is: log Z(u) by logsumexp in float64 (their
    ``np.sum(np.exp(f))`` overflows float32 once some u^T w_i exceeds 88), and the real part of the eigenvectors
    (`eig` solves the symmetric W^T W as a general matrix and can return imaginary parts of rounding size). What it
    returns depends on the eigensolver's signs; `isotropy_iw` does not.
    """
    W = np.asarray(X)
    _, eigenvectors = np.linalg.eig(np.matmul(np.transpose(W), W))
    log_z = logsumexp(np.matmul(W, np.real(eigenvectors)).astype(np.float64), axis=0)
    return float(np.exp(log_z.min() - log_z.max()))


def _log_partition(X, device) -> tuple[torch.Tensor, torch.Tensor]:
    """For every eigenvector u of W^T W, the larger and the smaller of log Z(u) and log Z(-u) (float64): free of
    the sign the eigensolver gave u."""
    vectors = Vectors.of(X, device)
    _, eigenvectors = vectors.eigh_uncentred
    projections = vectors.centred32 @ eigenvectors  # u^T (w_i - mean) for every u
    offsets = vectors.mean @ eigenvectors.double()  # u^T mean, added in float64
    plus = torch.logsumexp(projections, dim=0).double() + offsets
    minus = torch.logsumexp(-projections, dim=0).double() - offsets
    return torch.maximum(plus, minus), torch.minimum(plus, minus)


def isoscore(X, device: str | torch.device = "auto") -> float:
    """IsoScore (Rudman, Gillman, Rayne & Eickhoff 2022, Findings of ACL; arXiv 2108.07344), in [0, 1].

    Algorithm 1 of the paper in D dimensions: rotate to the principal axes; take the variance vector Sigma (the
    eigenvalues lambda of the covariance); normalise it to norm sqrt(D); isotropy defect
    delta = |Sigma_hat - 1| / sqrt(2 (D - sqrt(D))); fraction of dimensions used
    phi = (D - delta^2 (D - sqrt(D)))^2 / D^2; IsoScore = (D phi - 1) / (D - 1). The steps simplify exactly to
    (PR - 1) / (D - 1), with PR = (sum lambda)^2 / sum lambda^2 the participation ratio. No eigendecomposition is
    needed: for the symmetric covariance C, sum_i lambda_i = trace(C) and sum_i lambda_i^2 = trace(C^2) = ||C||_F^2,
    so PR = trace(C)^2 / ||C||_F^2, read from the batch's float64 Gram matrix Xc^T Xc = (n - 1) C (the factor
    cancels) in O(D^2).

    1 when the variance is spread equally over all D axes, 0 when all vectors lie on one line. A finite sample
    of an isotropic Gaussian gives PR ~ D / (1 + D / n), so n must be large compared with D to approach 1.
    """
    vectors = Vectors.of(X, device)
    gram = vectors.gram_centred
    participation_ratio = gram.trace() ** 2 / gram.square().sum()
    return float((participation_ratio - 1) / (vectors.dim - 1))
