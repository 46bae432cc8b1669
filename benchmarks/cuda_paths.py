"""Run, on a real GPU, the extraction paths that the unit tests can only mock, and check what they produce.

    python benchmarks/cuda_paths.py [--model pythia-410m]

On a random Pythia-shaped model (benchmarks/extract_speed.py) and the same windows:
  1. float32 and bfloat16 extraction on the whole GPU: the reference vectors, and how far bf16 is from them;
  2. device_map="auto": other tensors occupy the GPU until its free memory is below 1.25x the weights, so that
     `extract` must spread the model over GPU and CPU (accelerate); its vectors must equal the plain bf16 run's;
  3. out-of-memory halving: the GPU is filled until a first batch of --oom-batch windows cannot fit; `extract` must
     halve the batch until it does, and its vectors must equal the plain bf16 run's.
Prints one line per check with its numbers, and exits non-zero if a check fails.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shape_of_learning import paths  # noqa: E402
from shape_of_learning.extraction.hidden_states import extract  # noqa: E402
from shape_of_learning.extraction.shards import read_shard  # noqa: E402
from shape_of_learning.models.checkpoints import checkpoints  # noqa: E402

from extract_speed import model_entry, windows_of  # noqa: E402


def vectors(out_dir: Path, layers: int) -> list[np.ndarray]:
    return [read_shard(out_dir / paths.shard_name(layer))[0] for layer in range(layers + 1)]


def run(entry: dict, texts: list[str], tokens: int, out_dir: Path, *, leave_free: float | None = None) -> dict:
    """`extract` with, if asked, all but `leave_free` bytes of the GPU held by another tensor."""
    [checkpoint] = checkpoints("bench", entry)
    hog = None
    if leave_free is not None:
        free = torch.cuda.mem_get_info()[0]
        hog = torch.empty(int(free - leave_free), dtype=torch.uint8, device="cuda")
    try:
        return extract(checkpoint, entry, texts, tokens, out_dir, store_dtype="float32", device="cuda")
    finally:
        del hog
        torch.cuda.empty_cache()


def worst_relative_error(found: list[np.ndarray], reference: list[np.ndarray]) -> float:
    return max(float(np.linalg.norm(f - r) / np.linalg.norm(r)) for f, r in zip(found, reference))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pythia-410m")
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--oom-batch", type=int, default=64, help="windows in the first batch of check 3")
    parser.add_argument("--text", default="", help="a text or XML file to cut windows from (default: random words)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this script checks the GPU paths of extraction")
    tokens = args.oom_batch * args.max_length
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        entry = model_entry(args.model, workdir, args.max_length, args.oom_batch, "bfloat16")
        texts = windows_of(args.text, args.oom_batch + 16, 2 * args.max_length)
        layers = entry["layers"]

        fp32 = run({**entry, "dtype": "float32", "batch_size": 8}, texts, tokens, workdir / "fp32")
        bf16 = run({**entry, "batch_size": 8}, texts, tokens, workdir / "bf16")
        reference, plain = vectors(workdir / "fp32", layers), vectors(workdir / "bf16", layers)
        print(
            f"1. fp32 {fp32['tokens_per_second']:.0f} tok/s, bf16 {bf16['tokens_per_second']:.0f} tok/s on "
            f"{bf16['device']}; bf16 vs fp32, worst layer: relative error "
            f"{worst_relative_error(plain, reference):.2e}"
        )

        config = AutoConfig.from_pretrained(entry["path"])
        with torch.device("meta"):
            weight_bytes = sum(p.numel() for p in AutoModel.from_config(config).parameters()) * 2
        spread = run({**entry, "batch_size": 8}, texts, tokens, workdir / "device_map", leave_free=1.1 * weight_bytes)
        error = worst_relative_error(vectors(workdir / "device_map", layers), plain)
        ok = spread["device"].startswith("cuda") and error < 1e-2
        print(
            f"2. device_map='auto' with {1.1 * weight_bytes / 2**30:.2f} GiB free for {weight_bytes / 2**30:.2f} "
            f"GiB of weights: {spread['tokens_per_second']:.0f} tok/s, vs plain bf16 relative error {error:.2e}"
            f" -> {'ok' if ok else 'FAILED'}"
        )
        failures += [] if ok else ["device_map"]

        activations = args.oom_batch * args.max_length * config.hidden_size * 2 * (layers + 1)
        halved = run(entry, texts, tokens, workdir / "oom", leave_free=weight_bytes + activations / 2)
        error = worst_relative_error(vectors(workdir / "oom", layers), plain)
        ok = halved["batch_size"] < args.oom_batch and error < 1e-2
        print(
            f"3. out-of-memory halving: first batch {args.oom_batch} windows, ran at {halved['batch_size']}; "
            f"vs plain bf16 relative error {error:.2e} -> {'ok' if ok else 'FAILED'}"
        )
        failures += [] if ok else ["oom halving"]
    if failures:
        print(f"FAILED: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
