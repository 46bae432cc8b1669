"""A run's job-seconds: the wall seconds of its jobs, from their benchmark files (`benchmark:`), summed by rule.

    .venv/bin/python benchmarks/job_seconds.py RESULTS [OTHER_RESULTS]

With one results folder: per rule, its jobs and their seconds (sum, mean, max). With two, run side by side on one
machine (e.g. the demo before and after a change, each with `--config results=FOLDER`): each rule's jobs and
seconds in both, and the ratio of the second's to the first's, per rule and in all. The sum of job-seconds, unlike
a run's wall clock, does not depend on how the jobs were packed onto the cores.
"""

import argparse
from pathlib import Path

import pandas as pd

from shape_of_learning import paths

# results/benchmarks/{rule}/{job}.tsv, or results/benchmarks/{rule}.tsv for a rule with one job (paths.benchmark)
BENCHMARKS = Path(paths.benchmark("rule")).parent.relative_to(paths.RESULTS)


def job_seconds(results: Path) -> pd.DataFrame:
    """One row per job of the run in `results`: its rule and the wall seconds Snakemake measured (column "s"; the
    sum of a benchmark's rows where the rule repeats its job)."""
    root = results / BENCHMARKS
    files = sorted(root.rglob("*.tsv"))
    if not files:
        raise SystemExit(f"{root}: no benchmark files; give the results folder of a finished run (e.g. results)")
    return pd.DataFrame(
        [
            {
                "rule": file.relative_to(root).parts[0].removesuffix(".tsv"),
                "s": pd.read_csv(file, sep="\t")["s"].sum(),
            }
            for file in files
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, nargs="+", help="one results folder, or two to compare")
    args = parser.parse_args()
    if len(args.results) > 2:
        parser.error("give one results folder, or two to compare")
    runs = [job_seconds(results).groupby("rule")["s"] for results in args.results]
    if len(runs) == 1:
        table = runs[0].agg(jobs="count", seconds="sum", mean="mean", max="max")
        print(table.sort_values("seconds", ascending=False).round(1).to_string())
        print(f"all: {table['jobs'].sum()} jobs, {table['seconds'].sum():.1f} s")
        return
    before, after = (run.agg(jobs="count", seconds="sum") for run in runs)
    table = before.merge(after, left_index=True, right_index=True, how="outer", suffixes=("_1", "_2")).fillna(0)
    table = table.astype({"jobs_1": int, "jobs_2": int})
    table["ratio"] = table["seconds_2"] / table["seconds_1"]
    print(table.sort_values("seconds_1", ascending=False).round(2).to_string())
    total_1, total_2 = table["seconds_1"].sum(), table["seconds_2"].sum()
    print(
        f"all: {table['jobs_1'].sum()} jobs, {total_1:.1f} s ({args.results[0]}) -> "
        f"{table['jobs_2'].sum()} jobs, {total_2:.1f} s ({args.results[1]}): {total_2 / total_1:.2f}x"
    )


if __name__ == "__main__":
    main()
