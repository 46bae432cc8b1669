#!/usr/bin/env bash
# Every CUDA measurement that docs/benchmarks.md quotes, in one run on a GPU machine with the pipeline's packages installed:
#   bash benchmarks/cuda_suite.sh [OUTDIR] [CORPUS_XML]
# 1. the CUDA paths of extraction (fp32/bf16, device_map="auto", out-of-memory halving), checked on real runs, and
#    the shard pipeline's stream, pinned buffers and events against a synchronous copy (its GPU test);
# 2. extraction throughput against the bare forward pass (Pythia-410m shape), bf16 and fp32;
# 3. the metric stage on the GPU against scikit-dimension on the CPU;
# 4. the demo DAG on CUDA (its models trained and measured on the GPU), timed, then checked by verify;
# 5. how far bf16 extraction moves each metric of a demo model, against fp32.
# CORPUS_XML: a MediaWiki XML file for the demo and the benchmarks (default: ../shared/data's enwik8 prefix); the
# demo runs without the packaged MiniLM so that it needs nothing but the pipeline's own code and this file.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-cuda-suite}; xml=$(realpath "${2:-../shared/data/enwik8-head-4154064.xml}")
mkdir -p "$out"; export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
status=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, keep its output, carry on after a failure
    local name=$1 limit=$2; shift 2
    echo "== $name"; local started=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?
    grep -v -E "it/s\]|tok/s\]|Warning|warn\(" "$out/$name.log" | tail -n 25
    echo "-- $name: exit $rc in $((SECONDS - started)) s"; [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"

step cuda_paths 150 python3 benchmarks/cuda_paths.py --text "$xml"
step shard_pipeline 120 python3 -m pytest -q -p no:cacheprovider tests/test_extract.py -k on_a_gpu
step extract_bf16 150 python3 benchmarks/extract_speed.py --model pythia-410m --tokens 131072 --batch-size 32 \
    --max-length 1024 --text "$xml"
step extract_fp32 150 python3 benchmarks/extract_speed.py --model pythia-410m --tokens 131072 --batch-size 32 \
    --max-length 1024 --dtype float32 --text "$xml"
step metrics 150 python3 benchmarks/metrics_speed.py --dims 768 2560 4096 --repeats 3 --device cuda

demo=$(mktemp -d)
python3 - "$xml" "$demo/demo.yaml" <<'EOF'
import hashlib, sys, yaml
config = yaml.safe_load(open("presets/demo.yaml"))
config["corpus"] = {"name": "enwik8-prefix", "local_path": sys.argv[1],
                    "sha256": hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()}
config["models"].pop("all-MiniLM-L6-v2")
for spec in config["figures"].values():
    for figure in spec if isinstance(spec, list) else [spec]:
        if "models" in figure:
            figure["models"] = [m for m in figure["models"] if m != "all-MiniLM-L6-v2"]
yaml.safe_dump(config, open(sys.argv[2], "w"), sort_keys=False)
EOF
step demo 300 python3 -m snakemake --snakefile "$PWD/Snakefile" --directory "$demo" --cores "$(nproc)" \
    --configfile "$demo/demo.yaml" --quiet rules
step demo_verify 60 python3 -m shape_of_learning verify "$demo/demo.yaml" --directory "$demo"
python3 benchmarks/job_seconds.py "$demo/results" > "$out/demo_jobs.txt"
cat "$out/demo_jobs.txt"; cp -r "$demo/results/tables" "$out/demo_tables" 2>/dev/null
step precision 150 python3 benchmarks/precision_effect.py --path "$demo/results/models/demo-pythia/step200" \
    --kind decoder --layers 4 --device cuda --tokens 8192 --batch-size 2048 --text "$xml"
exit $status
