"""What a run delivered: the deliverables (`plan.Deliverable`) a user asked for that it could not make, the models
that blocked each and why, and the jobs that failed, each by its message and its log. The Snakefile prints these
lines at the end of every run (onsuccess, onerror), so a `--keep-going` run that could not have a model still says,
figure by figure, what is missing and what to fix.
"""

import os
import sys
from pathlib import Path

from shape_of_learning import paths
from shape_of_learning.experiment.plan import Experiment
from shape_of_learning.logs import failure_message


def drop_unavailable(experiment: Experiment, problems: dict[str, Exception]) -> None:
    """Record models that cannot be had (`Experiment.unavailable`), so that the targets leave out what needs them,
    and say which, one line per reason."""
    experiment.unavailable = {model: str(error) for model, error in problems.items()}
    by_reason = {}
    for model, reason in experiment.unavailable.items():
        by_reason.setdefault(reason, []).append(model)
    for reason, models in by_reason.items():  # one line per reason: a missing corpus blocks every model of its kind
        dropped = [d.name for d in experiment.deliverables() if set(models) & set(experiment.blocked_by(d))]
        named = f"model {models[0]!r}" if len(models) == 1 else f"models {', '.join(map(repr, models))}"
        print(
            f"{named} cannot be had: {reason}; with --keep-going, the run leaves out {', '.join(dropped)}",
            file=sys.stderr,
        )


def failed_jobs(since: float, logs: str = paths.LOGS) -> list[tuple[str, str]]:
    """(log, message) of each job whose log was written after `since` (a time.time()) and ends with its failure
    (`logs.failure_message`), oldest first."""
    found = []
    for folder, _, files in os.walk(logs):
        for name in files:
            path = os.path.join(folder, name)
            if os.stat(path).st_mtime >= since and (message := failure_message(path)) is not None:
                found.append((os.stat(path).st_mtime, path, message))
    return [(path, message) for _, path, message in sorted(found)]


def job_models(log: str, logs: str = paths.LOGS) -> tuple[str, ...]:
    """The names a job's log is filed under (`paths.log`: logs/{rule}/{model}/{checkpoint}.log, ...), its rule's
    left out: a model's jobs are those whose log names it."""
    return Path(log).relative_to(logs).with_suffix("").parts[1:]


def missing(
    experiment: Experiment, requested_files: set[str], requested_rules: set[str], since: float, logs: str = paths.LOGS
) -> list[str]:
    """One line per failed job (its message and its log), then one per deliverable asked for and not made (a file
    missing, or one of its models cannot be had or failed here): its target, its first file, and what blocked it (a
    model that cannot be had, or a model's failed job, and why).

    Asked for: one of its files was a target of the run, or its named target or `all` was.
    """
    failures = failed_jobs(since, logs)
    lines = [f"failed: {message} (log: {log})" for log, message in failures]
    for deliverable in experiment.deliverables():
        asked = not requested_files.isdisjoint(deliverable.outputs) or not requested_rules.isdisjoint(
            {deliverable.target, "all"}
        )
        reasons = [
            f"{model} cannot be had: {experiment.unavailable[model]}" for model in experiment.blocked_by(deliverable)
        ]
        for name in (*deliverable.models, deliverable.name):  # each model's first failed job, and its own job's
            reasons += [
                f"{name}: {message} (log: {log})" for log, message in failures if name in job_models(log, logs)
            ][:1]
        if not asked or not reasons and all(Path(path).is_file() for path in deliverable.outputs):
            continue  # made, or up to date (a file left by an earlier run with a blocked model is not)
        lines.append(
            f"not made: {deliverable.target} ({deliverable.outputs[0]}): "
            f"{'; '.join(dict.fromkeys(reasons)) or 'a job it needs failed or did not run (see above)'}"
        )
    return lines
