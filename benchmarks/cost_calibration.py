"""Measure this machine's calibration of the cost model (shape_of_learning.cost.calibration) and print it.

    .venv/bin/python benchmarks/cost_calibration.py                   # CPU, one thread per job (the demo's jobs)
    .venv/bin/python benchmarks/cost_calibration.py --device cuda     # a GPU: Pythia-410M's shape, bf16 and fp32

Each quantity through the pipeline's own code, start-ups in new worker processes, loading in fresh ones. On a CPU every
time is CPU time (user + system), which other processes on a shared machine leave alone, as Snakemake's benchmark files'
cpu_time column is; on a GPU, wall time:
  start-up     an extraction job of a tiny model (2 blocks of width 64, 256 tokens) and a metrics job of one of its
               layers, whose work is a few milliseconds, in a worker process as the pipeline runs them
               (shape_of_learning.worker): the first job of a new worker, whatever its process costs before that
               included, less a warm one is the worker's start-up (a warm job's fixed cost, on real checkpoints:
               benchmarks/checkpoint_overhead.py);
  forward      extract_speed.py's bare forward pass of a Pythia shape (its run_mode), tokens/s;
  writes       on a CPU, the pipeline's ShardWriter writing that shape's float16 states (with the index columns an
               extraction writes), bytes/s; on a GPU, from the extraction's tokens/s against the bare pass's,
               side by side (calibration.write_rate);
  loading      the same model's weights saved as float16 safetensors (as most Hub checkpoints are; just written: in
               the page cache, as right after a download) loaded as float32 onto the device, bytes of files/s;
  metrics      compute_metrics on one batch of 4,096 hidden-state-like vectors (metrics_speed.py's), every metric,
               at a few widths, best of --repeats.
The numbers print as a `Calibration(...)` to paste into calibration.py; docs/cost.md records the run behind each.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
parser.add_argument("--threads", type=int, default=1, help="threads per job (the rules' `threads:` on a workstation)")
parser.add_argument("--repeats", type=int, default=2, help="runs of each measurement; the fastest counts")
parser.add_argument("--tokens", type=int, default=8192, help="tokens per layer of the forward-pass measurement")
parser.add_argument(
    "--widths", type=int, nargs="+", default=None, help="metric widths (default: CPU 128 384 768, GPU 768 2560 4096)"
)
args = parser.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)  # before torch is imported
os.environ["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "0") if args.device == "cuda" else ""
sys.path.insert(0, str(Path(__file__).resolve().parent))

import concurrent.futures  # noqa: E402
import multiprocessing  # noqa: E402

import extract_speed  # noqa: E402
import metrics_speed  # noqa: E402
import torch  # noqa: E402

SHAPE = "pythia-410m" if args.device == "cuda" else "pythia-70m"
TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4)
STARTUP = {
    "extraction": """
import snakemake.iocontainers, sys, tempfile
from pathlib import Path
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.experiment.config import validate_model_entry
from shape_of_learning.models.checkpoints import checkpoints
entry = validate_model_entry({"path": sys.argv[1], "kind": "decoder", "layers": 2, "max_length": 64})
words = "the of and in to a is was for on as by with that from at".split()
windows = [" ".join(words[(i + j) % len(words)] for j in range(40)) for i in range(64)]
extract(checkpoints("tiny", entry)[0], entry, windows, 256, Path(tempfile.mkdtemp(dir=sys.argv[2]), "s"), loss=None)
""",
    "metrics": """
import snakemake.iocontainers, json, sys
from pathlib import Path
import pandas as pd
from shape_of_learning.metrics.layer import measure_layer
from shape_of_learning.experiment.config import validate_config
metrics = validate_config({"corpus": {"name": "c"}, "figures": {}, "metrics": {"batch_size": 128, "batches": 2},
                           "models": {"tiny": {"path": sys.argv[1], "kind": "decoder", "layers": 2}}})["metrics"]
manifest = json.loads(Path(sys.argv[2], "manifest.json").read_text())
shard = Path(sys.argv[2], "layer_1.parquet")
pd.concat([measure_layer(shard, manifest, layer=1, kind="decoder", settings=metrics)]).to_parquet(sys.argv[3])
""",
}


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_code(code: str, *argv: str) -> float:
    """In a worker: `code` run as a job's with `argv`; its seconds (on a CPU, the CPU time of this process)."""
    sys.argv = ["job", *argv]
    started = time.perf_counter() if args.device == "cuda" else time.process_time()
    exec(code, {"__name__": "job"})
    if args.device == "cuda":
        torch.cuda.synchronize()
        return time.perf_counter() - started
    return time.process_time() - started


def startups(workdir: Path) -> dict[str, float]:
    """Seconds of a worker's start-up, and of a warm worker's extraction and metrics jobs whose work is a few
    milliseconds: the median over --repeats new workers of (first job, a second of the same kind)."""
    import json
    import statistics

    from shape_of_learning.extraction.hidden_states import extract
    from shape_of_learning.models.checkpoints import checkpoints

    extract_speed.PYTHIA_SHAPES["tiny"] = TINY
    entry = extract_speed.model_entry("tiny", workdir, 64, 8, "auto")
    shards = workdir / "tiny-shards"  # the metrics jobs' input, with its manifest
    manifest = extract(
        checkpoints("tiny", entry)[0], entry, extract_speed.windows_of("", 64, 200), 256, shards, loss=None
    )
    (shards / "manifest.json").write_text(json.dumps(manifest, default=str))
    argv = {
        "extraction": (entry["path"], str(workdir)),
        "metrics": (entry["path"], str(shards), str(workdir / "m.parquet")),
    }
    found = {"startup": [], "extraction": [], "metrics": []}
    context = multiprocessing.get_context("spawn")
    for _ in range(args.repeats):
        started = time.perf_counter()
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            pid = pool.submit(os.getpid).result()  # the worker, started: its interpreter and this script's imports
            first = (time.perf_counter() - started) if args.device == "cuda" else process_cpu(pid)
            first += pool.submit(run_code, STARTUP["extraction"], *argv["extraction"]).result()
            warm = {kind: pool.submit(run_code, STARTUP[kind], *argv[kind]).result() for kind in STARTUP}
        found["startup"].append(first - warm["extraction"])
        for kind in STARTUP:
            found[kind].append(warm[kind])
    return {key: statistics.median(values) for key, values in found.items()}


def load_rate(entry: dict, workdir: Path) -> tuple[float, int]:
    """Bytes/s of loading the model's weights, saved as float16, as float32 onto the device (in a child process)."""
    import transformers

    from shape_of_learning.extraction.loading import load_model

    half = workdir / "float16-weights"
    if not half.exists():
        transformers.AutoModelForCausalLM.from_pretrained(entry["path"], dtype=torch.float16).save_pretrained(half)
    size = sum(path.stat().st_size for path in half.glob("*.safetensors"))
    config = transformers.AutoConfig.from_pretrained(half)
    started, cpu_started = time.perf_counter(), time.process_time()
    load_model(str(half), None, config, torch.float32, args.device, False, head=False)
    if args.device == "cuda":
        torch.cuda.synchronize()
        return size / (time.perf_counter() - started), size
    return size / (time.process_time() - cpu_started), size


def forward(entry: dict, workdir: Path) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """dtype: tokens/s of the bare pass (on a CPU from its CPU time), and dtype: (bare, extraction) wall-time
    tokens/s side by side, each the best of --repeats fresh processes (extract_speed.run_mode)."""
    windows = extract_speed.windows_of("", 4 * args.tokens // entry["max_length"] + 64, 8 * entry["max_length"])
    context = multiprocessing.get_context("spawn")
    bare, pairs = {}, {}
    for dtype in ["bfloat16", "float32"] if args.device == "cuda" else ["float32"]:
        runs = {"bare": [], "extract": [] if args.device == "cuda" else None}
        for repeat in range(args.repeats):
            for mode in (mode for mode, found in runs.items() if found is not None):
                with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                    runs[mode].append(
                        pool.submit(
                            extract_speed.run_mode,
                            mode,
                            {**entry, "dtype": dtype},
                            windows,
                            args.tokens,
                            str(workdir / f"shards-{dtype}-{repeat}"),
                            "float16",
                        ).result()
                    )
        walls = {mode: max(run["tokens_per_second"] for run in found) for mode, found in runs.items() if found}
        bare[dtype] = (
            walls["bare"] if args.device == "cuda" else args.tokens / min(run["cpu_seconds"] for run in runs["bare"])
        )
        if args.device == "cuda":
            pairs[dtype] = (walls["bare"], walls["extract"])
    return bare, pairs


def write_rate_cpu(layers: int, width: int, workdir: Path) -> float:
    """Bytes/s of float16 states written by ShardWriter, from its CPU time: `args.tokens` tokens of each of
    `layers` + 1 states, in batches of 4,096, with the window, position and token-id columns of an extraction."""
    import numpy as np

    from shape_of_learning.extraction.shards import ShardWriter

    rng = np.random.default_rng(0)
    batch = rng.standard_normal((4096, width), dtype=np.float32)
    index = np.arange(4096)
    times = []
    for repeat in range(args.repeats):
        started = time.process_time()
        for layer in range(layers + 1):
            with ShardWriter(workdir / f"w{repeat}-{layer}.parquet", metadata={"layer": layer}) as shard:
                for _ in range(args.tokens // 4096):
                    shard.append(batch, windows=index // 64, positions=index % 64, token_ids=index)
        times.append(time.process_time() - started)
    return (layers + 1) * (args.tokens // 4096) * 4096 * width * 2 / min(times)


def metrics_batches(widths: list[int]) -> dict[int, float]:
    from shape_of_learning.metrics import compute_metrics

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    found = {}
    for width in widths:
        batch = metrics_speed.hidden_state_like(4096, width)
        compute_metrics(batch, batch_size=4096, device=device)  # warm-up: allocator, kernels, lazy imports
        if args.device == "cuda":
            found[width] = round(
                metrics_speed.best_time(
                    lambda: compute_metrics(batch, batch_size=4096, device=device), args.repeats, device
                )[0],
                4,
            )
            continue
        times = []
        for _ in range(args.repeats):
            started = time.process_time()
            compute_metrics(batch, batch_size=4096, device=device)
            times.append(time.process_time() - started)
        found[width] = round(min(times), 4)
    return found


def main() -> None:
    from shape_of_learning.cost.calibration import write_rate

    shape = extract_speed.PYTHIA_SHAPES[SHAPE]
    layers, width = shape["num_hidden_layers"], shape["hidden_size"]
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        started = startups(workdir)
        entry = extract_speed.model_entry(SHAPE, workdir, 256, 16 if args.device == "cpu" else 32, "auto")
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            loads = [pool.submit(load_rate, entry, workdir).result() for _ in range(args.repeats)]
        (rate, size), (bare, pairs) = max(loads), forward(entry, workdir)
        writes = (
            write_rate((layers + 1) * width * 2, *pairs.values())
            if args.device == "cuda"
            else write_rate_cpu(layers, width, workdir)
        )
        widths = args.widths or ([768, 2560, 4096] if args.device == "cuda" else [128, 384, 768])
        batches = metrics_batches(widths)
    print(
        f"# {SHAPE}'s shape: {layers} blocks of width {width}; weights {size / 1e6:.0f} MB as float16 files; "
        f"{args.threads} thread(s), {args.device}, best of {args.repeats}"
        + (f"; (bare, extraction) tokens/s: {pairs}" if pairs else "")
    )
    print(f"""Calibration(
    device="{"GPU" if args.device == "cuda" else "core"}",
    forward_parameters=...,  # {SHAPE}'s (calibration.py)
    bare_tokens_per_s={ {dtype: round(value) for dtype, value in bare.items()} },
    write_bytes_per_s={writes:.3e},
    load_bytes_per_s={rate:.3e},
    worker_startup_s={started["startup"]:.2f},
    extraction_job_s=...,  # a warm worker's jobs on real checkpoints: benchmarks/checkpoint_overhead.py
    metrics_job_s=...,
    metrics_batch_s={batches},
)""")


if __name__ == "__main__":
    main()
