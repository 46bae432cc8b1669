"""What every Snakemake rule script shares: logging to the rule's `log:` file, thread limits, and where a job writes."""

import contextlib
import logging
import os
import re
import sys
from pathlib import Path

FAILED = "job failed: "  # begins the last line of a failed job's log; `failure_message` reads what follows
_TAIL_BYTES = 1 << 16  # of a log read by `failure_message`: its last line, whatever the progress bars above it


@contextlib.contextmanager
def job_logging(snakemake):
    """Send logging and progress bars (stderr) to the job's log file; on failure, show one line on the console.

    Progress bars and the traceback land in `logs/...`, which then ends with ``job failed: <the error on one line>``
    (`failure_message`). The console gets ``Error in rule <rule>: <the error>`` and the log's path, so a user sees
    what went wrong and how to fix it without opening the log; the script then exits with status 1 instead of
    raising, so Python prints no second traceback beside Snakemake's own report.
    """
    console = sys.stderr
    with open(snakemake.log[0], "w", buffering=1) as log:
        sys.stderr = log
        logging.basicConfig(
            level=logging.INFO, stream=log, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        try:
            torch = sys.modules.get("torch")  # only where the job's code uses it: importing it costs ~1.5 s
            if torch is not None:
                torch.set_num_threads(max(1, snakemake.threads))
            yield
        except Exception as error:
            message = " ".join(str(error).split()) or type(error).__name__
            logging.getLogger("shape_of_learning").exception("job failed")
            log.write(f"{FAILED}{message}\n")
            print(f"Error in rule {snakemake.rule}: {message}\n(log: {snakemake.log[0]})", file=console)
            raise SystemExit(1) from None
        finally:
            sys.stderr = console


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
