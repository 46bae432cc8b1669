"""Isotropy scores: I(W) of Mu & Viswanath (2018) and IsoScore of Rudman et al. (2022)."""

import torch

from .vectors import Vectors


def isotropy_iw(X, device: str | torch.device = "auto") -> float:
    """I(W) = min_u Z(u) / max_u Z(u), Z(u) = sum_i exp(u^T w_i), over the eigenvectors u of W^T W.

    W is the raw (uncentred) n x D matrix, as in Mu & Viswanath (2018, "All-but-the-top", ICLR) and the
    implementation of Rajaee & Pilehvar (2021). Sign convention: an eigenvector has no sign, so u runs over both u
    and -u (2 D directions) and the result does not depend on the eigensolver's sign choice. The published reference
    code takes each u once, with whatever sign the eigensolver returned (`isotropy_iw_u_only`); since Z(-u) can
    differ from Z(u) by orders of magnitude for an off-centre cloud, the two conventions can give different values
    for the same W, and ours is never larger (its min is over more terms, its max too). log Z is computed with
    logsumexp (hidden states have norms in the hundreds and a plain exp overflows) and the ratio as
    exp(min log Z - max log Z).

    Cost: the one full eigendecomposition of the batch (`Vectors.eigh_uncentred`, D x D, float32, on the device;
    I(W) needs every eigenvector by definition), then log Z(u) for all 2 D directions from one n x D x D matrix
    product P = Xc V and a logsumexp over the rows of P and -P: u^T w_i = (Xc V)_iu + u^T mean, the offset added
    in float64 after the logsumexp.

    Near 1 for an isotropic cloud of unit scale around the origin when n >> D, and near 0 for a common offset.
    Unlike the other metrics it depends on the scale of the vectors (multiplying W by c multiplies the exponents
    by c) and on n / D: a standard Gaussian sample with n = 4096, D = 768 gives about 0.40, because the sample
    variances along the eigenvectors spread over the Marchenko-Pastur range.
    """
    log_z = torch.cat(_log_partition(X, device))
    return float(torch.exp(log_z.min() - log_z.max()))


def isotropy_iw_u_only(X, device: str | torch.device = "auto") -> float:
    """I(W) as the reference code of Mu & Viswanath and of Rajaee & Pilehvar computes it: each eigenvector u once,
    with the sign `torch.linalg.eigh` returned (which is arbitrary). Reported beside `isotropy_iw` where the
    Rajaee & Pilehvar tables are compared, so that a difference from the paper can be told apart from this
    convention; see `isotropy_iw` for the definition."""
    log_z, _ = _log_partition(X, device)
    return float(torch.exp(log_z.min() - log_z.max()))


def _log_partition(X, device) -> tuple[torch.Tensor, torch.Tensor]:
    """log Z(u) and log Z(-u), float64, for every eigenvector u of W^T W."""
    vectors = Vectors.of(X, device)
    _, eigenvectors = vectors.eigh_uncentred
    projections = vectors.centred32 @ eigenvectors  # u^T (w_i - mean) for every u
    offsets = vectors.mean @ eigenvectors.double()  # u^T mean, added in float64
    return (torch.logsumexp(projections, dim=0).double() + offsets,
            torch.logsumexp(-projections, dim=0).double() - offsets)


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
