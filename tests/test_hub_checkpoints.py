"""Checkpoint series as the Hub publishes them, offline, through the real workflow.

A Hugging Face cache laid out as the Hub's (refs/, snapshots/, blobs/ named by sha256) holds tiny GPT-NeoX and Bloom
models whose revisions carry PyTorch `.bin` weights only, as the Pythia and Bloom intermediate branches do: one
revision sharded with its index, one whose blob equals another's (EleutherAI/pythia#205), one that shares a shard only
(#206), a Bloom series without tokenizer files (its tokenizer in another repository), and a configured revision that
the repository lacks. Snakemake runs pin, extraction, metrics, tables and figures on it with HF_HUB_OFFLINE=1.
"""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers
import yaml

from shape_of_learning.experiment.config import validate_config
from shape_of_learning.experiment.verify import problems
from shape_of_learning.models.training import byte_tokenizer

from hf_cache import add_revision

REPO = Path(__file__).resolve().parents[1]
PYTHIA, BLOOM, BLOOM_TOKENIZER = "EleutherAI/pythia-tiny", "bigscience/bloom-tiny-intermediate", "bigscience/bloom-tiny"
pytestmark = pytest.mark.slow


def torch_bytes(tensors: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()


def bin_files(model, shards: int = 1) -> dict[str, bytes]:
    """The model's weights as upstream's PyTorch files: pytorch_model.bin, or shards with their index."""
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    if shards == 1:
        return {"pytorch_model.bin": torch_bytes(state)}
    groups = [[str(key) for key in group] for group in np.array_split(np.array(list(state)), shards)]
    names = [f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin" for i in range(shards)]
    files = {file: torch_bytes({key: state[key] for key in group}) for file, group in zip(names, groups)}
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
             "weight_map": {key: file for file, group in zip(names, groups) for key in group}}
    return files | {"pytorch_model.bin.index.json": json.dumps(index).encode()}


def directory_files(save, scratch: Path) -> dict[str, bytes]:
    save(scratch)
    return {str(path.relative_to(scratch)): path.read_bytes() for path in scratch.rglob("*") if path.is_file()}


def perturbed(model, keys, seed):
    torch.manual_seed(seed)
    copy = type(model)(model.config)
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, tensor in copy.state_dict().items():
            if name in keys:
                tensor.add_(0.5 * torch.randn_like(tensor))
    return copy


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("hf-cache")
    scratch = tmp_path_factory.mktemp("scratch")
    tokenizer = directory_files(byte_tokenizer("gpt_neox", 128).save_pretrained, scratch / "tokenizer")
    neox = transformers.GPTNeoXConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=256)
    config = {"config.json": neox.to_json_string().encode()}
    torch.manual_seed(0)
    first = transformers.GPTNeoXForCausalLM(neox)
    second = perturbed(first, set(first.state_dict()), seed=1)
    sharded = bin_files(second, shards=2)
    shard_two_keys = {k for k, f in json.loads(sharded["pytorch_model.bin.index.json"])["weight_map"].items()
                      if f.startswith("pytorch_model-00002")}
    third = bin_files(perturbed(second, shard_two_keys, seed=2), shards=2)
    first_shard = "pytorch_model-00001-of-00002.bin"
    assert third[first_shard] == sharded[first_shard]  # the premise: torch.save writes equal tensors to equal bytes
    for revision, weights in [("step0", bin_files(first)), ("step1", bin_files(first)),  # step1 re-serves step0
                              ("step2", sharded), ("step3", third), ("step5", sharded),  # step3 shares shard 1
                              ("step6", bin_files(perturbed(first, set(first.state_dict()), seed=5)))]:
        add_revision(cache, PYTHIA, revision, config | tokenizer | weights)

    bloom = transformers.BloomConfig(vocab_size=300, hidden_size=32, n_layer=2, n_head=2)
    add_revision(cache, BLOOM_TOKENIZER, "main", tokenizer | {"config.json": bloom.to_json_string().encode()})
    for step, seed in ((1000, 3), (2000, 4)):  # no tokenizer files, as on bigscience/bloom-*-intermediate
        torch.manual_seed(seed)
        add_revision(cache, BLOOM, f"global_step{step}", {"config.json": bloom.to_json_string().encode()}
                     | bin_files(transformers.BloomForCausalLM(bloom)))
    return cache


def experiment(pythia_checkpoints: list[str]) -> dict:
    return {
        "corpus": {"name": "enwiki-sample", "gensim_sample": True},
        "windows": {"count": 48, "chars": 200, "seed": 0},
        "metrics": {"names": ["anisotropy", "id_twonn"], "batch_size": 128, "batches": 2, "layers_per_job": 3},
        "figures": {
            "anisotropy_by_layer": {"models": ["pythia-tiny", "bloom-tiny"]},
            "profile_across_checkpoints": [{"model": "pythia-tiny"}],
            "id_across_checkpoints": {"models": ["pythia-tiny", "bloom-tiny"]},
        },
        "models": {
            "pythia-tiny": {"hub_id": PYTHIA, "kind": "decoder", "layers": 2, "max_length": 128,
                            "checkpoints": pythia_checkpoints},
            "bloom-tiny": {"hub_id": BLOOM, "tokenizer": BLOOM_TOKENIZER, "kind": "decoder", "layers": 2,
                           "max_length": 128, "checkpoints": ["global_step1000", "global_step2000"]},
        },
    }


def snakemake(workdir: Path, config: dict, cache: Path, *targets) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                           str(workdir), "--configfile", str(workdir / "config.yaml"), "--cores", "2", *targets],
                          capture_output=True, text=True, env=env)


def test_a_configured_revision_the_repository_lacks_stops_at_its_pin_naming_the_nearest(hub_cache, tmp_path):
    result = snakemake(tmp_path, experiment(["step0", "step4"]), hub_cache, "results/lock/pythia-tiny/step4.json")
    assert result.returncode != 0
    assert (f"{PYTHIA} has no revision 'step4' (in the local cache" in result.stderr
            and "nearest existing: step2, step3, step5" in result.stderr), result.stderr[-3000:]


def test_pytorch_only_series_pins_extracts_and_flags_duplicates_offline(hub_cache, tmp_path):
    config = experiment(["step0", "step1", "step2", "step3", "step5", "step6"])
    result = snakemake(tmp_path, config, hub_cache)
    assert result.returncode == 0, result.stderr[-4000:]
    assert problems(validate_config(config), tmp_path) == []

    lock = json.loads((tmp_path / "results/lock/pythia-tiny/step2.json").read_text())
    assert lock["weights_format"] == "pytorch"
    assert sorted(lock["weights"]) == ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
    manifest = json.loads((tmp_path / "results/manifests/bloom-tiny/global_step2000.json").read_text())
    assert manifest["weights_format"] == "pytorch" and manifest["tokenizer"] == BLOOM_TOKENIZER

    summary = pd.read_parquet(tmp_path / "results/tables/summary.parquet")
    flags = (summary[summary["model"] == "pythia-tiny"].drop_duplicates("checkpoint")
             .set_index("checkpoint")[["identical_to", "shared_files"]])
    flags = flags.astype(object).where(flags.notna(), None)
    shard = "pytorch_model-00001-of-00002.bin"
    assert flags.to_dict("index") == {
        "step0": {"identical_to": "step1", "shared_files": None},  # whole duplicates: both flagged
        "step1": {"identical_to": "step0", "shared_files": None},
        "step2": {"identical_to": "step5", "shared_files": None},
        "step3": {"identical_to": None, "shared_files": f"{shard}=step2"},  # one shard in common
        "step5": {"identical_to": "step2", "shared_files": None},
        "step6": {"identical_to": None, "shared_files": None},
    }
    values = pd.read_parquet(tmp_path / "results/tables/metrics.parquet")
    assert set(values["checkpoint"]) >= {"step0", "step1", "step2", "step3", "step5"}  # the table keeps every row
    log = (tmp_path / "logs/plot_figure/profile_pythia-tiny_anisotropy.log").read_text()
    assert "left out" in log and "pythia-tiny/step3 (shares" in log  # step6, the one unique checkpoint, is drawn
