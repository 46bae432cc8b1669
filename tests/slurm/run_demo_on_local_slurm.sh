#!/usr/bin/env bash
# Starts a one-node SLURM cluster on this machine, submits a preset (PRESET, default the CI preset: the demo's DAG,
# smaller) through profiles/slurm, checks every output, and stops the daemons. Run as root from the repository root:
# `make slurm-test`, or `make slurm-test PRESET=presets/demo.yaml` for the whole demo.
set -euo pipefail
repo=$(pwd)
preset=$(realpath "${PRESET:-presets/ci.yaml}")
workdir=$(mktemp -d /tmp/slurm-demo.XXXXXX)
bash tests/slurm/local_cluster.sh start
trap 'bash "$repo/tests/slurm/local_cluster.sh" stop' EXIT

# Only what differs on this one 2-core node with no accounting database is overridden here; the rest is the profile.
start=$(date +%s)
.venv/bin/snakemake --profile profiles/slurm --configfile "$preset" --directory "$workdir" \
    --jobs 4 --cores "$(nproc)" --latency-wait 10 \
    --slurm-status-command squeue --slurm-init-seconds-before-status-checks 2 --slurm-no-account \
    --default-resources slurm_partition=debug mem_mb=2000 runtime=20 \
    --set-resources extract_hidden_states:slurm_partition=gpu extract_hidden_states:gpu=1 \
        measure_layers:slurm_partition=gpu
echo "$(basename "$preset") through SLURM: $(( $(date +%s) - start )) s"
.venv/bin/python -m shape_of_learning.verify "$preset" --directory "$workdir"
