"""Where the SLURM jobs of one Snakemake run spent their time, from the controller's own log: queued (submitted, not
yet started: the node's CPUs or GPUs taken, or the scheduler not yet passed) and running (Snakemake's start-up in the
job, twice: the batch script and its job step, then the work). Run by tests/slurm/run_demo_on_local_slurm.sh.

    python tests/slurm/slurm_times.py SLURMCTLD_LOG SNAKEMAKE_OUTPUT
"""

import re
import sys
from datetime import datetime
from pathlib import Path

EVENTS = {"submit": r"_slurm_rpc_submit_batch_job: JobId=(\d+)", "start": r"sched: Allocate JobId=(\d+) ",
          "end": r"_job_complete: JobId=(\d+) done"}


def times(log: str, jobs: set[int]) -> dict[str, dict[int, datetime]]:
    """event -> SLURM job id -> when the controller logged it, for `jobs` only."""
    found = {event: {} for event in EVENTS}
    for line in log.splitlines():
        stamp, _, message = line.partition("] ")
        for event, pattern in EVENTS.items():
            if (match := re.search(pattern, message)) and int(match[1]) in jobs:
                found[event][int(match[1])] = datetime.fromisoformat(stamp.lstrip("["))
    return found


def summary(log: str, output: str) -> str:
    jobs = {int(job) for job in re.findall(r"has been submitted with SLURM jobid (\d+)", output)}
    at = times(log, jobs)
    done = sorted(job for job in jobs if job in at["start"] and job in at["end"])
    if not done:
        return f"{len(jobs)} SLURM jobs, none logged as started and ended by the controller"
    queued = [(at["start"][job] - at["submit"][job]).total_seconds() for job in done]
    ran = [(at["end"][job] - at["start"][job]).total_seconds() for job in done]
    span = (max(at["end"].values()) - min(at["submit"].values())).total_seconds()
    return (f"{len(done)} SLURM jobs queued {sum(queued) / len(done):.0f} s on average (at most {max(queued):.0f} s) "
            f"and ran {sum(ran) / len(done):.0f} s on average; {sum(ran):.0f} job-seconds in the {span:.0f} s from "
            f"the first submission to the last end: {sum(ran) / span:.1f} jobs running at a time")


if __name__ == "__main__":
    log, output = (Path(path).read_text(errors="replace") for path in sys.argv[1:3])
    print(summary(log, output))
