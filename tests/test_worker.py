"""The worker processes that run a checkpoint's extraction and metrics jobs (shape_of_learning.worker): one process
serves job after job, each job in its own log and thread limits; a failed job fails alone, a worker that dies fails
its job alone and the next job gets a new one; a worker dies with the process it serves."""

import concurrent.futures
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake.iocontainers import Wildcards

from shape_of_learning import worker
from shape_of_learning.worker import Job, JobFailed

# Job functions a worker imports by name, as it imports shape_of_learning.extraction.job's
JOBS = """
import os
from pathlib import Path

import torch  # at the top, as a job's module imports what it uses: before the job's thread limits are set
from threadpoolctl import threadpool_info

def write_pid(job):
    blas = {pool["num_threads"] for pool in threadpool_info()}
    Path(job.output[0]).write_text(f"{os.getpid()} {torch.get_num_threads()} {sorted(blas)}")

def write_pid_slowly(job):
    import time
    time.sleep(10)  # while the other worker starts and dies
    write_pid(job)

def fail(job):
    raise ValueError("the model has 6 blocks\\nbut its entry says 5")

def die(job):
    os._exit(9)

def hold_in_a_cycle(job):
    import gc
    gc.disable()  # nothing but the worker's own collection after the job frees the cycle
    class Held:
        def __del__(self):
            Path(job.output[0]).write_text("released")
    held = Held()
    held.itself = held

def stall(job):
    Path(job.output[0]).write_text(str(os.getpid()))
    import time
    time.sleep(600)
"""


@pytest.fixture
def jobs_module(tmp_path, monkeypatch):
    """A module of job functions on sys.path (a spawned worker gets its parent's), and a fresh pool for each test."""
    (tmp_path / "worker_jobs.py").write_text(JOBS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(worker, "_idle", None)
    yield tmp_path
    for pool in worker._idle.queue if worker._idle else ():
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def job_of(folder: Path, name: str, threads: int = 1) -> Job:
    (folder / "logs").mkdir(exist_ok=True)
    return Job(
        rule="extract_hidden_states",
        input=[],
        output=[str(folder / f"{name}.out")],
        params=SimpleNamespace(),
        wildcards=Wildcards(fromdict={"model": "demo-pythia", "checkpoint": name}),
        threads=threads,
        log=[str(folder / "logs" / f"{name}.log")],
        config={},
    )


def run(folder: Path, function: str, name: str, threads: int = 1) -> str:
    worker.run(f"worker_jobs:{function}", job_of(folder, name, threads), workers=1)
    return (folder / f"{name}.out").read_text()


@pytest.mark.slow  # each spawns a worker that imports torch
def test_one_worker_serves_job_after_job_each_within_its_own_threads(jobs_module):
    first, second, third = (
        run(jobs_module, "write_pid", name, threads) for name, threads in [("a", 1), ("b", 2), ("c", 1)]
    )
    pids = {line.split()[0] for line in (first, second, third)}
    assert len(pids) == 1 and pids != {str(os.getpid())}  # one process, not this one
    assert first.split(maxsplit=1)[1] == "1 [1]" and second.split(maxsplit=1)[1] == "2 [2]"
    assert third.split(maxsplit=1)[1] == "1 [1]"
    last = (jobs_module / "logs" / "c.log").read_text().splitlines()[-1]
    assert f"worker {pids.pop()} (job 3 of at most {worker.JOBS_PER_WORKER}" in last


@pytest.mark.slow
def test_a_failed_job_fails_alone_naming_its_error_and_log_and_the_worker_serves_the_next(jobs_module, capsys):
    before = run(jobs_module, "write_pid", "a")
    with pytest.raises(JobFailed) as failed:
        run(jobs_module, "fail", "b")
    log = jobs_module / "logs" / "b.log"
    assert str(failed.value) == f"the model has 6 blocks but its entry says 5 (log: {log})"
    assert log.read_text().splitlines()[-1] == "job failed: the model has 6 blocks but its entry says 5"
    assert run(jobs_module, "write_pid", "c").split()[0] == before.split()[0]


@pytest.mark.slow
def test_what_a_job_held_in_reference_cycles_is_released_when_it_ends(jobs_module):
    """The worker collects after each job: a job's cycles (a model's hooks, a traceback) hold tensors, whose GPU memory
    torch then gives back (`torch.cuda.empty_cache`), for the next job in another worker."""
    assert run(jobs_module, "hold_in_a_cycle", "a") == "released"


@pytest.mark.slow
def test_a_job_whose_worker_dies_fails_alone_and_the_next_job_gets_a_new_worker(jobs_module):
    before = run(jobs_module, "write_pid", "a")
    with pytest.raises(JobFailed, match=r"the worker process running extract_hidden_states for demo-pythia/b died"):
        run(jobs_module, "die", "b")
    after = run(jobs_module, "write_pid", "c")
    assert after.split()[0] != before.split()[0]


@pytest.mark.slow
def test_a_worker_that_dies_fails_its_job_alone_while_another_worker_finishes_its_own(jobs_module):
    """Two jobs at once in two workers: one worker dies mid-job; the other's job completes (a pool of several
    processes would fail every job it runs when one of them dies)."""
    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        slow = threads.submit(worker.run, "worker_jobs:write_pid_slowly", job_of(jobs_module, "a"), 2)
        time.sleep(0.5)
        dying = threads.submit(worker.run, "worker_jobs:die", job_of(jobs_module, "b"), 2)
        with pytest.raises(JobFailed, match="died"):
            dying.result()
        slow.result()
    assert (jobs_module / "a.out").exists()


@pytest.mark.slow
def test_a_worker_exits_with_the_process_it_serves(tmp_path):
    """The Snakemake process killed outright (SIGKILL: no clean-up of its own) while its worker runs a job: the worker
    is gone within seconds, not left running a job nobody waits for."""
    (tmp_path / "worker_jobs.py").write_text(JOBS)
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {str(tmp_path)!r})
                from pathlib import Path
                from test_worker import job_of
                from shape_of_learning import worker
                worker.run("worker_jobs:stall", job_of(Path({str(tmp_path)!r}), "a"), workers=1)
            """),
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])},
    )
    out = tmp_path / "a.out"
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:  # created, then written
        time.sleep(0.2)
    pid = int(out.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10 * worker.PARENT_POLL_S
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pid)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited: only its parent's wait is missing


@pytest.mark.parametrize("hidden", ["", "-1"])
def test_cuda_visible_devices_can_hide_every_gpu(monkeypatch, hidden):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
    assert not worker.visible_gpus()
