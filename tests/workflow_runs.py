"""Snakemake on the repository's workflow, run by the tests as a user runs it."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run_snakemake(workdir: Path, *args, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """`snakemake --directory WORKDIR ARGS`, started in the repository (its Snakefile and profiles/default apply, as
    for a user) with this checkout's package first on the path, in `env` (default: this environment, offline, as
    CI runs). check: a failed run raises with the end of its output."""
    env = {**(OFFLINE if env is None else env)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--directory", str(workdir), *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done
