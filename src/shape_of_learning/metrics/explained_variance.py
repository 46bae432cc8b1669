"""Anisotropy: the explained variance ratio of the first principal direction (paper section 2.3)."""

import torch

from .vectors import Vectors


def anisotropy(X, centred: bool = True, device: str | torch.device = "auto") -> float:
    """sigma_1^2 / sum_i sigma_i^2, the singular values sigma_i of the centred matrix X - mean (default).

    1 when all vectors lie on one line through the mean; about (1 + sqrt(D / n))^2 / D for an isotropic Gaussian
    sample of n vectors in D dimensions (the Marchenko-Pastur edge), not 1 / D; (s^2 + 1) / (s^2 + D) for
    unit noise plus a rank-1 spike of standard deviation s. `centred=False` uses the raw matrix instead, so a
    common offset of the vectors counts as a direction of variance: a common offset drives it to 1 while the
    centred value stays at the isotropic level. Computed as lambda_max / trace of the D x D Gram matrix in
    float64 (Razzhigaev et al. 2024, section 2.3; Ethayarajh 2019 for the offset): the denominator is the trace,
    ||X||_F^2, and the numerator only the top eigenvalue, found by Lanczos (`vectors.largest_eigenvalue`, relative
    residual 1e-10) rather than a full O(D^3) eigendecomposition.

    Centred anisotropy and average cosine (`average_cosine`) measure different things: the first is the shape of
    the cloud around its mean, the second mostly how far the mean sits from the origin.
    """
    vectors = Vectors.of(X, device)
    if centred:
        return float(vectors.largest_eigenvalue_centred / vectors.gram_centred.trace())
    return float(vectors.largest_eigenvalue_uncentred / vectors.gram_uncentred.trace())
