"""What a SLURM job's two Snakemake processes cost around its work, and what an upstream fix of their exit would save.

    .venv/bin/python benchmarks/slurm_job_startup.py [--repeats N] [--configfile presets/demo.yaml]

A SLURM job of snakemake-executor-plugin-slurm runs Snakemake twice: the batch script's (executor slurm-jobstep), which
runs the job under `srun`, and the job step's, which runs the rule. This script runs that pair as the batch script
does (its command line shortened to what matters here: a target file for `--target-jobs`), on this machine, with a
stand-in for `srun` that runs its command and records when it started and ended. The job is a rule added to this
workflow (`sleep 2`, so the job step's scheduler timer has fired before it ends, as in a real job); the workflow is
included from a temporary folder, so the package comes from the install (`pip install -e .`, as `make` does). Per row,
the median over the repeats, rows taken in turn so drift hits each alike:

- before: the batch script's Snakemake from its start to its job step's (Python, Snakemake, the workflow, the DAG);
- step: the job step's Snakemake beyond the job's 2 s;
- after: the batch script's Snakemake from its job step's end to its own exit.

Rows: the same pair on a one-rule workflow (what Snakemake costs by itself); on this workflow as installed; and with
the scheduler's 1 s rate-limit timer made a daemon thread. Snakemake 9.27 re-arms that non-daemon `threading.Timer`
after the batch script's Snakemake has run its one job synchronously, and the interpreter waits for it at exit
(`JobScheduler._schedule_reevalutation`). The last row patches Snakemake in these two processes only, as an upstream
fix would change it; nothing is edited on disk.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOB_SECONDS = 2.0

# Runs Snakemake's command line, with the exit timer made a daemon where $DAEMON_TIMER is 1.
SNAKEMAKE = """\
import os, sys, threading

if os.environ["DAEMON_TIMER"] == "1":
    from snakemake.scheduling.job_scheduler import JobScheduler

    def _schedule_reevalutation(self, delay):
        timer = threading.Timer(delay, self._open_jobs.release)
        timer.daemon = True
        timer.start()

    JobScheduler._schedule_reevalutation = _schedule_reevalutation
from snakemake.cli import main

sys.argv[0] = "snakemake"
main()
"""

# Stands in for srun: drops its options, runs the job step's Snakemake through the same wrapper, appends its start and
# end times to $STEP_TIMES (the jobstep plugin passes no SRUN_* or SLURM_* variable on, hence the name).
SRUN = """\
#!{python}
import os, subprocess, sys, time

command = sys.argv[1:]
while command and command[0].startswith("-"):
    command.pop(0)
if command[1:3] == ["-m", "snakemake"]:
    command[1:3] = [{snakemake!r}]
start = time.time()
returncode = subprocess.call(command)
with open(os.environ["STEP_TIMES"], "a") as times:
    times.write(f"{{start}} {{time.time()}}\\n")
sys.exit(returncode)
"""

RULE = f"""
rule sleep_and_touch:
    output: "out/{{name}}.txt"
    shell: "sleep {JOB_SECONDS:g}; touch {{output}}"
"""

# (label, include this workflow, exit timer a daemon)
ROWS = [
    ("Snakemake alone (a one-rule workflow)", False, False),
    ("this workflow, as installed", True, False),
    ("this workflow, the exit timer a daemon", True, True),
]


def run_job(folder: Path, snakefile: Path, configfiles: list[str], daemon_timer: bool, name: str) -> tuple[float, ...]:
    """One SLURM job's Snakemake pair: seconds before, in (beyond the job) and after its job step."""
    times = folder / "step-times"
    times.unlink(missing_ok=True)
    env = dict(
        os.environ,
        PATH=f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}",
        SLURM_JOB_ID="1",
        STEP_TIMES=str(times),
        DAEMON_TIMER=str(int(daemon_timer)),
    )
    command = [
        sys.executable,
        str(folder / "snakemake_cli.py"),
        "-s",
        str(snakefile),
        "--executor",
        "slurm-jobstep",
        "--jobs",
        "1",
        "--mode",
        "remote",
        "--no-hooks",
        f"out/{name}.txt",
        *(["--configfile", *configfiles] if configfiles else []),
    ]
    start = time.time()
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    end = time.time()
    if result.returncode or not times.exists():
        sys.exit(f"the emulated SLURM job failed:\n{result.stdout}{result.stderr}")
    step_start, step_end = map(float, times.read_text().split())
    return step_start - start, step_end - step_start - JOB_SECONDS, end - step_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="jobs per row; the median counts")
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[str(REPO / "presets/demo.yaml")],
        help="config files of this workflow's rows (default: the demo's)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "snakemake_cli.py").write_text(SNAKEMAKE)
        srun = folder / "bin" / "srun"
        srun.parent.mkdir()
        srun.write_text(SRUN.format(python=sys.executable, snakemake=str(folder / "snakemake_cli.py")))
        srun.chmod(0o755)
        (folder / "alone.smk").write_text(RULE)
        (folder / "workflow.smk").write_text(f"include: {str(REPO / 'Snakefile')!r}\n{RULE}")
        runs = {label: [] for label, _, _ in ROWS}
        load = []
        for repeat in range(args.repeats):
            for row, (label, project, daemon_timer) in enumerate(ROWS):
                snakefile = folder / ("workflow.smk" if project else "alone.smk")
                runs[label].append(
                    run_job(folder, snakefile, args.configfile if project else [], daemon_timer, f"{repeat}-{row}")
                )
                load.append(os.getloadavg()[0])
    print(
        f"One SLURM job's two Snakemake processes, median of {args.repeats} (s; load average "
        f"{statistics.mean(load):.1f}, {os.cpu_count()} CPUs):"
    )
    print(f"{'':46} {'before':>7} {'step':>7} {'after':>7} {'total':>7}  vs installed")
    medians = {label: [statistics.median(values) for values in zip(*runs[label])] for label, _, _ in ROWS}
    installed = sum(medians[ROWS[1][0]])
    for label, (before, step, after) in medians.items():
        total = before + step + after
        print(f"{label:46} {before:7.2f} {step:7.2f} {after:7.2f} {total:7.2f} {total / installed:6.2f}x")
    print(
        textwrap.fill(
            "before: the batch script's Snakemake until its job step starts; step: the job step's "
            f"Snakemake beyond its {JOB_SECONDS:g} s job; after: the batch script's Snakemake from the "
            "job step's end to its exit.",
            118,
        )
    )


if __name__ == "__main__":
    main()
