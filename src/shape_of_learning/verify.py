"""Check a finished run: every expected output exists and the table is complete and finite.

    python -m shape_of_learning.verify presets/demo.yaml [presets/ci.yaml] [--directory WORKDIR]

Used by the end-to-end test and by the SLURM check in CI; usable after any run of the workflow.
"""

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from shape_of_learning.experiment import Experiment, load_config, plan


def expected_rows(experiment: Experiment, metrics: list[str], batches: int) -> set[tuple]:
    return {
        (model, ckpt.name, layer, metric, batch)
        for model, ckpts in experiment.checkpoints.items()
        for ckpt in ckpts
        for layer, metric, batch in itertools.product(experiment.hidden_states(model), metrics, range(batches))
    }


def problems(config: dict, workdir: Path) -> list[str]:
    """What is missing or wrong in `workdir/results` for this config; empty when the run is complete."""
    experiment = plan(config)
    found = []
    figures = [workdir / path for fig in experiment.figures for path in fig.outputs]
    found += [f"missing or empty figure {path}" for path in figures if not path.is_file() or path.stat().st_size == 0]
    table = workdir / "results/tables/metrics.parquet"
    if not table.is_file():
        return [*found, f"missing table {table}"]
    values = pd.read_parquet(table)
    keys = list(zip(values["model"], values["checkpoint"], values["layer"], values["metric"], values["batch"]))
    if len(keys) != len(set(keys)):
        found.append(f"{len(keys) - len(set(keys))} duplicate (model, checkpoint, layer, metric, batch) rows")
    expected = expected_rows(experiment, config["metrics"]["names"], config["metrics"]["batches"])
    if set(keys) != expected:
        found.append(
            f"table rows differ from the config: {len(expected - set(keys))} missing "
            f"(e.g. {sorted(expected - set(keys))[:3]}), {len(set(keys) - expected)} unexpected"
        )
    if not np.isfinite(values["value"].to_numpy()).all():
        found.append(f"{(~np.isfinite(values['value'].to_numpy())).sum()} non-finite values in {table}")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configfiles", type=Path, nargs="+", help="the --configfile files of the run, in order")
    parser.add_argument("--directory", type=Path, default=Path("."), help="the workflow's working directory")
    args = parser.parse_args(argv)
    config = load_config(*args.configfiles)
    found = problems(config, args.directory)
    for problem in found:
        print(problem, file=sys.stderr)
    print("run incomplete" if found else f"run complete: {args.directory / 'results'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
