"""Speed of the metric stage: our full pass on one batch vs scikit-dimension and vs the bare distance product.

    .venv/bin/python benchmarks/metrics_speed.py [--n 4096] [--dims 768 2560] [--repeats 2] [--threads T]
        [--near-duplicates]

On the same batch of n vectors, side by side in one run and on the same T threads (torch and BLAS alike):
  bare     the n x n x D float32 product X X^T on the device, nothing else;
  ours     compute_metrics with all ten metrics (anisotropy x2, average cosine x2, TwoNN, MADA, MoM, GRIDE,
           I(W), IsoScore), split into its neighbour part (duplicate removal, one exact kNN, four ID estimators)
           and its spectral part (float64 Gram, Lanczos, cosines, IsoScore, I(W));
  groups   each metric group alone (a compute_metrics call with just its metrics, centring included), one row
           per group: neighbours (the four ID estimators), anisotropy x2 + average cosine x2 + IsoScore (float64
           Gram and two Lanczos runs), I(W) (Gram, one float32 D x D eigendecomposition, one n x D x D product);
  skdim    scikit-dimension's TwoNN, MADA and MoM (defaults), one after another, always on the CPU.
Targets (GitHub issue 4): ours >= 10x faster than skdim's three; ours within 2x of bare. Times are the best of
--repeats runs (skdim: --skdim-repeats). The batch is hidden-state-like: a Gaussian with a power-law spectrum
and a common offset. With --near-duplicates it is a byte-level model's instead: n / 8 such vectors, each repeated
with a 2% perturbation, so that most rows' nearest neighbour is close enough for the exact float64 recomputation
(metrics/neighbours.py); a last line per D then times that recomputation in cache-sized blocks against one block.
"""

import argparse
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from shape_of_learning.metrics import METRICS, compute_metrics, neighbours
from shape_of_learning.metrics.vectors import Vectors

NEIGHBOUR_METRICS = [name for name, metric in METRICS.items() if metric.needs == "neighbours"]
SPECTRAL_METRICS = [name for name in METRICS if name not in NEIGHBOUR_METRICS]
GROUPS = {
    "neighbours (TwoNN, MADA, MoM, GRIDE)": NEIGHBOUR_METRICS,
    "anisotropy x2 + avg cosine x2 + IsoScore": [
        "anisotropy",
        "anisotropy_uncentred",
        "avg_cosine",
        "avg_cosine_centred",
        "isoscore",
    ],
    "I(W)": ["isotropy_iw"],
}


def hidden_state_like(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spectrum = np.arange(1, dim + 1) ** -0.5
    offset = rng.standard_normal(dim) * 0.5
    return (rng.standard_normal((n, dim)) * spectrum + offset).astype(np.float32)


def near_duplicate_like(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """n vectors, each one of n / 8 hidden-state-like ones plus a 2% perturbation (a token in another context)."""
    tokens = hidden_state_like(max(2, n // 8), dim, seed)
    spread = hidden_state_like(n, dim, seed + 1)  # of the same spectrum as the tokens' spread
    X = tokens[np.random.default_rng(seed).integers(0, len(tokens), n)]
    return X + 0.02 * (spread - spread.mean(0))


def exact_recompute_times(X: np.ndarray, k: int, repeats: int) -> tuple[int, float, float]:
    """The at-risk rows' exact float64 distances (neighbours._exact_squared_distances), in blocks of
    EXACT_BLOCK_ELEMENTS and in one block of BLOCK_ELEMENTS: (rows, seconds, seconds), the same values."""
    vectors = Vectors.of(X)
    x64, norms = vectors.centred, vectors.centred.square().sum(1)
    nearest = neighbours._nearest(x64, norms, torch.arange(vectors.n), k)
    rows = torch.nonzero(nearest.values[:, 0] < neighbours.RISK_RATIO * norms).squeeze(1)
    found = nearest.indices[rows]
    cpu = torch.device("cpu")
    blocked, values = best_time(lambda: neighbours._exact_squared_distances(x64, rows, found), repeats, cpu)
    cache_sized, neighbours.EXACT_BLOCK_ELEMENTS = neighbours.EXACT_BLOCK_ELEMENTS, neighbours.BLOCK_ELEMENTS
    try:
        whole, whole_values = best_time(lambda: neighbours._exact_squared_distances(x64, rows, found), repeats, cpu)
    finally:
        neighbours.EXACT_BLOCK_ELEMENTS = cache_sized
    assert torch.equal(values, whole_values)
    return len(rows), blocked, whole


def best_time(run, repeats: int, device: torch.device) -> tuple[float, object]:
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        out = run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4096, help="vectors in the batch (default 4096)")
    parser.add_argument("--dims", type=int, nargs="+", default=[768, 2560], help="dimensions D (default 768 2560)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of ours and bare; the fastest counts")
    parser.add_argument("--skdim-repeats", type=int, default=1, help="runs of each skdim estimator")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="threads for torch and BLAS")
    parser.add_argument("--device", default="auto", help="device of ours and bare: auto, cpu, cuda")
    parser.add_argument("--near-duplicates", action="store_true", help="a byte-level model's batch (see above)")
    args = parser.parse_args()
    import skdim

    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else "cpu"
        if args.device == "auto"
        else args.device
    )
    torch.set_num_threads(args.threads)
    print(
        f"n = {args.n}, threads = {args.threads} (torch and BLAS), ours/bare on {device}, skdim on cpu, "
        f"best of {args.repeats} (skdim {args.skdim_repeats})"
    )
    header = (
        f"{'D':>5} {'bare':>7} {'ours':>7} {'ours_nn':>8} {'ours_sp':>8} {'TwoNN':>7} {'MADA':>7} {'MoM':>7} "
        f"{'skdim3':>7} {'skdim3/ours':>12} {'ours/bare':>10} {'nn/bare':>8}  ours - skdim (TwoNN, MADA, MoM)"
    )
    print(header)
    group_rows, exact_rows = [], []
    batch = near_duplicate_like if args.near_duplicates else hidden_state_like
    with threadpool_limits(args.threads):
        for dim in args.dims:
            X = batch(args.n, dim)
            on_device = torch.from_numpy(X).to(device)
            compute_metrics(X, batch_size=args.n, device=device)  # warm-up: allocator, kernels, lazy imports
            bare, _ = best_time(lambda: on_device @ on_device.T, args.repeats, device)
            ours, result = best_time(lambda: compute_metrics(X, batch_size=args.n, device=device), args.repeats, device)
            neighbour, _ = best_time(
                lambda: compute_metrics(X, NEIGHBOUR_METRICS, batch_size=args.n, device=device), args.repeats, device
            )
            spectral, _ = best_time(
                lambda: compute_metrics(X, SPECTRAL_METRICS, batch_size=args.n, device=device), args.repeats, device
            )
            cpu = torch.device("cpu")
            estimators = {"TwoNN": skdim.id.TwoNN, "MADA": skdim.id.MADA, "MoM": skdim.id.MOM}
            theirs = {
                name: best_time(lambda: estimator().fit(X).dimension_, args.skdim_repeats, cpu)
                for name, estimator in estimators.items()
            }
            skdim_total = sum(seconds for seconds, _ in theirs.values())
            ours_values = result.values.set_index("metric")["value"]
            gaps = [
                ours_values[key] / theirs[name][1] - 1
                for key, name in (("id_twonn", "TwoNN"), ("id_mada", "MADA"), ("id_mom", "MoM"))
            ]
            print(
                f"{dim:>5} {bare:7.3f} {ours:7.3f} {neighbour:8.3f} {spectral:8.3f} "
                + " ".join(f"{theirs[name][0]:7.3f}" for name in ("TwoNN", "MADA", "MoM"))
                + f" {skdim_total:7.3f} {skdim_total / ours:12.1f} {ours / bare:10.2f} {neighbour / bare:8.2f}  "
                + ", ".join(f"{gap:+.1e}" for gap in gaps)
            )
            for group, metrics in GROUPS.items():
                seconds, _ = best_time(
                    lambda: compute_metrics(X, metrics, batch_size=args.n, device=device), args.repeats, device
                )
                group_rows.append((dim, group, seconds, bare))
            if args.near_duplicates:
                exact_rows.append((dim, *exact_recompute_times(X, k=100, repeats=args.repeats)))
    print(
        "seconds; ours_nn / ours_sp: the neighbour-estimator and spectral metrics alone; "
        "skdim3 = TwoNN + MADA + MoM; ratios > 1 mean the left one is slower"
    )
    print(f"\nper metric group, each alone (best of {args.repeats}):")
    print(f"{'D':>5}  {'group':<42} {'seconds':>8} {'/bare':>7}")
    for dim, group, seconds, bare in group_rows:
        print(f"{dim:>5}  {group:<42} {seconds:8.3f} {seconds / bare:7.2f}")
    for dim, rows, blocked, whole in exact_rows:
        print(
            f"D = {dim}: exact recomputation of {rows} of {args.n} rows (k = 100), cache-sized blocks {blocked:.3f} s, "
            f"one block {whole:.3f} s: {whole / blocked:.1f}x, the same values"
        )


if __name__ == "__main__":
    main()
