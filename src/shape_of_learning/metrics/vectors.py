"""A batch of vectors as float64 offsets from their mean, shared by every metric of the batch.

Every metric is computed from the centred matrix and the mean, never from the raw vectors: hidden states
often sit far from the origin (a common offset of norm in the hundreds), and products of raw float32 vectors
lose the small differences between them (cancellation). Centring in float64 keeps those differences, and the
raw vectors are recovered exactly as centred + mean where a metric needs them.
"""

from functools import cached_property

import numpy as np
import torch


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """"auto" is the first CUDA device when torch sees one, else the CPU; anything else goes to torch.device."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class Vectors:
    """n vectors of dimension D on one device: `centred` (n, D) float64, `mean` (D,) float64.

    The eigenproblems behind anisotropy and I(W) and the second moments of IsoScore use float64; the n x n
    distance product behind the neighbour estimators uses the float32 copy `centred32` (see neighbours.py).
    Pass a `Vectors` to any metric function in place of a matrix to share this work between metrics.
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
        return self.centred.T @ self.centred

    @cached_property
    def gram_uncentred(self) -> torch.Tensor:
        """W^T W = Xc^T Xc + n m m^T (D x D, float64), since the columns of Xc sum to zero (to float64 rounding)."""
        return self.gram_centred + self.n * torch.outer(self.mean, self.mean)

    @cached_property
    def eigh_uncentred(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Eigenvalues (ascending) and eigenvectors (columns) of W^T W."""
        return torch.linalg.eigh(self.gram_uncentred)
