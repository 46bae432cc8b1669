"""What the cost model (`shape_of_learning.cost.device_time`) knows of a machine: the project's own measurements, one
`Calibration` per machine, named by the config's `cost.calibration`.

Each holds what was measured, not rates fitted to it; the rates the model uses are derived here, so that every number
traces back to a command of docs/benchmarks.md or docs/cost.md:

- the forward pass: tokens/s of the bare forward pass of one model shape, by dtype (`benchmarks/extract_speed.py`),
  which gives the FLOP rate, counting 2 FLOPs per forward parameter and token (`forward_parameters`: those each
  token is multiplied through, embedding tables left out);
- shard writes: bytes of hidden states written per second, measured directly (`benchmarks/cost_calibration.py`), or
  from an extraction's tokens/s against the bare pass's, side by side: the time it adds per token is the writes'
  (`write_rate`);
- loading: bytes of weight files per second, read, converted to the forward dtype and put on the device;
- start-up: seconds of a worker process before its first job (interpreter, imports, the device's initialisation), and
  of each job in a warm worker beyond its work (its config, tokenizer, inputs and outputs): the extraction and metrics
  jobs run in workers (`shape_of_learning.worker`, `benchmarks/checkpoint_overhead.py`);
- metrics: seconds for one batch of 4,096 vectors with every metric, at a few widths (`benchmarks/metrics_speed.py`).
"""

from dataclasses import dataclass

METRICS_BATCH = 4096  # the batch size of `Calibration.metrics_batch_s`


@dataclass(frozen=True)
class Calibration:
    device: str  # what one device of the wall time is: "GPU", or "core" (one single-threaded job at a time)
    measured: str  # the machine and the commands that measured it (printed by the dry run)
    forward_parameters: int  # of the model shape whose passes were timed
    bare_tokens_per_s: dict[str, float]  # dtype: tokens/s of that shape's bare forward pass
    write_bytes_per_s: float  # hidden states written to Parquet shards (float16)
    load_bytes_per_s: float  # weight files read, converted to the forward dtype and put on the device
    worker_startup_s: float  # a worker process's start-up before its first job
    extraction_job_s: float  # an extraction job in a warm worker, beyond its loading, forward pass and writes
    metrics_job_s: float  # a metrics job in a warm worker, beyond its layers' batches
    metrics_batch_s: dict[int, float]  # width: seconds for one batch of METRICS_BATCH vectors, every metric
    auto_dtype: str = "float32"  # what extraction.dtype auto runs on this device (bfloat16 on CUDA)

    def flops(self, dtype: str) -> float:
        """FLOP/s of the forward pass in `dtype`: 2 x forward parameters per token, at the bare pass's tokens/s (a
        dtype not measured runs at the rate of a measured one: float16 as bfloat16, else float32's)."""
        measured = self.bare_tokens_per_s
        if dtype not in measured:
            dtype = next((name for name in measured if name != "float32"), "float32") if dtype != "float32" else dtype
        return 2 * self.forward_parameters * measured[dtype]

    def metrics_layer_s(self, width: int, batch_size: int, batches: int) -> float:
        """Seconds for one layer's metrics: `batches` batches of `batch_size` vectors of `width`. Per batch, the
        least-squares line through the measured widths (the kNN's distance product grows with the width, its top-k
        does not), scaled by (batch_size / 4096)^2: distances between every pair of the batch."""
        widths, seconds = list(self.metrics_batch_s), list(self.metrics_batch_s.values())
        mean_w, mean_s = sum(widths) / len(widths), sum(seconds) / len(seconds)
        slope = sum((w - mean_w) * (s - mean_s) for w, s in zip(widths, seconds)) / sum(
            (w - mean_w) ** 2 for w in widths
        )
        per_batch = max(mean_s + slope * (width - mean_w), min(seconds))
        return batches * per_batch * (batch_size / METRICS_BATCH) ** 2


def write_rate(state_bytes: int, *measured: tuple[float, float]) -> float:
    """Bytes of hidden states written per second, from (bare pass, extraction) tokens/s measured side by side on a
    model shape storing `state_bytes` a token: per token, the seconds the extraction adds are its writes'. The mean
    over the pairs given (one per dtype)."""
    rates = [state_bytes / (1 / extract - 1 / bare) for bare, extract in measured]
    return sum(rates) / len(rates)


# docs/cost.md, "Calibration": benchmarks/cost_calibration.py and benchmarks/checkpoint_overhead.py on a 2-core CPU
# machine, one thread per job, CPU time
CPU = Calibration(
    device="core",
    measured="a 2-core x86_64 machine without GPU, one thread per job, one job at a time, CPU time "
    "(benchmarks/cost_calibration.py --repeats 3 --tokens 8192; benchmarks/checkpoint_overhead.py)",
    forward_parameters=18_915_328,  # Pythia-70M's shape: 6 blocks of width 512
    bare_tokens_per_s={"float32": 1631},
    write_bytes_per_s=4.171e8,
    load_bytes_per_s=1.550e9,
    worker_startup_s=4.38,
    extraction_job_s=0.30,  # the demo's checkpoints, their work included (checkpoint_overhead.py)
    metrics_job_s=0.10,
    metrics_batch_s={128: 0.3204, 384: 0.4749, 768: 0.8043},
)

# docs/benchmarks.md, "On a GPU": extract_speed.py --model pythia-410m --tokens 131072 --batch-size 32
# --max-length 1024; metrics_speed.py --dims 768 2560 4096 --device cuda; the demo DAG on CUDA (cuda_suite.sh), 16
# jobs at once, each in a fresh process: extractions of 14 s whose work is a few hundredths of a second, the start-up
# of a process that initialises CUDA, taken for a worker's
H200 = Calibration(
    device="GPU",
    auto_dtype="bfloat16",
    measured="one H200 with 16 CPU cores, torch 2.11 + CUDA 13 (benchmarks/cuda_suite.sh, docs/benchmarks.md): a "
    "worker's start-up that of a fresh extraction process there, 16 at once; weight loading and a warm worker's jobs: "
    "the cpu calibration's, not measured on a GPU",
    forward_parameters=302_311_424,  # Pythia-410M's shape: 24 blocks of width 1024, 25 states stored as float16
    bare_tokens_per_s={"bfloat16": 196_642, "float32": 59_377},
    write_bytes_per_s=write_rate(25 * 1024 * 2, (196_642, 22_440), (59_377, 18_526)),
    load_bytes_per_s=CPU.load_bytes_per_s,
    worker_startup_s=14.0,
    extraction_job_s=CPU.extraction_job_s,
    metrics_job_s=CPU.metrics_job_s,
    metrics_batch_s={768: 0.049, 2560: 0.094, 4096: 0.172},
)

CALIBRATIONS = {"h200": H200, "cpu": CPU}
