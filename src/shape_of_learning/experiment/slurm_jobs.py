"""A run's SLURM jobs named by what they run. The slurm executor plugin names every job by the run's id (its status
checks query that name) and writes a job's rule and wildcards into its comment, but not a group job's: a checkpoint's
extraction and metrics, one group job, carry `rule_checkpoint_extract_hidden_states_measure_layers` whatever the
checkpoint (snakemake-executor-plugin-slurm#34 and #35; slurm_extra may set neither name nor comment). Each job's batch
script says it: its Snakemake command lists the jobs it runs, `--target-jobs RULE:WILDCARD=VALUE,...`.

    python -m shape_of_learning jobs        # JOBID  STATE  TIME  WHERE  what it runs, e.g. pythia-70m/step1000: ...
"""

import shlex
import subprocess
from collections import Counter

from snakemake.target_jobs import parse_target_jobs_cli_args

QUEUE_FORMAT = "%i|%T|%M|%R"  # job id, state, time used, node (or why it waits)


def target_jobs(batch_script: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of each job a SLURM job's batch script runs, as its Snakemake command lists them."""
    for line in batch_script.splitlines():
        words = shlex.split(line)
        if "--target-jobs" in words:
            listed = words[words.index("--target-jobs") + 1 :]
            end = next((index for index, word in enumerate(listed) if word.startswith("--")), len(listed))
            return [(spec.rulename, spec.wildcards_dict) for spec in parse_target_jobs_cli_args(listed[:end])]
    return []


def what_it_runs(targets: list[tuple[str, dict[str, str]]]) -> str:
    """One line for a SLURM job: the model and checkpoint its jobs share, if any, then its rules in alphabetical
    order, each with a count where it runs several ("pythia-70m/step1000: extract_hidden_states, measure_layers
    x3")."""
    if not targets:
        return "?"
    shared = {key: value for key, value in targets[0][1].items() if all(w.get(key) == value for _, w in targets)}
    subject = "/".join(shared[key] for key in ("model", "checkpoint") if key in shared) or ",".join(
        f"{key}={value}" for key, value in shared.items()
    )
    counts = sorted(Counter(rule for rule, _ in targets).items())  # the batch script lists them in no fixed order
    rules = ", ".join(f"{rule} x{n}" if n > 1 else rule for rule, n in counts)
    return f"{subject}: {rules}" if subject else rules


def listing(run=subprocess.run) -> list[str]:
    """A line per SLURM job of this user in the queue, with what it runs (`what_it_runs`), from squeue and each
    job's batch script (scontrol write batch_script)."""
    queue = run(
        ["squeue", "--me", "--noheader", f"--format={QUEUE_FORMAT}"], capture_output=True, text=True, check=True
    ).stdout
    lines = []
    for row in queue.splitlines():
        job, state, used, where = row.split("|", 3)
        script = run(["scontrol", "write", "batch_script", job, "-"], capture_output=True, text=True)
        runs = what_it_runs(target_jobs(script.stdout)) if script.returncode == 0 else "?"
        lines.append(f"{job}\t{state}\t{used}\t{where}\t{runs}")
    return lines
