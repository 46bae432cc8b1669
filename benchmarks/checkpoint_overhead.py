"""What a checkpoint's jobs cost beyond their work, a fresh process per job (a rule script) against a warm worker
(shape_of_learning.worker), side by side on the checkpoints of a finished run.

    .venv/bin/snakemake --cores 2 --configfile presets/demo.yaml presets/ci.yaml --directory ../overhead-run
    .venv/bin/python benchmarks/checkpoint_overhead.py --directory ../overhead-run \\
        --configfile presets/demo.yaml presets/ci.yaml [--repeats 3]

Each checkpoint of the run's text and image models (their locks, windows and media; the demo trains them offline):
its extraction job, then its metrics jobs, written to a folder of the benchmark's own, by the same job functions the
rules run (shape_of_learning.extraction.job, shape_of_learning.metrics.job), one thread per job,

  fresh   each job in a new Python process that imports Snakemake's script module and the job's, as a rule script's
          job is (the design before workers);
  worker  each job in one worker process started before the round, warm after its first job;

the two interleaved checkpoint by checkpoint, in --repeats rounds. It prints, per checkpoint, the median over the
rounds of both, in CPU seconds (user + system: what other processes on a shared machine leave alone) and wall
seconds, and their ratios; then the cost model's calibration of this machine's worker (`Calibration` fields): a
worker's start-up (its first job less its warm one, median over the rounds) and the warm jobs' fixed cost per job.
"""

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--directory", type=Path, required=True, help="a finished run's working directory")
parser.add_argument("--configfile", type=Path, nargs="+", required=True, help="that run's config files")
parser.add_argument("--repeats", type=int, default=3)
TARGETS = {
    "extraction": "shape_of_learning.extraction.job:extract_hidden_states",
    "metrics": "shape_of_learning.metrics.job:measure_layers",
}
FRESH = """
import pickle, sys, importlib
import snakemake.script  # what Snakemake's wrapper of a rule script imports before the script's own imports
module, _, function = sys.argv[1].partition(":")
function = getattr(importlib.import_module(module), function)
from shape_of_learning.logs import job_logging
with open(sys.argv[2], "rb") as file:
    job = pickle.load(file)
with job_logging(job):
    function(job)
"""


def setup(args: argparse.Namespace) -> None:
    """The run's config and plan, in its working directory; module globals, out of the module's top level, which a
    spawned worker imports again."""
    global CONFIG, EXPERIMENT, paths, worker, Namedlist
    configfiles = [path.resolve() for path in args.configfile]
    os.chdir(args.directory)  # the run's relative paths: results/, logs/
    from shape_of_learning.experiment import results_root
    from shape_of_learning.experiment.config import load_config
    from shape_of_learning.experiment.plan import plan

    CONFIG = load_config(*configfiles)
    results_root.export(CONFIG)  # before shape_of_learning.paths is imported
    from snakemake.iocontainers import Namedlist

    from shape_of_learning import paths, worker

    EXPERIMENT = plan(CONFIG)
    CONFIG["models"] = EXPERIMENT.models


def named(**values):
    return Namedlist(fromdict=values)


def jobs_of(model: str, name: str, folder: Path) -> list:
    """A checkpoint's extraction job and its metrics jobs as the rules make them, their outputs in `folder`."""
    from shape_of_learning.experiment.config import extraction_settings
    from shape_of_learning.experiment.plan import layers_in_group

    entry, ckpt = EXPERIMENT.models[model], EXPERIMENT.checkpoint(model, name)
    modality = entry["modality"]
    corpus = paths.windows(CONFIG["corpus"]["name"]) if modality == "text" else None
    if corpus is None:
        corpus = paths.media(CONFIG[f"{modality}_corpus"]["name"], modality)
    shards, manifest = folder / "shards", folder / "manifest.json"
    log = folder / "logs"
    log.mkdir(parents=True, exist_ok=True)
    extraction = worker.Job(
        rule="extract_hidden_states",
        input=named(corpus=corpus, pin=paths.lock(model, name)),
        output=named(shards=str(shards), manifest=str(manifest)),
        params=named(
            checkpoint=ckpt,
            extraction=extraction_settings(CONFIG, model, modality),
            tokens=EXPERIMENT.tokens_per_layer,
        ),
        wildcards=named(model=model, checkpoint=name),
        threads=1,
        log=[str(log / "extract.log")],
        config=CONFIG,
    )
    jobs = [("extraction", extraction)]
    for group in EXPERIMENT.layer_groups(model):
        jobs.append(
            (
                "metrics",
                worker.Job(
                    rule="measure_layers",
                    input=named(shards=str(shards), manifest=str(manifest)),
                    output=[str(folder / f"layer_{group}.parquet")],
                    params=named(layers=layers_in_group(group), checkpoint_metrics=[]),
                    wildcards=named(model=model, checkpoint=name, layer_group=group),
                    threads=1,
                    log=[str(log / f"measure_{group}.log")],
                    config={**CONFIG, "extraction": {**CONFIG["extraction"], "evict_weights": False}},
                ),
            )
        )
    return jobs


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh(kind: str, job, folder: Path) -> tuple[float, float]:
    """(CPU, wall) seconds of `job` in a new process, as a rule script runs."""
    pickled = folder / f"{job.rule}.pickle"
    pickled.write_bytes(pickle.dumps(job))
    started, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(
        [sys.executable, "-c", FRESH, TARGETS[kind], str(pickled)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
    )
    if done.returncode:
        raise RuntimeError(f"a fresh {kind} job failed:\n{done.stderr[-3000:]}")
    return children_cpu() - cpu, time.perf_counter() - started


def warm(kind: str, job) -> tuple[float, float]:
    """(CPU, wall) seconds of `job` in this process's one worker."""
    pool = worker._workers(1).queue[-1]  # the one worker, idle (None before it starts)
    pid = next(iter(pool._processes or {}), None) if pool else None
    started, cpu = time.perf_counter(), cpu_of(pid) if pid else 0.0
    worker.run(TARGETS[kind], job, workers=1)
    pid = pid or next(iter(worker._idle.queue[-1]._processes))
    return cpu_of(pid) - cpu, time.perf_counter() - started


def main() -> None:
    args = parser.parse_args()
    setup(args)
    checkpoints = [
        (model, ckpt.name)
        for model, ckpts in EXPERIMENT.checkpoints.items()
        if "finetune" not in EXPERIMENT.models[model]
        for ckpt in ckpts
        if Path(paths.lock(model, ckpt.name)).exists() and not EXPERIMENT.models[model].get("package")
    ]
    per_checkpoint = {design: {key: [] for key in checkpoints} for design in ("fresh", "worker")}
    first_job, warm_jobs = [], {"extraction": [], "metrics": []}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            worker._idle = None  # a new worker each round: its first job pays its start-up
            for index, (model, name) in enumerate(checkpoints):
                for design in ("fresh", "worker") if (repeat + index) % 2 == 0 else ("worker", "fresh"):
                    folder = Path(scratch, design, str(repeat), model, name)
                    cpu = wall = 0.0
                    for kind, job in jobs_of(model, name, folder):
                        spent = fresh(kind, job, folder) if design == "fresh" else warm(kind, job)
                        cpu, wall = cpu + spent[0], wall + spent[1]
                        if design == "worker" and (model, name) == checkpoints[0] and kind == "extraction":
                            first_job.append(spent)
                        elif design == "worker":
                            warm_jobs[kind].append(spent)
                    per_checkpoint[design][model, name].append((cpu, wall))
            worker._idle.get().shutdown()
    print(
        f"{len(checkpoints)} checkpoints, {args.repeats} rounds interleaved; per checkpoint, its extraction and "
        "metrics jobs, median over the rounds (the worker's first checkpoint includes the worker's start-up):"
    )
    print(
        f"{'checkpoint':32} {'fresh CPU s':>11} {'worker CPU s':>12} {'ratio':>6} {'fresh wall s':>12} "
        f"{'worker wall s':>13} {'ratio':>6}"
    )
    totals = {"fresh": [0.0, 0.0], "worker": [0.0, 0.0]}
    for key in checkpoints:
        medians = {
            design: [statistics.median(run[i] for run in per_checkpoint[design][key]) for i in (0, 1)]
            for design in per_checkpoint
        }
        for design in totals:
            totals[design] = [totals[design][i] + medians[design][i] for i in (0, 1)]
        f, w = medians["fresh"], medians["worker"]
        print(
            f"{'/'.join(key):32} {f[0]:11.2f} {w[0]:12.2f} {w[0] / f[0]:6.2f} {f[1]:12.2f} {w[1]:13.2f} "
            f"{w[1] / f[1]:6.2f}"
        )
    f, w = totals["fresh"], totals["worker"]
    print(f"{'all':32} {f[0]:11.2f} {w[0]:12.2f} {w[0] / f[0]:6.2f} {f[1]:12.2f} {w[1]:13.2f} {w[1] / f[1]:6.2f}")
    warm_extraction = statistics.median(cpu for cpu, _ in warm_jobs["extraction"])
    startup = statistics.median(cpu for cpu, _ in first_job) - warm_extraction
    print("Calibration of this machine's worker, CPU seconds (cost.calibration):")
    print(f"    worker_startup_s={startup:.2f},  # its first job less a warm extraction, median over the rounds")
    print(f"    extraction_job_s={warm_extraction:.2f},  # a warm extraction job, median (work included)")
    print(f"    metrics_job_s={statistics.median(cpu for cpu, _ in warm_jobs['metrics']):.2f},  # a warm metrics job")


if __name__ == "__main__":
    main()
