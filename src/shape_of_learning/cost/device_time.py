"""What a config's run costs before it starts: per model and in total, the download, the device time of its
extraction and metrics jobs term by term, the device-hours on one device and the wall time on N (`cost.gpus`). The
dry run prices the extractions it plans: those of the targets asked for, less what is done (`report`).

    python -m shape_of_learning cost config.yaml [--gpus 8]        # per model, offline
    snakemake -n                                                     # the same totals, with the per-model table

Per extraction job (one per checkpoint, one per random-init baseline), with the sizes `disk.volumes` knows (locks,
the HF cache, local directories, the model facts) and the machine's `calibration`:

    downloading  weight bytes / cost.download_mb_per_s       (a download job of its own on the submit host, beside
                                                              the device's work: not device time; weights already in
                                                              the HF cache: none)
    loading      weight bytes / load_bytes_per_s              (a baseline's random weights: nothing read)
    forward      tokens x 2 x forward parameters / FLOP/s of the forward dtype
    writes       tokens x (layers + 1) x hidden size x bytes of store_dtype / write_bytes_per_s
    start-up     extraction_job_s, and its share of a worker's start-up (below)

and per metrics job (`metrics.layers_per_job` layers of one checkpoint): `metrics_layer_s` for each of its layers, then
`metrics_job_s`. The jobs run in worker processes (shape_of_learning.worker), each of which pays `worker_startup_s`
once: on a workstation once per JOBS_PER_WORKER jobs, on a cluster once per checkpoint (its group job's worker serves
its extraction and metrics). tokens = metrics.batches x metrics.batch_size: what the pass keeps, taken for what it
forwards. The device time of a model is the sum of its jobs' (one job at a time per device, as the workstation profile
runs its `gpu=1` jobs). The wall time on N devices is simulated (`wall_time`): each checkpoint's extraction and metrics
hold one device together, once its download, over the one link and in its lane, is done. On a cluster (a dry run through
a cluster profile, or `cost --cluster`) each checkpoint's group job is one submission, startable `cost.submission_s`
after its download (the scheduler's cycle, the status polls): a wait in the wall time, not in the device-hours. On a
workstation its metrics hold no `gpu` and may run beside another extraction, which the simulation leaves out
(docs/cost.md). Not modelled: the pins, trainings, fine-tunings and Rajaee & Pilehvar analyses (a few dozen jobs,
minutes), the checkpoint's loss (+2% of a decoder's pass; an encoder's masked-LM pass, up to a fifth of its extraction:
docs/benchmarks.md), the tables and figures. A term whose size is unknown (a model in none of the sources above, one the
pipeline trains before it is trained) counts as unknown, its totals lower bounds ("≥"). Measured against the demo in
docs/cost.md."""

from dataclasses import dataclass, field

import numpy as np

from shape_of_learning.cost import model_sizes, wall_time
from shape_of_learning.cost.calibration import CALIBRATIONS, Calibration
from shape_of_learning.cost.disk import Bytes, ModelVolume, human, shard_bytes
from shape_of_learning.cost.model_sizes import ModelSize
from shape_of_learning.experiment.plan import Experiment, layers_in_group
from shape_of_learning.worker import JOBS_PER_WORKER

TERMS = ("downloading", "loading", "forward", "writes", "metrics", "start-up")
DEVICE_TERMS = TERMS[1:]  # downloading runs in jobs of its own, beside the device's work
ACTIVATION_STATES = 4  # beside the kept hidden states, a block's working set: its MLP's 4 x width intermediate
# An extraction process beside its model and hidden states: Python, torch, transformers, the tokenizer, the windows,
# the CUDA runtime's host side. On the CPU the demo's extractions peak below 1 GB in all (docs/benchmarks.md); the
# CUDA runtime's share was not measured (no GPU lent), hence the margin: profiles/slurm's default job memory.
HOST_BASE_BYTES = 4 * 10**9
# Loading a model peaks at 1.07-1.16x its parameters' bytes in the forward dtype beyond those (buffers, loading's own
# copies; anonymous memory, benchmarks/host_memory.py on Pythia-410M's shape, docs/cost.md): rounded up.
HOST_WEIGHTS_FACTOR = 1.2


class Seconds(Bytes):
    """A sum of known seconds, and how many of its terms are unknown (then `known` is a lower bound)."""

    def __str__(self) -> str:
        if self.unknown and not self.known:
            return "unknown"
        return f"{'≥ ' if self.unknown else ''}{duration(self.known)}"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def seconds(value: float | None) -> Seconds:
    return Seconds(0, 1) if value is None else Seconds(value)


@dataclass
class ModelCost:
    model: str
    extractions: int  # checkpoints, random-init baseline included
    metrics_jobs: int
    download: Bytes
    terms: dict[str, Seconds]
    gpu_memory: int | None  # bytes the extraction needs on its device (`gpu_memory`)

    @property
    def total(self) -> Seconds:
        """Its device time: every term but the download's."""
        return sum((self.terms[term] for term in DEVICE_TERMS), Seconds())


@dataclass
class Cost:
    models: list[ModelCost]
    calibration: Calibration
    devices: int
    download_bytes_per_s: float
    jobs: list[wall_time.Job]  # every checkpoint's, in `wall_time.precedence`
    gates: dict[wall_time.Key, wall_time.Key]  # a download -> the checkpoint whose job it waits for
    submission_s: float = 0.0  # a cluster's wait before each submitted job; none on a workstation
    terms: dict[str, Seconds] = field(init=False)

    def __post_init__(self):
        self.terms = {term: sum((m.terms[term] for m in self.models), Seconds()) for term in TERMS}

    @property
    def total(self) -> Seconds:
        """The device time: every term but the download's."""
        return sum((self.terms[term] for term in DEVICE_TERMS), Seconds())

    @property
    def submissions(self) -> int:
        """The jobs a cluster schedules: one group job per checkpoint (its extraction and its metrics)."""
        return sum(m.extractions for m in self.models)

    def wall(self, devices: int) -> Seconds:
        """The run's wall time on `devices` devices: its downloads, lanes, submissions and jobs simulated
        (`wall_time.simulate`), unknown terms counting nothing."""
        unknown = self.total.unknown + self.terms["downloading"].unknown
        return Seconds(wall_time.simulate(self.jobs, self.gates, devices, self.submission_s), unknown)


def forward_dtype(entry: dict, extraction: dict, calibration: Calibration) -> str:
    """The dtype a model's pass runs in: its entry's, else extraction.dtype, `auto` as the calibration's device runs
    it (bfloat16 on CUDA, float32 on CPU)."""
    dtype = entry["dtype"] or extraction["dtype"]
    return calibration.auto_dtype if dtype == "auto" else dtype


def dtype_bytes(dtype: str) -> int:
    """Bytes of one value of a forward dtype (numpy has no bfloat16: float16's width)."""
    return np.dtype(dtype if dtype != "bfloat16" else "float16").itemsize


def gpu_memory(parameters: int, hidden_size: int, entry: dict, dtype: str) -> int:
    """Bytes an extraction needs on its device: every parameter in the forward dtype, and one batch's activations:
    the hidden states it keeps (layers + 1, `output_hidden_states`) and a block's working set, each batch_size x
    max_length tokens x hidden size in that dtype. A model larger than 80% of the free memory is spread over GPU and
    CPU instead (`extraction.loading.load_model`)."""
    tokens = entry["batch_size"] * entry["max_length"]
    return dtype_bytes(dtype) * (parameters + tokens * hidden_size * (entry["layers"] + 1 + ACTIVATION_STATES))


def host_memory(size: ModelSize | None, entry: dict, dtype: str, tokens: int, store_dtype: str) -> int:
    """Bytes an extraction holds in the host's memory at most: its model, built there in the forward dtype before it
    moves to its device (transformers materialises the weights on the CPU, HOST_WEIGHTS_FACTOR x their bytes at the
    peak; the weight files themselves are memory-mapped, page cache the kernel reclaims); the checkpoint's hidden
    states waiting in pinned buffers for their writes (`extraction.writer`), at most all of its shards; and the process
    itself, HOST_BASE_BYTES. A model of unknown size (one the pipeline has yet to train) counts the process alone."""
    if size is None:
        return HOST_BASE_BYTES
    weights = HOST_WEIGHTS_FACTOR * size.parameters * dtype_bytes(dtype)
    return HOST_BASE_BYTES + int(weights) + shard_bytes(tokens, entry["layers"], size.hidden_size or 0, store_dtype)


# A checkpoint's shards on its node's scratch (SLURM's --tmp): their predicted bytes with room for the files' own
# overhead; a model whose size nothing knows (one the pipeline trains) gets the default, a base model's with room.
SCRATCH_MARGIN = 1.25
SCRATCH_DEFAULT_MB = 4000


def scratch_mb(model: str, experiment: Experiment, config: dict) -> int:
    """What a checkpoint's group job of `model` requests of its node's local disk, in MB: its shards, every layer's
    hidden states in `extraction.store_dtype` (`disk.shard_bytes`), SCRATCH_MARGIN times over, at least
    SCRATCH_DEFAULT_MB; SCRATCH_DEFAULT_MB where the model's width is unknown."""
    size = model_sizes.of(model, experiment.models, experiment.checkpoints)
    if size is None or size.hidden_size is None:
        return SCRATCH_DEFAULT_MB
    layers, store_dtype = experiment.models[model]["layers"], config["extraction"]["store_dtype"]
    shards = shard_bytes(experiment.tokens_per_layer, layers, size.hidden_size, store_dtype)
    return max(SCRATCH_DEFAULT_MB, -(-int(SCRATCH_MARGIN * shards) // 10**6))


def extraction_mem_mb(model: str, experiment: Experiment, config: dict) -> int:
    """What an extraction job of `model` requests of its node's memory (the rule's `mem_mb`, SLURM's --mem):
    `host_memory` in MB, the forward dtype as `cost.calibration`'s device runs it."""
    entry, extraction = experiment.models[model], config["extraction"]
    dtype = forward_dtype(entry, extraction, CALIBRATIONS[config["cost"]["calibration"]])
    size = model_sizes.of(model, experiment.models, experiment.checkpoints)
    return -(-host_memory(size, entry, dtype, experiment.tokens_per_layer, extraction["store_dtype"]) // 10**6)


def large_gpu_constraint(model: str, experiment: Experiment, config: dict) -> str | None:
    """The GPU type `model`'s extraction asks a cluster for (SLURM's -C): config large_gpu.constraint where its
    `gpu_memory` exceeds large_gpu.gb, else none (also where its size is unknown, or no constraint is configured)."""
    entry, large = experiment.models[model], config["large_gpu"]
    dtype = forward_dtype(entry, config["extraction"], CALIBRATIONS[config["cost"]["calibration"]])
    size = model_sizes.of(model, experiment.models, experiment.checkpoints)
    if "constraint" not in large or size is None or size.hidden_size is None:
        return None
    needed = gpu_memory(size.parameters, size.hidden_size, entry, dtype)
    return large["constraint"] if needed > large["gb"] * 1e9 else None


# A cluster job's time limit (SLURM's --time): the predicted time this many times over, for a slower node than the
# calibration's and a loaded filesystem. An extraction never asks for less than the floor, which also stands for any
# job of a model whose size nothing knows: its checkpoint's group job asks for the sum of its jobs' limits, so the floor
# is paid once a checkpoint, not once for each of its metrics jobs too.
RUNTIME_MARGIN = 3
RUNTIME_FLOOR_MIN = 15


def runtime_min(model: str, experiment: Experiment, config: dict, job: str) -> int:
    """What one of a checkpoint's jobs requests of time on a cluster, in minutes (the rule's `device_time`): `job`
    "extraction" (loading, the forward pass, the writes; its download runs before it, in a job of its own) or "metrics"
    (one metrics job), predicted on `cost.calibration`'s machine from the model's size in the committed table or its
    local folder, RUNTIME_MARGIN times over: an extraction at least RUNTIME_FLOOR_MIN, a metrics job at least a
    minute."""
    entry, extraction, metrics = experiment.models[model], config["extraction"], config["metrics"]
    calibration = CALIBRATIONS[config["cost"]["calibration"]]
    size = model_sizes.of(model, experiment.models, experiment.checkpoints)
    if size is None or size.hidden_size is None:
        return RUNTIME_FLOOR_MIN
    tokens = experiment.tokens_per_layer
    if job == "extraction":
        dtype = forward_dtype(entry, extraction, calibration)
        seconds = (
            size.weight_bytes / calibration.load_bytes_per_s
            + tokens * 2 * size.forward_parameters / calibration.flops(dtype)
            + shard_bytes(tokens, entry["layers"], size.hidden_size, extraction["store_dtype"])
            / calibration.write_bytes_per_s
            + calibration.worker_startup_s  # a group job's worker starts with its extraction
            + calibration.extraction_job_s
        )
    else:
        layers = max(len(layers_in_group(group)) for group in experiment.layer_groups(model))
        seconds = (
            layers * calibration.metrics_layer_s(size.hidden_size, metrics["batch_size"], metrics["batches"])
            + calibration.metrics_job_s
        )
    return max(RUNTIME_FLOOR_MIN if job == "extraction" else 1, -(-RUNTIME_MARGIN * int(seconds) // 60))


def checkpoint_startup(calibration: Calibration, metrics_jobs: int, cluster: bool) -> float:
    """A checkpoint's start-up: its extraction's and `metrics_jobs` metrics jobs' fixed costs in a warm worker, and
    their share of a worker's start-up: on a workstation one JOBS_PER_WORKER-th a job, on a `cluster` a whole one
    (each checkpoint's group job starts its own)."""
    workers = 1 if cluster else (1 + metrics_jobs) / JOBS_PER_WORKER
    fixed = calibration.extraction_job_s + metrics_jobs * calibration.metrics_job_s
    return fixed + workers * calibration.worker_startup_s


def estimate(
    experiment: Experiment, found: list[ModelVolume], config: dict, devices: int | None = None, cluster: bool = False
) -> Cost:
    """The cost of the planned `experiment` with the sizes `found` (`disk.volumes` of its checkpoints), calibrated by
    config["cost"]["calibration"], on config["cost"]["gpus"] devices unless `devices` is given; on a `cluster`, each
    checkpoint's job after config["cost"]["submission_s"]."""
    settings, extraction, metrics = config["cost"], config["extraction"], config["metrics"]
    calibration = CALIBRATIONS[settings["calibration"]]
    download_rate = settings["download_mb_per_s"] * 1e6
    tokens = experiment.tokens_per_layer
    costs, jobs = [], {}
    for volume in found:
        model, entry = volume.model, experiment.models[volume.model]
        dtype = forward_dtype(entry, extraction, calibration)
        baseline = model in experiment.baselines
        extractions, groups = len(volume.downloads) + baseline, experiment.layer_groups(model)
        states = entry["layers"] + 1
        size, width = volume.size, volume.hidden_size
        forward = tokens * 2 * size.forward_parameters / calibration.flops(dtype) if size else None
        writes = volume.shard_bytes / calibration.write_bytes_per_s if volume.shard_bytes else None
        layer = calibration.metrics_layer_s(width, metrics["batch_size"], metrics["batches"]) if width else None
        startup = checkpoint_startup(calibration, len(groups), cluster)
        per_checkpoint = [  # (downloading, loading): weights already in the HF cache download nothing
            (
                0.0 if cached else d / download_rate if d is not None else None,
                w / calibration.load_bytes_per_s if w is not None else None,
            )
            for d, w, cached in zip(volume.downloads, volume.weights, volume.cached)
        ] + [(0.0, 0.0)] * baseline
        terms = {
            "downloading": sum((seconds(d) for d, _ in per_checkpoint), Seconds()),
            "loading": sum((seconds(w) for _, w in per_checkpoint), Seconds()),
            "forward": _times(forward, extractions),
            "writes": _times(writes, extractions),
            "metrics": _times(layer and layer * states, extractions),
            "start-up": Seconds(extractions * startup),
        }
        per_extraction = sum(filter(None, (forward, writes, layer and layer * states)), startup)
        names = volume.checkpoints + ([experiment.baselines[model].name] if baseline else [])
        for name, (download, loading) in zip(names, per_checkpoint):
            # unknown terms count nothing here, as in the totals' known part
            jobs[model, name] = wall_time.Job((model, name), download or 0.0, (loading or 0.0) + per_extraction)
        memory = gpu_memory(size.parameters, width, entry, dtype) if size and width else None
        costs.append(ModelCost(model, extractions, extractions * len(groups), volume.download, terms, memory))
    lanes = [[(ckpt.model, ckpt.name) for ckpt in lane] for lane in experiment.download_lanes()]
    # common.smk's GATES in a run that has measured none of the planned checkpoints
    waits_for = experiment.download_gates(lambda ckpt: True) if extraction["evict_weights"] else {}
    gates = {key: (gate.model, gate.name) for key, gate in waits_for.items()}
    submission_s = settings["submission_s"] if cluster else 0.0
    return Cost(
        costs,
        calibration,
        devices or settings["gpus"],
        download_rate,
        wall_time.precedence(lanes, jobs),
        gates,
        submission_s,
    )


def _times(value: float | None, count: int) -> Seconds:
    return Seconds(0, count) if value is None else Seconds(value * count)


def table(cost: Cost) -> str:
    """One row per model: its jobs, download, each term, device-hours and the GPU memory of its extraction."""
    rows = [("model", "extractions", "metrics jobs", "download", *TERMS, "device time", "GPU memory")]
    for m in cost.models:
        rows.append(
            (
                m.model,
                str(m.extractions),
                str(m.metrics_jobs),
                str(m.download),
                *(str(m.terms[term]) for term in TERMS),
                str(m.total),
                human(m.gpu_memory) if m.gpu_memory else "?",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        for row in rows
    )


def summary(cost: Cost, config: dict) -> str:
    """The totals, for the dry run: download, each term, device-hours on one device, wall time on cost.gpus."""
    c, device = cost.calibration, cost.calibration.device
    extractions = sum(m.extractions for m in cost.models)
    metrics_jobs = sum(m.metrics_jobs for m in cost.models)
    download = sum((m.download for m in cost.models), Bytes())
    total, plural = cost.total, "s" if cost.devices > 1 else ""
    share = f" ({cost.terms['start-up'].known / total.known:.0%} of the {device} time)" if total.known else ""
    lines = [
        f"Cost of {extractions} extractions and {metrics_jobs} metrics jobs (calibration "
        f"{config['cost']['calibration']}: {c.measured}; per model: python -m shape_of_learning cost CONFIG):",
        f"  download: {download}, {cost.terms['downloading']} at {cost.download_bytes_per_s / 1e6:g} MB/s "
        "(cost.download_mb_per_s), by download jobs beside the device's work",
        f"  {device} time: " + ", ".join(f"{term}: {cost.terms[term]}" for term in DEVICE_TERMS) + share,
        f"  {device}-hours on one {device}: {_hours(total)}; wall time on {cost.devices} {device}{plural} "
        f"(cost.gpus, or --gpus N): {cost.wall(cost.devices)}",
    ]
    if cost.submission_s:
        lines.insert(
            -1,
            f"  on a cluster: {cost.submissions} submissions, each {duration(cost.submission_s)} before its job starts "
            "(cost.submission_s), in the wall time",
        )
    if total.unknown:
        lines.append(
            f"  ({total.unknown} terms unknown: models in no lock, HF cache, local folder or model facts, or "
            "trained by the pipeline and not yet trained)"
        )
    return "\n".join(lines)


def _hours(value: Seconds) -> str:
    return f"{'≥ ' if value.unknown else ''}{value.known / 3600:.1f} h"
