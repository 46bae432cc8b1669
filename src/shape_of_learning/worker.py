"""The processes that run a checkpoint's extraction and metrics jobs: each is still its own Snakemake job (its outputs,
log, benchmark line, retry and resume), but its Python code runs in a long-lived worker process instead of a new
interpreter. A fresh interpreter pays torch's and transformers' imports and the device's initialisation before any
work (on a GPU, more than the work of a small checkpoint: docs/cost.md), once per job; a worker pays them once.

The workers belong to the Snakemake process that schedules the jobs: a rule's `run:` block, which Snakemake executes
in one of its threads (`common.smk` makes it use threads wherever it runs jobs), hands the job to `run` and waits for
it. On a workstation that is the run's one Snakemake process, so a worker serves every checkpoint of the run; on a
cluster it is the Snakemake process of a checkpoint's group job on its node, whose extraction and metrics then share
one worker. A worker dies with that process (`_exit_with_parent`), and a job whose worker died fails alone: the next
job gets a new worker. Each worker exits after JOBS_PER_WORKER jobs, and another takes its place.
"""

import concurrent.futures
import gc
import importlib
import logging
import multiprocessing
import os
import queue
import resource
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shape_of_learning.logs import failure_message, job_logging

# Whatever a long-lived process accumulates (the allocator's fragments, caches of the libraries) lasts at most this
# many jobs; a new worker costs one start-up (docs/cost.md), here once per 64 checkpoint jobs.
JOBS_PER_WORKER = 64
PARENT_POLL_S = 1.0  # how soon a worker notices that the Snakemake process it serves has gone
# The job a worker runs, "rule:wildcard/values", in its environment: what its command line, the same for every job,
# does not tell a tool that looks at the process (`ps e`, the tests' network guard)
JOB_VARIABLE = "SHAPE_OF_LEARNING_JOB"

# This process's workers, each a pool of one process (a process that dies breaks its pool, and only its own), idle
# ones here: the warmest first. None: a worker yet to start.
_idle: queue.LifoQueue | None = None
_idle_lock = threading.Lock()


def visible_gpus() -> bool:
    """Whether this machine shows a job a GPU, without importing torch (a second of the scheduler's time): an NVIDIA
    driver's GPUs (/proc/driver/nvidia/gpus), or AMD's compute device (/dev/kfd), unless CUDA_VISIBLE_DEVICES hides
    them all."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


class JobFailed(Exception):
    """A job that failed in a worker: its log's last line (`logs.failure_message`) and the log's path."""


@dataclass(frozen=True)
class Job:
    """What a job's code reads of it, as a rule script reads Snakemake's `snakemake` object, picklable for a worker."""

    rule: str
    input: Any  # Snakemake's named lists, as in a script
    output: Any
    params: Any
    wildcards: Any
    threads: int
    log: Any
    config: dict


def run(target: str, job: Job, workers: int) -> None:
    """Run `target` ("package.module:function", called with `job`) in an idle worker of this process, of `workers`
    (the jobs Snakemake runs at once), logging to the job's log as a rule script does (`logs.job_logging`). Raises
    JobFailed where the job failed, or its worker died (which fails no other job: each worker is a pool of its own)."""
    idle = _workers(workers)
    worker = idle.get()
    try:
        if worker is None or worker._broken:
            worker = concurrent.futures.ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),  # a forked copy of a threaded scheduler may deadlock
                initializer=_exit_with_parent,
                initargs=(os.getpid(),),
                max_tasks_per_child=JOBS_PER_WORKER,
            )
        worker.submit(_call, target, job).result()
    except BrokenProcessPool:
        raise JobFailed(
            f"the worker process running {job.rule} for {'/'.join(job.wildcards)} died (killed, or out of memory: "
            f"its log {job.log[0]} ends where it stopped); no other job failed with it"
        ) from None
    finally:
        idle.put(worker)


def _workers(workers: int) -> queue.LifoQueue:
    """This process's idle workers, `workers` of them, made on first use."""
    global _idle
    with _idle_lock:
        if _idle is None:
            _idle = queue.LifoQueue()
            for _ in range(max(1, workers)):
                _idle.put(None)
        return _idle


def _exit_with_parent(parent: int) -> None:
    """In a worker: exit as soon as the process that started it is gone (killed outright, its job cancelled), instead
    of finishing a job nobody waits for."""

    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


_jobs_run = 0  # in a worker: the jobs it has run


def _call(target: str, job: Job) -> None:
    """In a worker: `target` on `job`, in the job's logging (`logs.job_logging`), its module imported first, so that
    the job's thread limits reach the libraries it loads. The job's log ends with what the job took of the worker:
    its CPU and wall seconds (Snakemake's benchmark file of a `run:` job measures the Snakemake process, whose
    thread waited for it), the worker's peak memory so far, and how many jobs the worker has run."""
    global _jobs_run
    _jobs_run += 1
    os.environ[JOB_VARIABLE] = f"{job.rule}:{'/'.join(job.wildcards)}"
    started, cpu = time.perf_counter(), time.process_time()
    module, _, function = target.partition(":")
    function = getattr(importlib.import_module(module), function)
    try:
        with job_logging(job):
            function(job)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            logging.getLogger("shape_of_learning").info(
                "%s: %.2f s CPU, %.2f s wall, worker %d (job %d of at most %d, peak memory %.0f MB), imports included",
                job.rule,
                time.process_time() - cpu,
                time.perf_counter() - started,
                os.getpid(),
                _jobs_run,
                JOBS_PER_WORKER,
                peak,
            )
    except SystemExit:  # job_logging's way out of a failed job: its log ends with the error
        raise JobFailed(f"{failure_message(job.log[0])} (log: {job.log[0]})") from None
    finally:
        _release_memory()


def _release_memory() -> None:
    """In a worker, after a job: what the job's objects held goes back, its GPU memory included. torch keeps the
    blocks a job freed cached for its own process: without this, a worker that measured a 13B model would keep its
    gigabytes from the next extraction, in another worker."""
    gc.collect()  # the job's reference cycles (a model's hooks, tracebacks), before their tensors can be released
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
