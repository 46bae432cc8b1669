"""How far genuine checkpoints lie from where their neighbours put their step, against how far the final model
re-published under an earlier step lies: the measurement behind health.own_step_standard_errors
(docs/checkpoint-health.md).

    .venv/bin/python benchmarks/own_step_tolerance.py results/tables/health/demo-pythia.parquet ...

For each health table (one model's series, `shape_of_learning.health.assess`): each checkpoint with a loss, judged as
a member of a group would be (`own_step.place`) against the others, its deviation in combined standard errors of
ln(loss) (past either end, how far beyond the one-sided bound: 0 within it); then the final checkpoint's loss put at
each earlier step, judged against the rest. The tolerance must lie above the first and below the second.
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from shape_of_learning.health.own_step import place


def deviation(step: int, loss: float, se: float, neighbours: pd.DataFrame) -> float:
    """|ln(loss) - the point its neighbours put at `step`| in combined standard errors; one-sided past the ends."""
    placed = place(step, loss, se, neighbours, 1.0)
    gap = np.log(loss) - np.log(placed.expected)
    gap = {"~": abs(gap), "<=": max(gap, 0.0), ">=": max(-gap, 0.0)}[placed.relation]
    return gap / placed.tolerance


def measure(health: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint: its loss's standard error in ln(loss), its own deviation, and the final model's there."""
    series = health[health["loss"].notna() & (health["step"] >= 0)].sort_values("step", ignore_index=True)
    final = series.iloc[-1]
    rows = []
    for index, row in series.iterrows():
        others = series.drop(index)
        rows.append(
            {
                "checkpoint": row["checkpoint"],
                "step": row["step"],
                "loss": row["loss"],
                "se_ln_loss": row["loss_se"] / row["loss"],
                "genuine_sd": deviation(row["step"], row["loss"], row["loss_se"], others),
                "final_here_sd": np.nan
                if index == final.name
                else deviation(row["step"], final["loss"], final["loss_se"], others.drop(final.name)),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("health", nargs="+", type=Path, help="health tables (results/tables/health/MODEL.parquet)")
    args = parser.parse_args()
    for path in args.health:
        measured = measure(pd.read_parquet(path))
        print(f"\n{path.stem}: deviations in combined standard errors of ln(loss)")
        print(measured.to_string(index=False, float_format=lambda value: f"{value:.3g}"))
        mid = measured.iloc[1:-2]  # the final model there has a neighbour on each side (not past the last but one)
        nearest = mid.loc[mid["final_here_sd"].idxmin()]
        print(
            f"genuine checkpoints: at most {measured['genuine_sd'].max():.2f}; the final model at a mid-series "
            f"step: at least {nearest['final_here_sd']:.2f} (at {nearest['checkpoint']}); median standard error "
            f"{measured['se_ln_loss'].median():.3f} in ln(loss)"
        )


if __name__ == "__main__":
    main()
