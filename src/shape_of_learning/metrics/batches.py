"""The batch protocol of the paper (section 2.2): every metric on shuffled batches, then mean and std over batches."""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .neighbours import deduplicate, knn_distances
from .registry import METRICS
from .vectors import Vectors, resolve_device

logger = logging.getLogger(__name__)


@dataclass
class MetricsResult:
    """`values`: one row per (metric, batch) with columns metric, batch, value. `info`: what was measured how.

    info keys: vectors (rows of the input), dimension, batch_size, batches, metrics, duplicates_removed
    ({"total": int, "per_batch": [int, ...]}: repeated vectors left out of the neighbour estimators of each
    batch), device, seconds.
    """

    values: pd.DataFrame
    info: dict = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """metric, mean, std, batches; std is the sample std over batches (ddof = 1), NaN for a single batch."""
        grouped = self.values.groupby("metric", sort=False)["value"]
        table = grouped.agg(mean="mean", std=lambda v: v.std(ddof=1), batches="count").reset_index()
        table["batches"] = table["batches"].astype(int)
        return table


def _check_finite(X, context: str) -> None:
    finite = torch.isfinite(X).all(1) if isinstance(X, torch.Tensor) else np.isfinite(X).all(1)
    bad = np.flatnonzero(~np.asarray(finite.cpu() if isinstance(finite, torch.Tensor) else finite))
    if len(bad):
        raise ValueError(
            f"{context}: {len(bad)} of {len(finite)} vectors contain NaN or Inf (first at row {bad[0]}); "
            "no metric averages them in. Fix the extraction (float16 overflows above 65504: "
            "extract in float32 or bfloat16)."
        )


def compute_metrics(
    X,
    metrics=tuple(METRICS),
    *,
    batch_size: int = 4096,
    n_batches: int | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    context: str = "",
    settings: dict[str, dict] | None = None,
) -> MetricsResult:
    """Every requested metric on each of `n_batches` batches of `batch_size` vectors drawn without replacement.

    X: an (n, D) float matrix (numpy float16/32/64 or a torch tensor), one row per vector. The rows are shuffled
    with `seed` and cut into `n_batches` consecutive batches (default floor(n / batch_size); the remaining rows
    are not used). Each batch gets one value per metric (see `MetricsResult`).

    Each metric is called as `registry.METRICS` declares (what it needs: the batch, its Gram matrix or its neighbour
    distances). Per batch: the vectors are centred once in float64 on `device` ("auto": CUDA when available);
    anisotropy, I(W) and IsoScore share one float64 Gram matrix (anisotropy takes its top eigenvalue by block
    Lanczos, IsoScore its trace and Frobenius norm, I(W) the batch's one full eigendecomposition, in float32); the
    ID estimators share one exact k-nearest-neighbour search (k = the largest order they need, 100 for MoM) on the
    batch with repeated vectors removed (counted in info["duplicates_removed"]); the other metrics keep repeated
    vectors, which are genuine samples of the distribution. A batch with fewer distinct vectors than k + 1 runs
    MADA and MoM with k = (distinct vectors - 1), as scikit-dimension does, and logs a warning.
    `settings` overrides a metric's settings by name, e.g. ``{"id_twonn": {"discard_fraction": 0.2}}``; the others
    run at their function's defaults (`Metric.settings`). `context` (e.g. "model pythia-70m, checkpoint step1000,
    layer 3") starts every error message.
    At n = 4096 all ID estimators badly underestimate high dimensions (isotropic Gaussian in D = 768: TwoNN ~163,
    MADA ~141, MoM ~119), a property of the estimators, not a bug (see `intrinsic_dimension`). Summary std over
    batches: ddof = 1, NaN for a single batch.
    """
    started = time.perf_counter()
    context = context or "input matrix"
    metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    chosen, resolved = _resolve(metrics, settings, context)
    X = _matrix(X, context)
    n, dim = X.shape
    neighbours = max((metric.neighbours_read(resolved[metric.name]) for metric in chosen), default=0)
    n_batches = _batch_count(n, batch_size, n_batches, neighbours, context)
    _check_finite(X, context)

    device = resolve_device(device)
    batches = _shuffled_batches(X, seed, n_batches, batch_size, device)
    values, duplicates = _measure_batches(batches, n_batches, chosen, resolved, neighbours, context)
    info = {
        "vectors": n,
        "dimension": dim,
        "batch_size": batch_size,
        "batches": n_batches,
        "metrics": list(metrics),
        "duplicates_removed": {"total": sum(duplicates), "per_batch": duplicates},
        "device": str(device),
        "settings": {name: resolved[name] for name in metrics if resolved[name]},
        "seconds": round(time.perf_counter() - started, 3),
    }
    return MetricsResult(values, info)


def _measure_batches(
    batches: Iterator[Vectors], n_batches: int, chosen: list, resolved: dict, neighbours: int, context: str
) -> tuple[pd.DataFrame, list[int]]:
    """Every metric's value on each batch (`MetricsResult.values`), and how many repeated vectors each batch's
    neighbour estimators left out."""
    rows, duplicates = [], []
    for batch, vectors in enumerate(tqdm(batches, total=n_batches, desc="metric batches", leave=False, disable=None)):
        values, removed = _measure_batch(vectors, chosen, resolved, neighbours, f"{context}: batch {batch}")
        duplicates.append(removed)
        rows += [(metric.name, batch, values[metric.name]) for metric in chosen]
        logger.debug("%s: batch %d done, %d duplicates removed", context, batch, removed)
    return pd.DataFrame(rows, columns=["metric", "batch", "value"]), duplicates


def _matrix(X, context: str):
    """`X` as a torch tensor or a numpy array, refused where it is no (n, D) matrix."""
    if not isinstance(X, torch.Tensor):
        X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{context}: expected an (n, D) matrix, got shape {tuple(X.shape)}")
    return X


def _shuffled_batches(X, seed: int, n_batches: int, batch_size: int, device) -> Iterator[Vectors]:
    """The rows of `X` shuffled with `seed` and cut into `n_batches` consecutive batches of `batch_size`, each
    batch's rows in their order in `X`, on `device`."""
    order = np.random.default_rng(seed).permutation(len(X))
    for batch in range(n_batches):
        index = np.sort(order[batch * batch_size : (batch + 1) * batch_size])
        yield Vectors(X[torch.from_numpy(index)] if isinstance(X, torch.Tensor) else X[index], device)


def _resolve(metrics: tuple[str, ...], settings: dict[str, dict] | None, context: str) -> tuple[list, dict]:
    """The registry's metric for each name, and each one's settings: its function's defaults, overridden by name."""
    if unknown := sorted(set(metrics) - set(METRICS)):
        raise ValueError(f"{context}: unknown metrics {unknown}; choose from {list(METRICS)}")
    chosen = [METRICS[name] for name in metrics]
    if unknown := sorted(set(settings or {}) - set(metrics)):
        raise ValueError(f"{context}: settings given for {unknown}, which are not among the metrics computed")
    try:
        return chosen, {metric.name: metric.settings((settings or {}).get(metric.name)) for metric in chosen}
    except ValueError as error:
        raise ValueError(f"{context}: {error}") from None


def _batch_count(n: int, batch_size: int, n_batches: int | None, neighbours: int, context: str) -> int:
    """`n_batches`, or as many whole batches as `n` vectors hold; refused where a batch is too small or too many."""
    if batch_size < max(2, neighbours + 1):
        raise ValueError(
            f"{context}: batch_size={batch_size} is too small; the requested metrics need at least "
            f"{max(2, neighbours + 1)} vectors per batch (the paper uses 4096)"
        )
    available = n // batch_size
    if available < 1:
        raise ValueError(
            f"{context}: {n} vectors are fewer than one batch of batch_size={batch_size}; extract "
            f"at least {batch_size} vectors or lower batch_size"
        )
    n_batches = available if n_batches is None else n_batches
    if not 1 <= n_batches <= available:
        raise ValueError(
            f"{context}: n_batches={n_batches} batches of {batch_size} need {n_batches * batch_size} "
            f"vectors, got {n} (at most {available} batches)"
        )
    return n_batches


def _measure_batch(vectors: Vectors, chosen: list, resolved: dict, neighbours: int, where: str) -> tuple[dict, int]:
    """Each metric's value on one batch, and how many repeated vectors the neighbour estimators left out."""
    values = {
        metric.name: metric.compute(vectors, resolved[metric.name]) for metric in chosen if metric.needs != "neighbours"
    }
    if not neighbours:
        return values, 0
    unique, removed = deduplicate(vectors)
    if unique.n < 3:
        raise ValueError(
            f"{where} has only {unique.n} distinct vectors of {vectors.n}; the ID estimators need at least 3"
        )
    k = min(neighbours, unique.n - 1)
    distances = knn_distances(unique, k)
    for metric in (metric for metric in chosen if metric.needs == "neighbours"):
        values[metric.name] = metric.compute(distances, _capped(metric, resolved[metric.name], k, where))
    return values, removed


def _capped(metric, settings: dict, k: int, where: str) -> dict:
    """`settings` with the metric's neighbour count lowered to the `k` neighbours a batch has (e.g. the embedding
    layer of a byte-level model: at most 256 distinct vectors), as scikit-dimension does."""
    if metric.neighbours_read(settings) <= k:
        return settings
    logger.warning(
        "%s has %d distinct vectors; %s uses %s = %d instead of %d",
        where,
        k + 1,
        metric.name,
        metric.neighbours,
        k,
        settings[metric.neighbours],
    )
    return {**settings, metric.neighbours: k}
