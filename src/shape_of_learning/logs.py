"""What every Snakemake rule script shares: logging to the rule's `log:` file, thread limits, and where a job writes."""

import atexit
import contextlib
import functools
import gc
import logging
import os
import re
import sys
import time
from pathlib import Path

FAILED = "job failed: "  # begins the last line of a failed job's log; `failure_message` reads what follows
_TAIL_BYTES = 1 << 16  # of a log read by `failure_message`: its last line, whatever the progress bars above it
# Test switches, for the cluster test to show that a retry, or a rerun of the same command, completes a run
# (tests/slurm/run_demo_on_local_slurm.sh): the jobs they name, "rule:wildcard values/in/order" separated by commas
# ("measure_layers:demo-pythia/step20/2-3"), fail, or wait until they are killed, on their first attempt (the first
# that finds no mark beside the job's log).
FAIL_FIRST_ATTEMPT_VARIABLE = "SHAPE_OF_LEARNING_FAIL_FIRST_ATTEMPT"
STALL_FIRST_ATTEMPT_VARIABLE = "SHAPE_OF_LEARNING_STALL_FIRST_ATTEMPT"


@contextlib.contextmanager
def job_logging(snakemake):
    """Send logging and progress bars (stderr) to the job's log file; on failure, show one line on the console.

    Progress bars and the traceback land in `logs/...`, which then ends with ``job failed: <the error on one line>``
    (`failure_message`). The console gets ``Error in rule <rule>: <the error>`` and the log's path, so a user sees
    what went wrong and how to fix it without opening the log; the script then exits with status 1 instead of
    raising, so Python prints no second traceback beside Snakemake's own report.
    The job's libraries use its `threads` at most (torch's, and the BLAS and OpenMP pools of numpy and scipy:
    threadpoolctl), as Snakemake's variables limit a script's; in a worker (shape_of_learning.worker) they follow
    each job's: those its code has loaded before. The process's exit skips its last garbage collection (`gc.freeze`),
    seconds of a torch process's.
    """
    from threadpoolctl import threadpool_limits  # here: importing it loads the BLAS libraries, for this job only

    _freeze_at_exit()
    console = sys.stderr
    with open(snakemake.log[0], "w", buffering=1) as log, threadpool_limits(max(1, snakemake.threads)):
        sys.stderr = log
        logging.basicConfig(
            level=logging.INFO, stream=log, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        try:
            torch = sys.modules.get("torch")  # only where the job's code uses it: importing it costs ~1.5 s
            if torch is not None:
                torch.set_num_threads(max(1, snakemake.threads))
            _first_attempt_switches(snakemake)
            yield
        except Exception as error:
            message = " ".join(str(error).split()) or type(error).__name__
            logging.getLogger("shape_of_learning").exception("job failed")
            log.write(f"{FAILED}{message}\n")
            print(f"Error in rule {snakemake.rule}: {message}\n(log: {snakemake.log[0]})", file=console)
            raise SystemExit(1) from None
        finally:
            sys.stderr = console


@functools.cache
def _freeze_at_exit() -> None:
    """At this process's exit, nothing left to collect: what is alive then dies with the process anyway."""
    atexit.register(gc.freeze)


def _first_attempt_switches(snakemake) -> None:
    """Fail, or wait to be killed, where a test switch names this job and its mark is not there yet (the switches'
    comment above): the mark sits beside the log, on the shared filesystem, where a retry on any node sees it."""
    job = f"{snakemake.rule}:{'/'.join(value for _, value in snakemake.wildcards.items())}"
    for variable, action in ((FAIL_FIRST_ATTEMPT_VARIABLE, "failed"), (STALL_FIRST_ATTEMPT_VARIABLE, "stalled")):
        mark = Path(snakemake.log[0]).with_suffix(f".{action}-once")
        if job in os.environ.get(variable, "").split(",") and not mark.exists():
            mark.touch()
            message = f"{job}: {action} on its first attempt, as {variable} asks (a test switch)"
            if action == "failed":
                raise RuntimeError(message)
            logging.getLogger("shape_of_learning").warning(message)
            while True:
                time.sleep(60)


def failure_message(log_path) -> str | None:
    """The error a failed job's log ends with (``job failed: <message>``, written by `job_logging`); None where the
    log does not end with one (the job succeeded, or failed outside Python) or does not exist."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _TAIL_BYTES))
            tail = log.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    last = tail.rstrip("\n").rpartition("\n")[2]
    return last.removeprefix(FAILED) if last.startswith(FAILED) else None


def filesystem(path, mounts: str = "/proc/mounts") -> str:
    """The filesystem `path` lies on (its nearest existing folder), for a log: "tmpfs at /scratch, 12.3 GB free".
    A cluster job logs where it writes its temporary files, so that a run shows they stayed on the node's own disk
    (docs/cluster.md). The type is that of the longest mount point above the path in `mounts` (Linux's table);
    "unknown" where there is none."""
    folder = Path(path).resolve()
    while not folder.exists():
        folder = folder.parent
    best, kind = Path("/"), "unknown"
    try:
        table = Path(mounts).read_text().splitlines()
    except OSError:
        table = []
    for line in table:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(re.sub(r"\\([0-7]{3})", lambda code: chr(int(code[1], 8)), fields[1]))  # a space is \040
        if folder.is_relative_to(point) and len(point.parts) >= len(best.parts):
            best, kind = point, fields[2]
    free = os.statvfs(folder)
    return f"{kind} at {best}, {free.f_bavail * free.f_frsize / 1e9:.1f} GB free"
