"""`shape-metrics`: every geometry metric of a matrix of vectors, printed as JSON.

    shape-metrics vectors.npy                       # (n, D) array, one row per vector
    shape-metrics layer_3.parquet --batch-size 4096 --metrics anisotropy id_twonn
    python -m shape_of_learning.metrics vectors.npy --device cpu

Prints {metric: {"mean", "std", "batches"}, ..., "info": {...}}; std is over batches (ddof = 1) and null for a
single batch. Parquet input is an embedding shard of this project (read with shape_of_learning.extraction.shards).
"""

import argparse
import json
import logging
import math
import sys
from pathlib import Path

import numpy as np

from .batches import compute_metrics
from .registry import METRICS


def _load(path: Path) -> tuple[np.ndarray, str]:
    """The (n, D) matrix and the context for error messages: the shard's model, checkpoint and layer, or the path."""
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r"), str(path)
    if path.suffix == ".parquet":
        from shape_of_learning.extraction.shards import read_shard

        vectors, metadata = read_shard(path)
        names = [f"{key} {metadata[key]}" for key in ("model", "checkpoint", "layer") if key in metadata]
        return vectors, ", ".join(names + [str(path)])
    raise SystemExit(f"shape-metrics: {path} is neither .npy nor .parquet")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="shape-metrics", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path, help=".npy matrix (n, D) or a Parquet embedding shard")
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=list(METRICS),
        choices=list(METRICS),
        metavar="METRIC",
        help=f"subset of: {' '.join(METRICS)} (default: all)",
    )
    parser.add_argument("--batch-size", type=int, default=4096, help="vectors per batch (default 4096)")
    parser.add_argument("--batches", type=int, default=None, help="number of batches (default: as many as fit)")
    parser.add_argument("--seed", type=int, default=0, help="shuffling seed (default 0)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:1, ...")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    if not args.path.is_file():
        parser.error(f"no such file: {args.path}")

    try:
        vectors, context = _load(args.path)
        result = compute_metrics(
            vectors,
            args.metrics,
            batch_size=args.batch_size,
            n_batches=args.batches,
            seed=args.seed,
            device=args.device,
            context=context,
        )
    except ValueError as error:
        raise SystemExit(f"shape-metrics: {error}") from None
    output = {
        row.metric: {"mean": row.mean, "std": None if math.isnan(row.std) else row.std, "batches": int(row.batches)}
        for row in result.summary().itertuples()
    }
    output["info"] = result.info
    print(json.dumps(output, indent=2))


if __name__ == "__main__":
    main()
