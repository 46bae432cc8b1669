"""A batch of vectors as float64 offsets from their mean, shared by every metric of the batch.

Every metric is computed from the centred matrix and the mean, never from the raw vectors: hidden states
often sit far from the origin (a common offset of norm in the hundreds), and products of raw float32 vectors
lose the small differences between them (cancellation). Centring in float64 keeps those differences, and the
raw vectors are recovered exactly as centred + mean where a metric needs them.
"""

from functools import cached_property

import numpy as np
import torch
from scipy.linalg.blas import dsyrk

# Lanczos stops once the residual |G v - theta v| of the top Ritz pair is below LANCZOS_TOL * theta: theta is then
# within LANCZOS_TOL (relative) of an eigenvalue of G, and typically within LANCZOS_TOL^2 * theta / gap.
LANCZOS_TOL = 1e-10
LANCZOS_BLOCK = 4  # vectors per block Lanczos step (one pass over the D x D matrix serves all of them)


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """ "auto" is the first CUDA device when torch sees one, else the CPU; anything else goes to torch.device."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def gram(x: torch.Tensor) -> torch.Tensor:
    """x^T x. On the CPU in float64 by BLAS dsyrk, which exploits the symmetry (n D^2 flops instead of 2 n D^2)."""
    if x.device.type != "cpu" or x.dtype != torch.float64:
        return x.T @ x
    upper = np.triu(dsyrk(1.0, x.numpy().T, trans=0))  # x.numpy().T: the D x n matrix, column-major, no copy
    upper += np.triu(upper, 1).T
    return torch.from_numpy(np.ascontiguousarray(upper))  # row-major: products with it are fast


def _small_eigh(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """eigh of a small matrix on the CPU with one thread: multithreaded LAPACK only adds overhead at this size
    (tens of ms per call on a loaded 2-core machine), and a GPU eigh of a small matrix is launch-bound."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return torch.linalg.eigh(matrix.cpu())
    finally:
        torch.set_num_threads(threads)


def largest_eigenvalue(matrix: torch.Tensor, tol: float = LANCZOS_TOL, block: int = LANCZOS_BLOCK) -> torch.Tensor:
    """The largest eigenvalue of a symmetric matrix by block Lanczos (Rayleigh-Ritz on a block Krylov space).

    A Krylov method in the matrix's dtype and on its device: each step multiplies the matrix by one block of
    `block` vectors (2 D^2 block flops, one pass over the matrix) instead of a full O(D^3) eigendecomposition.
    The basis is kept orthonormal by re-orthogonalising every new block against all earlier ones (twice), and
    the Ritz values are the eigenvalues of the projected matrix Q^T G Q. The start block is fixed pseudo-random
    (seed 0), so the result is deterministic. Stops when the explicit residual |G y - theta y| of the top Ritz
    pair is at most `tol` times theta (theta is then within that relative distance of an eigenvalue, and
    typically within tol^2 / relative gap of the largest), or when the space spans all D dimensions (exact).
    """
    dim = matrix.shape[0]
    generator = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(dim, min(block, dim), generator=generator, dtype=matrix.dtype)).Q
    basis = basis.to(matrix.device)
    image = matrix @ basis
    projected = basis.T @ image
    while True:
        ritz, vectors = _small_eigh((projected + projected.T) / 2)
        largest, top = ritz[-1].to(matrix.device), vectors[:, -1].to(matrix.device)
        residual = torch.linalg.vector_norm(image @ top - largest * (basis @ top))
        if basis.shape[1] >= dim or residual <= tol * largest.abs():
            return largest
        new = image[:, -block:]
        for _ in range(2):  # block Gram-Schmidt against the whole basis, twice: orthogonal to rounding
            new = new - basis @ (basis.T @ new)
        new = torch.linalg.qr(new).Q[:, : dim - basis.shape[1]]
        new = torch.linalg.qr(new - basis @ (basis.T @ new)).Q  # again, in case the space became invariant
        new_image = matrix @ new
        cross = basis.T @ new_image
        projected = torch.cat([torch.cat([projected, cross], 1), torch.cat([cross.T, new.T @ new_image], 1)], 0)
        basis, image = torch.cat([basis, new], 1), torch.cat([image, new_image], 1)


class Vectors:
    """n vectors of dimension D on one device: `centred` (n, D) float64, `mean` (D,) float64.

    Shared per batch by every spectral metric: one centring, one float64 Gram matrix Xc^T Xc (`gram_centred`;
    `gram_uncentred` adds n m m^T to it), from which anisotropy takes the top eigenvalue by Lanczos
    (`largest_eigenvalue`) and IsoScore its trace and Frobenius norm; I(W) takes the one full eigendecomposition
    of W^T W (`eigh_uncentred`, float32). The n x n distance product behind the neighbour estimators uses the
    float32 copy `centred32` (see neighbours.py). Pass a `Vectors` to any metric function in place of a matrix to
    share this work between metrics.
    """

    def __init__(self, X, device: str | torch.device = "auto"):
        X = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X)
        if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 2:
            raise ValueError(f"expected an (n, D) matrix with n >= 2 vectors and D >= 2, got shape {tuple(X.shape)}")
        if not (X.is_floating_point() or X.dtype in (torch.int32, torch.int64)):
            raise ValueError(f"expected a real-valued matrix, got dtype {X.dtype}")
        X = X.to(resolve_device(device), torch.float64)
        self.mean = X.mean(0)
        self.centred = X - self.mean

    @classmethod
    def of(cls, X, device: str | torch.device = "auto") -> "Vectors":
        """`X` itself when it is already a `Vectors`, else `Vectors(X, device)`."""
        return X if isinstance(X, Vectors) else cls(X, device)

    def take(self, index: torch.Tensor) -> "Vectors":
        """The vectors at `index`, re-centred on their own mean."""
        subset = Vectors.__new__(Vectors)
        offset = self.centred[index].mean(0)
        subset.mean = self.mean + offset
        subset.centred = self.centred[index] - offset
        return subset

    @property
    def n(self) -> int:
        return self.centred.shape[0]

    @property
    def dim(self) -> int:
        return self.centred.shape[1]

    @property
    def device(self) -> torch.device:
        return self.centred.device

    @cached_property
    def centred32(self) -> torch.Tensor:
        return self.centred.float()

    @cached_property
    def gram_centred(self) -> torch.Tensor:
        """Xc^T Xc (D x D, float64): its eigenvalues are the squared singular values of the centred matrix."""
        return gram(self.centred)

    @cached_property
    def gram_uncentred(self) -> torch.Tensor:
        """W^T W = Xc^T Xc + n m m^T (D x D, float64), since the columns of Xc sum to zero (to float64 rounding)."""
        return self.gram_centred + self.n * torch.outer(self.mean, self.mean)

    @cached_property
    def largest_eigenvalue_centred(self) -> torch.Tensor:
        """sigma_1^2 of the centred matrix: the largest eigenvalue of Xc^T Xc (float64, Lanczos)."""
        return largest_eigenvalue(self.gram_centred)

    @cached_property
    def largest_eigenvalue_uncentred(self) -> torch.Tensor:
        """sigma_1^2 of the raw matrix W: the largest eigenvalue of W^T W (float64, Lanczos).

        Not read from `eigh_uncentred`: that is float32, accurate to only ~1e-7 of the largest eigenvalue, and a
        common offset makes the top eigenvalue of W^T W so dominant that Lanczos converges in a few steps.
        """
        return largest_eigenvalue(self.gram_uncentred)

    @cached_property
    def eigh_uncentred(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Eigenvalues (ascending) and eigenvectors (columns) of W^T W, float32, on the device (for I(W)).

        float32 halves the time of the O(D^3) eigendecomposition (more on a GPU); its eigenvectors change I(W) by
        well under 1e-3 (relative) even for hidden-state-like data with a large common offset (tests check it).
        """
        return torch.linalg.eigh(self.gram_uncentred.float())
