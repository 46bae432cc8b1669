"""Checkpoint series as the Hub publishes them, offline, through the real workflow.

A Hugging Face cache laid out as the Hub's (refs/, snapshots/, blobs/ named by sha256) holds tiny GPT-NeoX and Bloom
models whose revisions carry PyTorch `.bin` weights only, as the Pythia and Bloom intermediate branches do: one
revision sharded with its index, one whose blob equals another's (EleutherAI/pythia#205), one that shares a shard only
(#206), a Bloom series without tokenizer files (its tokenizer in another repository), and a configured revision that
the repository lacks. A second series is a real decoder trained by the pipeline's own training code, published with
every defect upstream shows: step0 = step1 by construction (gpt-neox's first update at learning rate 0), the final
model re-published under an early and a mid-series branch, a broken late branch, and a re-serialised copy. Snakemake
runs pin, extraction, health, metrics, tables and figures on them with HF_HUB_OFFLINE=1.
"""

import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import safetensors.torch
import torch
import transformers
import yaml

from shape_of_learning.corpus import clean_dump, gensim_sample_path
from shape_of_learning.experiment.config import validate_config
from shape_of_learning.experiment.verify import problems
from shape_of_learning.models import training
from shape_of_learning.models.training import byte_tokenizer

from hf_cache import add_revision
from workflow_runs import OFFLINE, run_snakemake

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
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
        "weight_map": {key: file for file, group in zip(names, groups) for key in group},
    }
    return files | {"pytorch_model.bin.index.json": json.dumps(index).encode()}


def directory_files(save, scratch: Path) -> dict[str, bytes]:
    save(scratch)
    return {str(path.relative_to(scratch)): path.read_bytes() for path in scratch.rglob("*") if path.is_file()}


def perturbed(model, keys, seed):
    """Other weights at the initialisation's scale (std 0.02): a loss still near ln(vocabulary), as at step0."""
    torch.manual_seed(seed)
    copy = type(model)(model.config)
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, tensor in copy.state_dict().items():
            if name in keys:
                tensor.add_(0.02 * torch.randn_like(tensor))
    return copy


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("hf-cache")
    scratch = tmp_path_factory.mktemp("scratch")
    tokenizer = directory_files(byte_tokenizer("gpt_neox", 128).save_pretrained, scratch / "tokenizer")
    neox = transformers.GPTNeoXConfig(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    config = {"config.json": neox.to_json_string().encode()}
    torch.manual_seed(0)
    first = transformers.GPTNeoXForCausalLM(neox)
    second = perturbed(first, set(first.state_dict()), seed=1)
    sharded = bin_files(second, shards=2)
    shard_two_keys = {
        k
        for k, f in json.loads(sharded["pytorch_model.bin.index.json"])["weight_map"].items()
        if f.startswith("pytorch_model-00002")
    }
    third = bin_files(perturbed(second, shard_two_keys, seed=2), shards=2)
    first_shard = "pytorch_model-00001-of-00002.bin"
    assert third[first_shard] == sharded[first_shard]  # the premise: torch.save writes equal tensors to equal bytes
    for revision, weights in [
        ("step0", bin_files(first)),
        ("step1", bin_files(first)),  # step1 re-serves step0
        ("step2", sharded),
        ("step3", third),
        ("step5", sharded),  # step3 shares shard 1
        ("step6", bin_files(perturbed(first, set(first.state_dict()), seed=5))),
    ]:
        add_revision(cache, PYTHIA, revision, config | tokenizer | weights)

    bloom = transformers.BloomConfig(vocab_size=300, hidden_size=32, n_layer=2, n_head=2)
    add_revision(cache, BLOOM_TOKENIZER, "main", tokenizer | {"config.json": bloom.to_json_string().encode()})
    for step, seed in ((1000, 3), (2000, 4)):  # no tokenizer files, as on bigscience/bloom-*-intermediate
        torch.manual_seed(seed)
        add_revision(
            cache,
            BLOOM,
            f"global_step{step}",
            {"config.json": bloom.to_json_string().encode()} | bin_files(transformers.BloomForCausalLM(bloom)),
        )
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
            "pythia-tiny": {
                "hub_id": PYTHIA,
                "kind": "decoder",
                "layers": 2,
                "max_length": 128,
                "checkpoints": pythia_checkpoints,
            },
            "bloom-tiny": {
                "hub_id": BLOOM,
                "tokenizer": BLOOM_TOKENIZER,
                "kind": "decoder",
                "layers": 2,
                "max_length": 128,
                "checkpoints": ["global_step1000", "global_step2000"],
            },
        },
    }


def snakemake(workdir: Path, config: dict, cache: Path, *targets) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return run_snakemake(
        workdir,
        "--configfile",
        workdir / "config.yaml",
        "--cores",
        "2",
        *targets,
        env={**OFFLINE, "HF_HUB_CACHE": str(cache)},
    )


def test_a_configured_revision_the_repository_lacks_stops_at_its_pin_naming_the_nearest(hub_cache, tmp_path):
    result = snakemake(tmp_path, experiment(["step0", "step4"]), hub_cache, "results/lock/pythia-tiny/step4.json")
    assert result.returncode != 0
    assert (
        f"{PYTHIA} has no revision 'step4' (in the local cache" in result.stderr
        and "nearest existing: step2, step3, step5" in result.stderr
    ), result.stderr[-3000:]


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

    health = pd.read_csv(tmp_path / "results/tables/checkpoints.csv")
    flags = health[health["model"] == "pythia-tiny"].set_index("checkpoint")[
        ["identical_to", "shared_files", "health", "drawn_as"]
    ]
    flags = flags.astype(object).where(flags.notna(), None)
    shard = "pytorch_model-00001-of-00002.bin"
    # weights near initialisation: every loss is near ln(300), so none is broken; step0 = step1 is one model by design,
    # drawn once; step2 = step5 sit where the losses are flat, so nothing tells which holds its own step
    for name, other in (("step2", "step5"), ("step5", "step2")):
        assert flags.loc[name, "health"].startswith(f"same model as {other}, and the losses cannot tell which holds")
    assert flags.drop(columns="health").to_dict("index") == {
        "step0": {"identical_to": "step1", "shared_files": None, "drawn_as": None},
        "step1": {"identical_to": "step0", "shared_files": None, "drawn_as": "step0"},
        "step2": {"identical_to": "step5", "shared_files": None, "drawn_as": None},
        "step3": {"identical_to": None, "shared_files": f"{shard}=step2", "drawn_as": None},  # one shard in common
        "step5": {"identical_to": "step2", "shared_files": None, "drawn_as": None},
        "step6": {"identical_to": None, "shared_files": None, "drawn_as": None},
    }
    assert flags.loc["step3", "health"] == f"a mixture: shares {shard}=step2"
    assert flags.loc[["step0", "step1", "step6"], "health"].isna().all()
    values = pd.read_parquet(tmp_path / "results/tables/metrics.parquet")
    assert set(values["checkpoint"]) >= {"step0", "step1", "step2", "step3", "step5"}  # the table keeps every row
    log = (tmp_path / "logs/plot_figure/profile_pythia-tiny_anisotropy.log").read_text()
    assert "left out" in log and "pythia-tiny/step3 (a mixture: shares" in log


TRAINED = "EleutherAI/pythia-trained"
# revision -> what it serves: a trained step, or a defect (final, broken, copy)
SERIES = {
    "step0": 0,
    "step1": 1,
    "step2": "final",
    "step5": 5,
    "step10": 10,
    "step20": 20,
    "step25": "final",
    "step30": "broken",
    "step40": 40,
    "step45": "copy of step40",
    "step50": 50,
    "step60": 60,
}
GENUINE = [step for step, served in SERIES.items() if isinstance(served, int)]


@pytest.fixture(scope="module")
def trained_cache(tmp_path_factory) -> Path:
    """A decoder trained by `training.train` on the cleaned Wikipedia sample, published with upstream's defects."""
    scratch = tmp_path_factory.mktemp("trained")
    clean_dump(gensim_sample_path(), scratch / "clean.txt", scratch / "stats.json")
    hyperparameters = dict(num_layers=2, d_model=32, num_heads=2, seq_len=64, batch_size=16, lr=3e-3)
    saved = training.train(
        "gpt_neox",
        scratch / "clean.txt",
        scratch / "steps",
        [SERIES[step] for step in GENUINE],
        zero_first_update=True,
        **hyperparameters,
    )
    directories = {int(path.name.removeprefix("step")): path for path in saved}
    files = {
        step: {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} for step, path in directories.items()
    }
    assert files[0]["model.safetensors"] == files[1]["model.safetensors"]  # the premise: one model by construction
    # a broken branch: weights at random at a scale no training leaves, so its loss lies far above a uniform guess's,
    # as bloom-560m-intermediate's global_step600000 does (perplexity 320,322 for a 250,880-token vocabulary)
    torch.manual_seed(7)
    config = transformers.GPTNeoXConfig.from_pretrained(directories[0], initializer_range=1.0)
    broken = transformers.GPTNeoXForCausalLM(config)
    broken.save_pretrained(scratch / "broken")
    copy = scratch / "copy.safetensors"  # the same tensors with other metadata: other bytes, the same model
    safetensors.torch.save_file(
        safetensors.torch.load_file(directories[40] / "model.safetensors"),
        copy,
        metadata={"format": "pt", "republished": "yes"},
    )
    defects = {
        "final": files[60],
        "broken": files[0] | {"model.safetensors": (scratch / "broken/model.safetensors").read_bytes()},
        "copy of step40": files[40] | {"model.safetensors": copy.read_bytes()},
    }
    cache = tmp_path_factory.mktemp("trained-cache")
    for revision, served in SERIES.items():
        add_revision(cache, TRAINED, revision, files[served] if isinstance(served, int) else defects[served])
    return cache


def test_a_trained_series_with_upstream_s_defects_is_judged_by_its_loss(trained_cache, tmp_path):
    config = {
        "corpus": {"name": "enwiki-sample", "gensim_sample": True},
        "windows": {"count": 48, "chars": 200, "seed": 0},
        "metrics": {"names": ["anisotropy", "id_twonn"], "batch_size": 128, "batches": 2, "layers_per_job": 3},
        "figures": {
            "profile_across_checkpoints": [{"model": "trained"}],
            "id_across_checkpoints": {"models": ["trained"]},
            "loss_across_checkpoints": {"models": ["trained"]},
        },
        "models": {
            "trained": {
                "hub_id": TRAINED,
                "kind": "decoder",
                "layers": 2,
                "max_length": 64,
                "checkpoints": list(SERIES),
            }
        },
    }
    result = snakemake(tmp_path, config, trained_cache)
    assert result.returncode == 0, result.stderr[-4000:]
    assert problems(validate_config(config), tmp_path) == []
    health = pd.read_csv(tmp_path / "results/tables/checkpoints.csv").set_index("checkpoint")
    loss = health["loss"]
    assert loss["step0"] > loss["step5"] > loss["step20"] > loss["step60"]  # it learned
    verdicts = health[["health", "drawn_as"]].astype(object).where(health[["health", "drawn_as"]].notna(), None)
    assert verdicts.loc["step1"].tolist() == [None, "step0"]  # one model by design, its loss fitting: drawn once
    # the final model under an early name, and under a mid-series one: its loss lies below step5's and step40's
    # beyond their paired noise, so neither can hold its step
    for name, others, below in (
        ("step2", "step25, step60", "step5's"),
        ("step25", "step2, step60", "step40 = step45's"),
    ):
        assert verdicts.loc[name, "health"].startswith(
            f"another step's model: same model as {others}, of which step60 holds its own step; here at step"
        )
        assert f"below {below}" in verdicts.loc[name, "health"]
    assert verdicts.loc["step60"].tolist() == [None, None]  # the genuine final, at its own step
    assert verdicts.loc["step30", "health"].startswith("out of place: loss")  # random weights late in the series
    assert health.loc["step45", "behaves_like"].startswith("step40 (") and pd.isna(health.loc["step45", "identical_to"])
    for copy, other in (("step40", "step45"), ("step45", "step40")):  # other bytes, the same model, in a flat stretch
        assert verdicts.loc[copy, "health"].startswith(f"same model as {other}, and the losses cannot tell")
    genuine = [step for step in GENUINE if step not in ("step1", "step40")]
    assert verdicts[verdicts["health"].isna() & verdicts["drawn_as"].isna()].index.tolist() == genuine
    summary = pd.read_parquet(tmp_path / "results/tables/summary.parquet")
    assert set(summary.loc[summary["health"].isna() & summary["drawn_as"].isna(), "checkpoint"]) == set(genuine)
    assert set(summary["checkpoint"]) == set(SERIES)  # every checkpoint keeps its rows: the unfiltered series
    log = (tmp_path / "logs/plot_figure/id_across_checkpoints.log").read_text()
    assert "trained/step2 (another step's model" in log and "trained/step30 (out of place" in log
    assert "trained/step25 (another step's model" in log
    assert (tmp_path / "results/figures/loss_trained.png").stat().st_size > 10_000
