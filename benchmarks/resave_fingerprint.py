"""How far a re-save in another precision moves a checkpoint's fingerprint, against how far apart the series'
genuine step neighbours lie: the measurement behind health.same_behaviour (docs/checkpoint-health.md).

    .venv/bin/python benchmarks/resave_fingerprint.py presets/demo.yaml demo-pythia demo-bert

For each checkpoint of each model (local checkpoints, as the demo trains them; run `make demo` first): its fingerprint
as the pipeline records it (`extraction.hidden_states.extract`, float32 on the CPU, the config's windows), and the
fingerprints of the same weights rounded through bfloat16 and through float16 and saved back in float32, as an
upstream re-upload in another precision serves them. Prints the distance (`health.duplicates.fingerprint_distance`)
of each re-save from its original and of each checkpoint from its next step neighbour, then per model the largest
re-save distance, the smallest neighbour distance and their ratio: a tolerance separates the two where the ratio
is well above 1. With `--record FILE`, also writes each checkpoint's step, loss record (its manifest's) and the
three fingerprints: the series tests/test_health.py splices upstream's defects into (tests/data/demo_series.json).
"""

import argparse
import json
import math
import shutil
import tempfile
from pathlib import Path

import safetensors.torch
import torch

from shape_of_learning import paths
from shape_of_learning.corpus import read_windows
from shape_of_learning.experiment.config import load_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.health.duplicates import fingerprint_distance
from shape_of_learning.models.checkpoints import Checkpoint

PRECISIONS = {"bfloat16": torch.bfloat16, "float16": torch.float16}
TOKENS = 64  # the fingerprint reads the first 16 kept vectors of every layer


def extracted(checkpoint: Checkpoint, entry: dict, windows: list[str], scratch: Path, tokens=TOKENS, loss=None) -> dict:
    """The manifest of an extraction of `tokens` per layer (float32, CPU), with the loss `loss` asks for."""
    manifest = extract(checkpoint, entry, windows, tokens, scratch / "shards", dtype="float32", device="cpu", loss=loss)
    shutil.rmtree(scratch / "shards")
    return manifest


def resaved(checkpoint: Checkpoint, precision: torch.dtype, scratch: Path) -> Checkpoint:
    """A copy of a local checkpoint whose float tensors went through `precision` and back to their own dtype."""
    copy = scratch / f"resaved-{precision}"
    shutil.copytree(checkpoint.location, copy, dirs_exist_ok=True)
    for file in copy.glob("*.safetensors"):
        tensors = safetensors.torch.load_file(file)
        rounded = {
            name: tensor.to(precision).to(tensor.dtype) if tensor.is_floating_point() else tensor
            for name, tensor in tensors.items()
        }
        safetensors.torch.save_file(rounded, file, metadata={"format": "pt"})
    return Checkpoint(checkpoint.model, checkpoint.name, "local", str(copy), None, checkpoint.step)


def rounded(layers: list[list[float]]) -> list[list[float]]:
    """Six significant digits: a re-save moves a fingerprint by 1e-4 or more, relative."""
    return [[float(f"{value:.6g}") for value in layer] for layer in layers]


def measure(config: dict, model: str) -> dict:
    """Print the distances of `model`'s checkpoints; return each checkpoint's step, loss record and fingerprints."""
    experiment = plan(config)
    entry = experiment.models[model]
    windows = read_windows(Path(paths.windows(config["corpus"]["name"])))
    checkpoints = sorted(experiment.measured(model), key=lambda c: c.step)
    record, worst, closest = {}, {name: 0.0 for name in PRECISIONS}, float("inf")
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for checkpoint in checkpoints:
            # as the run extracted it: its loss (with its per-token losses) and its fingerprint
            run = extracted(
                checkpoint, entry, windows, scratch, experiment.tokens_per_layer, config["extraction"]["loss"]
            )
            original = run["fingerprint"]
            manifest = json.loads(Path(paths.manifest(model, checkpoint.name)).read_text())
            if fingerprint_distance(original, manifest["fingerprint"]) > 1e-6 or not math.isclose(
                run["loss"]["value"], manifest["loss"]["value"], rel_tol=1e-9
            ):
                raise SystemExit(f"{model}/{checkpoint.name}: its manifest is not this extraction's: rerun the demo")
            copies = {
                name: extracted(resaved(checkpoint, dtype, scratch), entry, windows, scratch)["fingerprint"]
                for name, dtype in PRECISIONS.items()
            }
            moved = {name: fingerprint_distance(original, copy) for name, copy in copies.items()}
            worst = {name: max(worst[name], distance) for name, distance in moved.items()}
            line = ", ".join(f"{name} re-save {distance:.2e}" for name, distance in moved.items())
            if record:
                gap = fingerprint_distance({"layers": list(record.values())[-1]["fingerprint"]}, original)
                closest = min(closest, gap)
                line += f"; {gap:.3f} from the step before"
            print(f"{model} {checkpoint.name}: {line}")
            record[checkpoint.name] = {
                "step": checkpoint.step,
                "loss": {key: value for key, value in run["loss"].items() if key != "seconds"},
                "fingerprint": rounded(original["layers"]),
                "resaved": {name: rounded(copy["layers"]) for name, copy in copies.items()},
            }
    for name in PRECISIONS:
        print(
            f"{model}: largest {name} re-save {worst[name]:.2e}, smallest step-neighbour distance {closest:.3f}, "
            f"ratio {closest / worst[name]:.0f}"
        )
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--record", type=Path, help="write the series to this JSON file")
    arguments = parser.parse_args()
    config = load_config(arguments.config)
    recorded = {model: measure(config, model) for model in arguments.models}
    if arguments.record:
        source = (
            "The demo's checkpoints as `make demo` trains and measures them (CPU, float32; extraction.loss: 512 "
            "tokens): each checkpoint's step, its manifest's loss record, its fingerprint and those of its weights "
            "re-saved through bfloat16 and float16, written by `benchmarks/resave_fingerprint.py presets/demo.yaml "
            f"{' '.join(arguments.models)} --record {arguments.record}`."
        )
        arguments.record.write_text(json.dumps({"source": source, **recorded}) + "\n")


if __name__ == "__main__":
    main()
