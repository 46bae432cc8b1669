#!/usr/bin/env bash
# What a cluster costs on this machine, side by side: runs a preset (PRESET: config files, merged in order; default the
# demo with the CI overlay: the demo's DAG, smaller) locally on this machine's cores, as a user would, then starts a
# one-node SLURM cluster here (tests/slurm/local_cluster.sh: two fake GPUs, a disk of its own for scratch) and submits
# the same DAG through profiles/slurm exactly as a user does. It prints both wall times, their ratio, the SLURM
# submissions and where those jobs spent their time (tests/slurm/slurm_times.py); it checks every output, that two GPU
# jobs ran at once (profiles/default's workstation limit must not cap a cluster), and that every checkpoint's shards
# were written to the node's scratch and none was left behind, that an extraction and a metrics job made to fail on
# their first attempt (test switches) completed by the profile's retries, and that a rerun of the same command
# completes after a group job was killed with the main process after its extraction; it stops the daemons it started.
# Run as root from the repository root: `make slurm-test`, or `make slurm-test PRESET=presets/demo.yaml`.
set -euo pipefail
repo=$(pwd)
label=${PRESET:-presets/demo.yaml presets/ci.yaml}
read -ra presets <<< "$label"
presets=($(realpath "${presets[@]}"))
cores=$(nproc)
background=()  # the samplers this script starts, ended when it exits
trap '[ ${#background[@]} -eq 0 ] || kill "${background[@]}" 2>/dev/null' EXIT

# A run's output goes to a file in its folder (a failed run shows its end), and the machine's 1-minute load average,
# every 5 s while it lasts, to another: the machine is shared, and others' work shows there.
run() {
    local folder=$1; shift
    ( while sleep 5; do cut -d' ' -f1 /proc/loadavg; done ) > "$folder/load.txt" &
    background+=($!)
    start=$(date +%s)
    "$@" > "$folder/snakemake.out" 2>&1 || {
        tail -n 60 "$folder/snakemake.out" >&2; echo "FAIL: $* (whole output: $folder/snakemake.out)" >&2; exit 1; }
    seconds=$(( $(date +%s) - start ))
    kill "${background[-1]}"
    load=$(awk '{ s += $1 } END { printf "%.1f", NR ? s / NR : 0 }' "$folder/load.txt")
}

# 1. The baseline: the same DAG without SLURM, in a folder of its own.
localdir=$(mktemp -d /tmp/slurm-demo-local.XXXXXX)
run "$localdir" .venv/bin/snakemake --cores "$cores" --configfile "${presets[@]}" --directory "$localdir"
local_s=$seconds
echo "$label locally (--cores $cores): $local_s s, load average $load ($localdir)"

# 2. The same DAG through SLURM: the user's profile, then only what differs on this one-node test cluster
# (tests/slurm/profile), and the node's scratch (a --config replaces the profile's, as it does for a user).
workdir=$(mktemp -d /tmp/slurm-demo.XXXXXX)
bash tests/slurm/local_cluster.sh start  # refuses, and this script stops nothing, where a SLURM daemon already runs
trap '[ ${#background[@]} -eq 0 ] || kill "${background[@]}" 2>/dev/null
      bash "$repo/tests/slurm/local_cluster.sh" stop' EXIT
scratch=$(bash tests/slurm/local_cluster.sh scratch)
# Once a second: the number of running jobs that hold a GPU (SLURM 22.05's squeue cannot show it; scontrol can).
( while sleep 1; do
    echo "$(date +%s) $(scontrol -o show job 2>/dev/null | grep JobState=RUNNING | grep -c TresPerJob=gres:gpu)"
  done ) > "$workdir/gpu_jobs_running.txt" &
background+=($!)
# One extraction, and the last metrics job of another checkpoint, in the same group job after its extraction, fail on
# their first attempt (test switches, shape_of_learning.logs): the profile's retries must complete the run. Checkpoints
# of the demo and of its CI overlay; the metrics job's layer group, as the preset groups layers.
last_group=$(.venv/bin/python -c 'import sys
from shape_of_learning.experiment.config import load_config
from shape_of_learning.experiment.plan import plan
print(plan(load_config(*sys.argv[1:])).layer_groups("demo-pythia")[-1])' "${presets[@]}")
failing=(extract_hidden_states:demo-pythia/step8 "measure_layers:demo-pythia/step20/$last_group")
slurm_run=(.venv/bin/snakemake --profile profiles/slurm --profile tests/slurm/profile --configfile "${presets[@]}"
           --config scratch="$scratch" scratch_request=True --directory "$workdir")
run "$workdir" env SHAPE_OF_LEARNING_FAIL_FIRST_ATTEMPT="$(IFS=,; echo "${failing[*]}")" "${slurm_run[@]}"
echo "$label through SLURM: $seconds s, load average $load ($workdir)"
.venv/bin/python -m shape_of_learning verify "${presets[@]}" --directory "$workdir"

# What the cluster cost: the ratio, and the submissions that paid its per-job overhead (Snakemake's output).
submissions=$(grep -c "has been submitted with SLURM jobid" "$workdir/snakemake.out" || true)
submit_host=$(grep -c "^localrule " "$workdir/snakemake.out" || true)
awk -v s="$seconds" -v l="$local_s" -v n="$submissions" -v h="$submit_host" 'BEGIN {
    printf "SLURM / local: %d s / %d s = %.2fx; %d SLURM submissions (%.1f s each beyond the local run), ", s, l, s / l,
        n, n ? (s - l) / n : 0
    printf "%d jobs on the submit host\n", h }'
.venv/bin/python tests/slurm/slurm_times.py "$(scontrol show config | awk '/^SlurmctldLogFile/ {print $3}')" \
    "$(scontrol show config | awk '/^SlurmdLogFile/ {print $3}')" "$workdir/snakemake.out"

# SLURM's log of the failed attempt is kept (.snakemake/slurm_logs/), the successful retry's deleted
for job in "${failing[@]}"; do
    grep -rq "$job: failed on its first attempt, as SHAPE_OF_LEARNING_FAIL_FIRST_ATTEMPT asks" \
        "$workdir/.snakemake/slurm_logs" \
        || { echo "FAIL: $job did not fail on its first attempt" >&2; exit 1; }
done
[ "$(grep -c "Trying to restart job" "$workdir/snakemake.out")" -ge ${#failing[@]} ] \
    || { echo "FAIL: the failed jobs were not retried: $workdir/snakemake.out" >&2; exit 1; }
echo "${failing[*]}: each failed on its first attempt and the run completed by the retries"

# A group job killed after its extraction, with the main process (a session lost; SIGTERM would have Snakemake wait for
# its running jobs): what docs/cluster.md says to do then completes the run: list the jobs left running, scancel them,
# unlock, and the same command again. In a working directory of its own, one checkpoint's metrics as the target: its
# metrics job waits on its first attempt (a test switch) until the main process is killed.
killed=$(mktemp -d /tmp/slurm-demo-killed.XXXXXX)
stalled="measure_layers:demo-pythia/step4/$last_group"
target=(.venv/bin/snakemake --profile profiles/slurm --profile tests/slurm/profile --configfile "${presets[@]}"
        --config scratch="$scratch" scratch_request=True --directory "$killed"
        results/metrics/demo-pythia/step4/layer_$last_group.parquet)
env SHAPE_OF_LEARNING_STALL_FIRST_ATTEMPT=$stalled "${target[@]}" > "$killed/killed.out" 2>&1 &
main=$!
for _ in $(seq 900); do
    grep -qs "$stalled: stalled on its first attempt" "$killed"/logs/measure_layers/demo-pythia/step4/*.log && break
    sleep 1
done
grep -qs "$stalled: stalled" "$killed"/logs/measure_layers/demo-pythia/step4/*.log \
    || { tail -n 30 "$killed/killed.out" >&2; echo "FAIL: $stalled never started" >&2; exit 1; }
kill -KILL "$main"; wait "$main" 2>/dev/null || true
# squeue's names are the run's id: `jobs` names each job by what it runs, from its batch script
queue=$(.venv/bin/python -m shape_of_learning jobs)
grep -qP "\tRUNNING\t.*\tdemo-pythia/step4: extract_hidden_states, measure_layers" <<< "$queue" \
    || { echo "FAIL: python -m shape_of_learning jobs does not name the running group job:"$'\n'"$queue" >&2; exit 1; }
echo "python -m shape_of_learning jobs, once the main process was killed:"$'\n'"$queue"
scancel --user "$(id -un)"
for _ in $(seq 60); do [ -z "$(squeue --noheader --user "$(id -un)")" ] && break; sleep 1; done
"${target[@]}" --unlock > /dev/null 2>&1
run "$killed" env SHAPE_OF_LEARNING_STALL_FIRST_ATTEMPT=$stalled "${target[@]}"
[ -s "$killed/results/metrics/demo-pythia/step4/layer_$last_group.parquet" ] \
    || { echo "FAIL: the same command did not make $stalled's output" >&2; exit 1; }
echo "$stalled's group job killed after its extraction with the main process; the same command, run again, made it"

# At some second, two jobs holding a GPU each were running: the cluster was not capped at one GPU job.
most=$(sort -k2,2n "$workdir/gpu_jobs_running.txt" | tail -1 | cut -d' ' -f2)
echo "GPU jobs running at once: at most ${most:-0} (per second: $workdir/gpu_jobs_running.txt)"
[ "${most:-0}" -ge 2 ] || { echo "FAIL: never two GPU jobs at once" >&2; exit 1; }

# Where each checkpoint's shards were written: its extraction log names the folder and its filesystem
# (shape_of_learning.logs.filesystem). All on the node's scratch, none left there, none in the working directory.
placed=$(grep -h -o "shards in .*" "$workdir"/logs/extract_hidden_states/*/*.log)
echo "shards of $(wc -l <<< "$placed") extractions, e.g. $(head -1 <<< "$placed")"
elsewhere=$(grep -v "^shards in $scratch/.*: tmpfs at $scratch," <<< "$placed" || true)
[ -z "$elsewhere" ] || { echo "FAIL: shards not on the node's scratch $scratch:"$'\n'"$elsewhere" >&2; exit 1; }
left=$(find "$scratch" "$workdir" "$killed" -path '*/embeddings/*/*' | head -3)  # a checkpoint's folder, or a shard
[ -z "$left" ] || { echo "FAIL: shard folders left behind, e.g.:"$'\n'"$left" >&2; exit 1; }
echo "every checkpoint's shards on the node's scratch ($scratch, tmpfs), no shard folder left behind"
