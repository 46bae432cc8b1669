"""Cleaner throughput on the real enwik8 prefix, scaled to the whole 10^8-byte enwik8 (target: under 60 s, one core).

taskset -c 0 .venv/bin/python benchmarks/clean_speed.py [--src PATH] [--repeats N]
"""

import argparse
import logging
import tempfile
from pathlib import Path

from shape_of_learning.corpus import clean_dump, gensim_sample_path

ENWIK8_BYTES = 10**8
TARGET_SECONDS = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--src",
        type=Path,
        help="MediaWiki XML dump (plain, .bz2 or .gz); default: the Wikipedia sample "
        "in gensim's wheel (docs/benchmarks.md: enwik8's first 4 MB)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs; the fastest counts")
    args = parser.parse_args()
    args.src = args.src or gensim_sample_path()
    if not args.src.is_file():
        parser.error(f"{args.src} not found; pass --src with a MediaWiki XML dump")
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [
            clean_dump(args.src, Path(tmp) / "clean.txt", Path(tmp) / "clean.stats.json") for _ in range(args.repeats)
        ]
    best = min(runs, key=lambda stats: stats["seconds"])
    rate = best["bytes_in"] / best["seconds"]
    estimate = ENWIK8_BYTES / rate
    print(
        f"{args.src.name}: {best['bytes_in']:,} bytes in {best['seconds']:.2f} s (best of {args.repeats}) = "
        f"{rate / 1e6:.2f} MB/s"
    )
    print(
        f"enwik8 (10^8 bytes) estimate: {estimate:.1f} s = {estimate / TARGET_SECONDS:.2f} x the "
        f"{TARGET_SECONDS:.0f} s target"
    )


if __name__ == "__main__":
    main()
