"""A checkpoint's fingerprint: what it computes on the corpus, in a few numbers per layer.

The first `TOKENS` kept vectors of every layer (the same windows for every checkpoint of a model), projected on
`DIRECTIONS` fixed random unit directions of the layer's space (seeded by its width, so every checkpoint of a model
uses the same ones). Two checkpoints whose fingerprints agree to within the dtype's tolerance compute the same
function on the same inputs, whatever their bytes (`shape_of_learning.health.duplicates.same_behaviour`).
"""

import torch

TOKENS, DIRECTIONS = 16, 4


def directions(width: int) -> torch.Tensor:
    """(width, DIRECTIONS) float64 unit columns, the same for every call with this width."""
    basis = torch.randn(width, DIRECTIONS, generator=torch.Generator().manual_seed(width), dtype=torch.float64)
    return basis / torch.linalg.vector_norm(basis, dim=0)


class Fingerprint:
    """Collects the fingerprint of one forward pass, layer by layer, batch by batch."""

    def __init__(self, layers: int):
        self.rows = [[] for _ in range(layers)]

    def add(self, layer: int, vectors: torch.Tensor) -> None:
        """The next kept vectors (n, D) of `layer`, in item order; only the first TOKENS are taken (read back to
        the host: a GPU wait per layer in the first batch, none later)."""
        wanted = TOKENS - sum(len(rows) for rows in self.rows[layer])
        if wanted > 0 and len(vectors):
            taken = vectors[:wanted].detach().to("cpu", torch.float64)
            self.rows[layer].append(taken @ directions(taken.shape[1]))

    def record(self) -> dict:
        """{tokens, directions, layers: [[...], ...]} for the manifest: per layer, its projections token by token."""
        return {
            "tokens": TOKENS,
            "directions": DIRECTIONS,
            "layers": [torch.cat(rows).flatten().tolist() if rows else [] for rows in self.rows],
        }
