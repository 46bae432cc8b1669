#!/usr/bin/env bash
# Starts a one-node SLURM cluster on this machine (two fake GPUs), submits a preset (PRESET: config files, merged in
# order; default the demo with the CI overlay: the demo's DAG, smaller) through profiles/slurm exactly as a user does,
# checks every output and that two GPU jobs ran at once (profiles/default's workstation limit must not cap a
# cluster), and stops the daemons it started.
# Run as root from the repository root: `make slurm-test`, or `make slurm-test PRESET=presets/demo.yaml`.
set -euo pipefail
repo=$(pwd)
read -ra presets <<< "${PRESET:-presets/demo.yaml presets/ci.yaml}"
presets=($(realpath "${presets[@]}"))
workdir=$(mktemp -d /tmp/slurm-demo.XXXXXX)
bash tests/slurm/local_cluster.sh start
watcher=
trap '[ -n "$watcher" ] && kill "$watcher" 2>/dev/null; bash "$repo/tests/slurm/local_cluster.sh" stop' EXIT

# Once a second: the number of running jobs that hold a GPU (SLURM 22.05's squeue cannot show it; scontrol can).
( while sleep 1; do
    echo "$(date +%s) $(scontrol -o show job 2>/dev/null | grep JobState=RUNNING | grep -c TresPerJob=gres:gpu)"
  done ) > "$workdir/gpu_jobs_running.txt" &
watcher=$!

start=$(date +%s)
# The user's profile, then only what differs on this one-node test cluster (tests/slurm/profile).
.venv/bin/snakemake --profile profiles/slurm --profile tests/slurm/profile --configfile "${presets[@]}" --directory "$workdir"
echo "${PRESET:-presets/demo.yaml presets/ci.yaml} through SLURM: $(( $(date +%s) - start )) s"
.venv/bin/python -m shape_of_learning verify "${presets[@]}" --directory "$workdir"

# At some second, two jobs holding a GPU each were running: the cluster was not capped at one GPU job.
most=$(sort -k2,2n "$workdir/gpu_jobs_running.txt" | tail -1 | cut -d' ' -f2)
echo "GPU jobs running at once: at most ${most:-0} (per second: $workdir/gpu_jobs_running.txt)"
[ "${most:-0}" -ge 2 ] || { echo "FAIL: never two GPU jobs at once" >&2; exit 1; }
