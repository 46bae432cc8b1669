"""A checkpoint's group job leaves no shards on its node's scratch, whatever its outcome (docs/cluster.md).

The tiny preset runs through profiles/slurm as a user runs it, with the job-step executor in place of sbatch: the main
process runs each SLURM job's work as the batch script's Snakemake does, under a stand-in for srun that starts the job
step's Snakemake here. The node's disk is a folder the main process cannot see, as on a cluster: `scratch` names an
environment variable that is an empty folder for the main process and the node's folder in its jobs.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_runs import OFFLINE, run_snakemake

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "presets" / "tiny.yaml"
pytestmark = pytest.mark.slow

# srun as the job-step executor calls it: its options dropped, the job step's Snakemake started in a session of its own
# with the node's scratch; where $STOP_WHEN names a file, SIGTERM to the whole step once it exists, as SLURM signals a
# job's processes at its time limit, a preemption or an scancel.
SRUN = """\
#!{python}
import os, signal, subprocess, sys, time

command = sys.argv[1:]
while command[0].startswith("-"):
    command.pop(0)
step = subprocess.Popen(command, env={{**os.environ, "NODE_SCRATCH": os.environ["NODE_DISK"]}}, start_new_session=True)
stop_when = os.environ.get("STOP_WHEN")
while stop_when and step.poll() is None and not os.path.exists(stop_when):
    time.sleep(0.05)
if stop_when and step.poll() is None:
    os.killpg(step.pid, signal.SIGTERM)
sys.exit(step.wait())
"""


def cluster_run(tmp_path: Path, env: dict) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The tiny preset's run, shards not kept, through profiles/slurm with the job-step executor and the stand-in srun;
    returns the run, its working directory and the node's disk."""
    bin_dir, node_disk, submit_host_view, workdir = (tmp_path / name for name in ("bin", "node", "submit", "run"))
    for folder in (bin_dir, node_disk, submit_host_view, workdir):
        folder.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    config = yaml.safe_load(TINY.read_text())
    config["extraction"]["keep_embeddings"] = False  # temporary shards, on the scratch
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {
        **OFFLINE,
        **env,
        "PATH": f"{bin_dir}{os.pathsep}{OFFLINE['PATH']}",
        "NODE_SCRATCH": str(submit_host_view),
        "NODE_DISK": str(node_disk),
    }
    done = run_snakemake(
        workdir,
        "results/metrics/minilm/main/layer_0-6.parquet",  # the checkpoint's group job and what it needs
        "--configfile",
        tmp_path / "config.yaml",
        "--profile",
        "profiles/slurm",
        "--executor",
        "slurm-jobstep",
        "--retries",
        "0",
        "--config",
        "scratch=$NODE_SCRATCH",  # as a user repeats the profile's: expanded in each process, the jobs' on the node
        env=env,
    )
    assert not any(submit_host_view.iterdir())  # the node's disk was out of the main process's sight
    return done, workdir, node_disk


def shard_folders(node_disk: Path) -> list[Path]:
    return [path for path in node_disk.rglob("*") if path.parent.name == "minilm" and "embeddings" in path.parts]


def assert_written_on_the_node_and_removed(workdir: Path, node_disk: Path) -> None:
    log = (workdir / "logs/extract_hidden_states/minilm/main.log").read_text()
    assert f"shards in {node_disk}/" in log and "128 tokens x 7 layers" in log  # extracted, on the node's disk
    assert shard_folders(node_disk) == []
    assert [path for path in node_disk.rglob("*") if path.is_file()] == []


def test_a_group_job_whose_metrics_fail_removes_its_shards_from_the_node(tmp_path):
    blocked = tmp_path / "run/logs/measure_layers/minilm/main"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("")  # a file where the metrics job's log folder goes: it fails after its extraction
    done, workdir, node_disk = cluster_run(tmp_path, {})
    assert done.returncode != 0 and "Error in rule measure_layers" in done.stdout + done.stderr
    assert_written_on_the_node_and_removed(workdir, node_disk)


def test_a_group_job_that_slurm_stops_during_its_metrics_removes_its_shards_from_the_node(tmp_path):
    metrics_log = tmp_path / "run/logs/measure_layers/minilm/main/layer_0-6.log"
    done, workdir, node_disk = cluster_run(tmp_path, {"STOP_WHEN": str(metrics_log)})
    assert done.returncode != 0 and metrics_log.exists()  # stopped while its metrics ran
    assert not (workdir / "results/metrics/minilm/main/layer_0-6.parquet").exists()
    assert_written_on_the_node_and_removed(workdir, node_disk)


def test_a_group_job_that_succeeds_leaves_no_shards_on_the_node(tmp_path):
    """The removal at the job's exit comes after its metrics. (Here it is also what removes the shards: the main
    process names the temporary files a job may delete by its own view of the scratch, which differs from the node's
    only in this stand-in; on a cluster the job step's Snakemake deletes them first.)"""
    done, workdir, node_disk = cluster_run(tmp_path, {})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (workdir / "results/metrics/minilm/main/layer_0-6.parquet").is_file()
    assert_written_on_the_node_and_removed(workdir, node_disk)
