"""Check a finished run: every final output of the plan exists, the metrics table holds exactly the rows the config
asks for, all finite, and the Rajaee & Pilehvar tables are complete and finite; and its claims scorecard, judged on
the tables it has (whether a claim holds is no problem of the run's; a check that raises is one of the scorecard's).

    python -m shape_of_learning verify presets/demo.yaml [presets/ci.yaml] [--directory WORKDIR]

Run by the end-to-end test and by the SLURM check in CI; usable after any run of the workflow.
"""

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from shape_of_learning import paths
from shape_of_learning.claims.scorecard import errors, lines, scorecard
from shape_of_learning.experiment.plan import Experiment, plan
from shape_of_learning.metrics.tables import ROW_KEY

RAJAEE_PILEHVAR_VALUES = ["performance", "isotropy", "isotropy_notebook"]


def expected_rows(experiment: Experiment, metrics: list[str], batches: int) -> set[tuple]:
    """The (model, checkpoint, layer, metric, batch) rows of a complete metrics table, random-init baselines'
    included."""
    return {
        (model, ckpt.name, layer, metric, batch)
        for model in experiment.checkpoints
        for ckpt in experiment.measured(model)
        for layer, metric, batch in itertools.product(experiment.hidden_states(model), metrics, range(batches))
    }


def problems(config: dict, workdir: Path) -> list[str]:
    """What is missing or wrong in `workdir` for this config, each naming its file; empty when the run is complete."""
    experiment = plan(config)
    found = [
        f"missing or empty {path}"
        for path in map(Path(workdir).joinpath, experiment.targets())
        if not path.is_file() or path.stat().st_size == 0
    ]
    found += _metrics_table(experiment, config, Path(workdir) / paths.METRICS_TABLE)
    if experiment.pairs:
        found += [
            problem for table in paths.RAJAEE_PILEHVAR_TABLES for problem in _rajaee_pilehvar(Path(workdir) / table)
        ]
    return found


def scorecard_lines(config: dict, workdir: Path) -> tuple[list[str], list[str]]:
    """The claims scorecard of the run in `workdir`, judged now on the tables it has (as its evaluate_claims job
    judges them: a partial run's missing tables make their claims not measurable), as lines; and its rows whose check
    raised (`holds` error: a defect of the scorecard, not a finding), named. None where the config has no
    `claims:`."""
    groups = plan(config).claims
    if not groups:
        return [], []
    card = scorecard(groups, config["claims"], root=Path(workdir))
    return lines(card), [f"claims: {row.claim} ({row.group}) raised: {row.reason}" for row in errors(card).itertuples()]


def _metrics_table(experiment: Experiment, config: dict, table: Path) -> list[str]:
    if not table.is_file():
        return []  # named among the missing outputs
    values = pd.read_parquet(table)
    keys = list(zip(*(values[column] for column in ROW_KEY)))
    found = []
    if len(keys) != len(set(keys)):
        found.append(f"{table}: {len(keys) - len(set(keys))} duplicate ({', '.join(ROW_KEY)}) rows")
    expected = expected_rows(experiment, config["metrics"]["names"], config["metrics"]["batches"])
    if set(keys) != expected:
        found.append(
            f"{table}: rows differ from the config: {len(expected - set(keys))} missing "
            f"(e.g. {sorted(expected - set(keys))[:3]}), {len(set(keys) - expected)} unexpected"
        )
    if not np.isfinite(values["value"].to_numpy()).all():
        found.append(f"{table}: {(~np.isfinite(values['value'].to_numpy())).sum()} non-finite values")
    return found


def _rajaee_pilehvar(table: Path) -> list[str]:
    if not table.is_file():
        return []  # named among the missing outputs
    values = pd.read_csv(table)[RAJAEE_PILEHVAR_VALUES].to_numpy(float)
    return [f"{table}: empty or non-finite values"] if not len(values) or not np.isfinite(values).all() else []
