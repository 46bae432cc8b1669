"""Where the SLURM jobs of one Snakemake run spent their time, from the controller's and the node's logs and Snakemake's
output: queued (submitted, not yet started: the node's CPUs or GPUs taken, or the scheduler not yet passed); running,
split into the work its rules' benchmark files time and the rest (Snakemake's start-up in the job, twice: the batch
script and its job step, and its bookkeeping), and the batch script's Snakemake before and after its job step; and the
wait until Snakemake saw the job end (its status poll). Run by tests/slurm/run_demo_on_local_slurm.sh.

    python tests/slurm/slurm_times.py SLURMCTLD_LOG SLURMD_LOG SNAKEMAKE_OUTPUT

Benchmark paths in SNAKEMAKE_OUTPUT are read relative to its folder, the run's working directory.
"""

import csv
import re
import sys
from datetime import datetime
from pathlib import Path

CONTROLLER_EVENTS = {
    "submit": r"_slurm_rpc_submit_batch_job: JobId=(\d+)",
    "start": r"sched: Allocate JobId=(\d+) ",
    "end": r"_job_complete: JobId=(\d+) done",
}
NODE_EVENTS = {
    "batch": r"Launching batch job (\d+) ",
    "step": r"launch task StepId=(\d+)\.0 ",
    "step_end": r"\[(\d+)\.0\] done with job",
    "batch_end": r"\[(\d+)\.batch\] done with job",
}
STAMP = re.compile(r"^\s*\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")  # Snakemake's "[Wed Dec  2 07:13:06 2026]"


def times(log: str, jobs: set[int], events: dict[str, str]) -> dict[str, dict[int, datetime]]:
    """event -> SLURM job id -> when a SLURM daemon's log has it, for `jobs` only."""
    found = {event: {} for event in events}
    for line in log.splitlines():
        stamp, _, message = line.partition("] ")
        for event, pattern in events.items():
            if (match := re.search(pattern, message)) and int(match[1]) in jobs:
                found[event][int(match[1])] = datetime.fromisoformat(stamp.lstrip("["))
    return found


def snakemake_jobs(output: str) -> tuple[dict[int, list[int]], dict[int, str], dict[int, datetime]]:
    """From Snakemake's output: SLURM job id -> the Snakemake jobs it ran (a group job runs several), Snakemake job ->
    its benchmark file, and Snakemake job -> when Snakemake reported it finished (to the second)."""
    submitted, benchmark, finished = {}, {}, {}
    groups = []  # the members of each group job printed and not yet submitted, in the order Snakemake submits them
    job, now = None, None
    for line in output.splitlines():
        if match := STAMP.match(line):
            now = datetime.strptime(" ".join(match[1].split()), "%a %b %d %H:%M:%S %Y")
        if re.match(r"\[.*\] Group job ", line):
            groups.append([])
        elif match := re.match(r"\s+jobid: (\d+)$", line):  # a group job's members: indented twice
            job = int(match[1])
            if groups and line.startswith(" " * 8):
                groups[-1].append(job)
        elif (match := re.match(r"\s*benchmark: (\S+)$", line)) and job is not None:
            benchmark[job] = match[1]
        elif match := re.match(r"Job (\S+) has been submitted with SLURM jobid (\d+)", line):
            submitted[int(match[2])] = [int(match[1])] if match[1].isdigit() else groups.pop(0) if groups else []
        elif match := re.match(r"Finished jobid: (\d+) ", line):
            finished[int(match[1])] = now
    return submitted, benchmark, finished


def benchmarked_seconds(path: Path) -> float:
    """The wall seconds a rule's benchmark file recorded for its last run."""
    with open(path) as table:
        return float(list(csv.DictReader(table, delimiter="\t"))[-1]["s"])


def summary(controller_log: str, node_log: str, output: str, workdir: Path) -> str:
    submitted, benchmark, finished = snakemake_jobs(output)
    at = times(controller_log, set(submitted), CONTROLLER_EVENTS)
    done = sorted(job for job in submitted if job in at["start"] and job in at["end"])
    if not done:
        return f"{len(submitted)} SLURM jobs, none logged as started and ended by the controller"
    queued = [(at["start"][job] - at["submit"][job]).total_seconds() for job in done]
    ran = [(at["end"][job] - at["start"][job]).total_seconds() for job in done]
    span = (max(at["end"].values()) - min(at["submit"].values())).total_seconds()
    lines = [
        f"{len(done)} SLURM jobs queued {sum(queued) / len(done):.0f} s on average (at most {max(queued):.0f} s) "
        f"and ran {sum(ran) / len(done):.0f} s on average; {sum(ran):.0f} job-seconds in the {span:.0f} s from "
        f"the first submission to the last end: {sum(ran) / span:.1f} jobs running at a time"
    ]
    timed = [
        job
        for job in done
        if submitted[job]
        and all(member in benchmark and (workdir / benchmark[member]).exists() for member in submitted[job])
    ]
    if timed:
        beyond = [
            (at["end"][job] - at["start"][job]).total_seconds()
            - sum(benchmarked_seconds(workdir / benchmark[member]) for member in submitted[job])
            for job in timed
        ]
        lines.append(
            f"inside them, {sum(beyond) / len(timed):.1f} s a job beyond what their rules' benchmark files "
            f"time (Snakemake's start-up, twice, and its bookkeeping; {len(timed)} jobs)"
        )
    on_node = times(node_log, set(done), NODE_EVENTS)
    stepped = [job for job in done if all(job in on_node[event] for event in NODE_EVENTS)]
    if stepped:
        before = [(on_node["step"][job] - on_node["batch"][job]).total_seconds() for job in stepped]
        after = [(on_node["batch_end"][job] - on_node["step_end"][job]).total_seconds() for job in stepped]
        lines.append(
            f"the batch script's Snakemake took {sum(before) / len(stepped):.1f} s before its job step and "
            f"{sum(after) / len(stepped):.1f} s after it, on average (at most {max(after):.1f} s; "
            "Snakemake 9.27 waits up to 1 s at exit for its scheduler's timer, docs/cluster.md)"
        )
    late = [
        (max(finished[member] for member in submitted[job]) - at["end"][job]).total_seconds()
        for job in done
        if submitted[job] and all(member in finished for member in submitted[job])
    ]
    if late:
        lines.append(
            f"Snakemake saw a job's end {sum(late) / len(late):.0f} s after the controller logged it, on "
            f"average (at most {max(late):.0f} s): its status poll"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    controller_log, node_log, output = (Path(path).read_text(errors="replace") for path in sys.argv[1:4])
    print(summary(controller_log, node_log, output, Path(sys.argv[3]).parent))
