#!/usr/bin/env bash
# The demo's wall time on this checkout against another revision's, side by side on one machine:
#
#     bash benchmarks/demo_against.sh REVISION [ROUNDS] [PRESET...]      # e.g. the commit before a change; 2 rounds
#
# Each round runs the revision's demo, then this checkout's (in that order, then the other way round), each in a
# folder of its own with the same virtual environment (.venv) and --cores 2; it prints every run's wall seconds and
# the median ratio this / revision, then both runs' job-seconds by rule (benchmarks/job_seconds.py).
set -euo pipefail
revision=${1:?a git revision to compare with}
rounds=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
presets=("${@:-presets/demo.yaml}")
repo=$(pwd)
other=$(mktemp -d /tmp/demo-against.XXXXXX)
trap 'git -C "$repo" worktree remove --force "$other/tree" 2>/dev/null; true' EXIT
git worktree add --detach --quiet "$other/tree" "$revision"
ln -s "$repo/.venv" "$other/tree/.venv"

run() {  # run TREE FOLDER: that tree's demo in FOLDER, its wall seconds on stdout
    local start; start=$(date +%s.%N)
    (cd "$1" && PYTHONPATH="$1/src" .venv/bin/python -m snakemake --cores 2 --configfile "${presets[@]}" \
        --directory "$2" > "$2.out" 2>&1) || { tail -n 30 "$2.out" >&2; exit 1; }
    python3 -c "print(round($(date +%s.%N) - $start, 1))"
}

ratios=()
for round in $(seq "$rounds"); do
    order=(revision this); (( round % 2 )) || order=(this revision)
    for design in "${order[@]}"; do
        tree=$repo; [ "$design" = revision ] && tree=$other/tree
        seconds=$(run "$tree" "$other/$design-$round")
        echo "round $round, $design: $seconds s"
        eval "wall_$design=$seconds"
    done
    ratios+=("$(python3 -c "print($wall_this / $wall_revision)")")
done
python3 -c "import statistics, sys; r = [float(x) for x in sys.argv[1:]]
spread = f'{min(r):.2f}-{max(r):.2f}'
print(f'this / revision: median {statistics.median(r):.2f} over {len(r)} rounds ({spread})')" "${ratios[@]}"
.venv/bin/python benchmarks/job_seconds.py "$other/revision-1/results" "$other/this-1/results"
