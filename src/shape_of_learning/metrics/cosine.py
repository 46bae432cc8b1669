"""Average cosine similarity between the vectors of a set, exactly, in O(n D)."""

import logging

import torch

from .vectors import Vectors

logger = logging.getLogger(__name__)


def average_cosine(X, centred: bool = False, device: str | torch.device = "auto") -> float:
    """Mean of cos(x_i, x_j) over the n (n - 1) ordered pairs i != j.

    With unit vectors u_i = x_i / |x_i|, sum_{i != j} u_i . u_j = |sum_i u_i|^2 - n, so the mean is
    (|sum_i u_i|^2 - n) / (n (n - 1)): exact, and no n x n matrix. `centred=True` uses x_i - mean instead
    (Godey et al. 2024 discuss both). Zero vectors have no direction and are left out with a warning. Raw average
    cosine (Ethayarajh 2019; Razzhigaev et al. 2024, section 2.3) is close to 1 when the vectors share a large
    common offset, whatever the shape of the cloud around it: it measures something different from centred
    anisotropy, which ignores the offset.
    """
    vectors = Vectors.of(X, device)
    norms = torch.linalg.vector_norm(vectors.centred if centred else vectors.centred + vectors.mean, dim=1)
    nonzero = norms > 0
    n = int(nonzero.sum())
    if n < vectors.n:
        logger.warning("average cosine: leaving out %d zero vectors of %d", vectors.n - n, vectors.n)
    if n < 2:
        raise ValueError(f"the average cosine needs at least 2 nonzero vectors, got {n}")
    weights = torch.where(nonzero, 1 / norms, 0.0)  # sum_i u_i = Xc^T w (+ mean sum_i w_i): no n x D temporary
    unit_sum = vectors.centred.T @ weights + (0 if centred else vectors.mean * weights.sum())
    return float((unit_sum.square().sum() - n) / (n * (n - 1)))
