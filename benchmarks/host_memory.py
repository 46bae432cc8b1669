"""An extraction's model in host memory, measured against what its job requests for it (`cost.host_memory`).

    .venv/bin/python benchmarks/host_memory.py [--hidden 1024] [--layers 24]

Saves a random GPT-NeoX decoder (Pythia-410M's shape by default) in bfloat16 safetensors, as the Hub serves Pythia,
then, each in a fresh process, loads it as an extraction does (`extraction.loading.load_model`, on the CPU, where a
GPU run builds it before moving it): from its files in float32 and in bfloat16, and as a random-init baseline in
both. Prints each process's peak anonymous memory beyond what it held after its imports, as a ratio to the weights
term of the request (parameters x bytes of the forward dtype), and its peak of mapped weight files (page cache).
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

# Samples the process's anonymous and file-backed resident memory (/proc/self/status) every 5 ms while it loads.
LOAD = '''
import json, sys, threading, time
import torch, transformers
from shape_of_learning.extraction.loading import load_model

def resident():
    status = open("/proc/self/status").read()
    return [int(status.split(field + ":")[1].split()[0]) * 1024 for field in ("RssAnon", "RssFile")]

folder, dtype, baseline = sys.argv[1], getattr(torch, sys.argv[2]), sys.argv[3] == "1"
config = transformers.AutoConfig.from_pretrained(folder)
before, peak, loading = resident(), resident(), True

def sample():
    while loading:
        peak[:] = map(max, peak, resident())
        time.sleep(0.005)

sampler = threading.Thread(target=sample)
sampler.start()
model = load_model(folder, None, config, dtype, "cpu", False, kind="decoder", init_seed=0 if baseline else None)[0]
loading = False
sampler.join()
print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()),
                  "anonymous": peak[0] - before[0], "files": peak[1] - before[1]}))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=24)
    args = parser.parse_args()
    import torch
    import transformers

    from shape_of_learning.experiment.cost import dtype_bytes

    with tempfile.TemporaryDirectory() as tmp:
        config = transformers.GPTNeoXConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                            num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                                            vocab_size=50304)
        transformers.GPTNeoXForCausalLM(config).to(torch.bfloat16).save_pretrained(tmp)
        files = sum(f.stat().st_size for f in Path(tmp).glob("*.safetensors"))
        print(f"GPT-NeoX, hidden {args.hidden}, {args.layers} layers: {files / 1e9:.2f} GB of bfloat16 safetensors")
        print(f"{'loaded':32} {'anonymous':>10} {'ratio':>6} {'mapped files':>13}   (peaks beyond the imports)")
        for label, dtype, baseline in [("from its files, float32", "float32", False),
                                       ("from its files, bfloat16", "bfloat16", False),
                                       ("random-init baseline, float32", "float32", True),
                                       ("random-init baseline, bfloat16", "bfloat16", True)]:
            result = subprocess.run([sys.executable, "-c", LOAD, tmp, dtype, str(int(baseline))], check=True,
                                    capture_output=True, text=True)
            measured = json.loads(result.stdout.splitlines()[-1])
            term = measured["parameters"] * dtype_bytes(dtype)
            print(f"{label:32} {measured['anonymous'] / 1e9:7.2f} GB {measured['anonymous'] / term:6.2f} "
                  f"{measured['files'] / 1e9:10.2f} GB")
        print("ratio: the anonymous peak over the request's weights term, parameters x bytes of the forward dtype")


if __name__ == "__main__":
    main()
