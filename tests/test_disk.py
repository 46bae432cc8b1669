"""Disk and download volume (shape_of_learning.cost.disk): sizes from lock files and a Hugging Face cache laid
out as huggingface_hub's, shard bytes worked out by hand, the Hub asked only with --hub (HfApi mocked), and the summary
in the output of a real `snakemake -n`, not of a real run."""

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
import yaml
from huggingface_hub import constants

from shape_of_learning.__main__ import main
from shape_of_learning.cost import disk
from shape_of_learning.experiment.config import validate_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.cost.disk import Bytes, peak, summary
from shape_of_learning.models import pinning

from hf_cache import add_revision
from workflow_runs import run_snakemake

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "presets" / "tiny.yaml"
REPO_ID = "EleutherAI/pythia-tiny"


def config(**extraction) -> dict:
    """A hub model of three checkpoints (2 layers), a local one (4 layers); 1 x 128 tokens per layer."""
    return validate_config(
        {
            "corpus": {"name": "c"},
            "windows": {},
            "figures": {},
            "extraction": extraction,
            "metrics": {"batches": 1, "batch_size": 128},
            "models": {
                "tiny": {"hub_id": REPO_ID, "kind": "decoder", "layers": 2, "checkpoints": ["step1", "step2", "step3"]},
                "local": {"path": "saved", "kind": "encoder", "layers": 4},
            },
        }
    )


def volumes(config: dict, hub: bool = False) -> list[disk.ModelVolume]:
    experiment = plan(config)
    return disk.volumes(
        experiment.checkpoints, experiment.models, experiment.tokens_per_layer, config["extraction"]["store_dtype"], hub
    )


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A working directory with: step1 pinned (lock with sizes, weights evicted), step2 only in the HF cache, step3
    nowhere; a local model directory whose config.json gives hidden_size 12."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # online: step3 is the Hub's to tell (CI sets offline)
    monkeypatch.chdir(tmp_path)
    width = json.dumps({"hidden_size": 8}).encode()
    add_revision(
        tmp_path / "cache",
        REPO_ID,
        "step2",
        {
            "config.json": width,
            "model.safetensors.index.json": json.dumps(
                {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
            ).encode(),
            "model-00001-of-00002.safetensors": b"x" * 300,
            "model-00002-of-00002.safetensors": b"y" * 200,
            "pytorch_model.bin": b"z" * 9999,
        },
    )  # auto: safetensors, so the .bin is not counted
    lock = Path("results/lock/tiny/step1.json")
    lock.parent.mkdir(parents=True)
    lock.write_text(
        json.dumps(
            {
                "model": "tiny",
                "checkpoint": "step1",
                "commit_sha": "c" * 40,
                "source": "hub",
                "weights": {"model.safetensors": "1" * 64},
                "weight_bytes": {"model.safetensors": 700},
            }
        )
    )
    Path("saved").mkdir()
    Path("saved/config.json").write_text(json.dumps({"d_model": 12}))
    return tmp_path


def test_sizes_come_from_locks_and_the_cache_and_unknown_ones_are_counted_not_guessed(run):
    tiny, local = volumes(config())
    assert tiny.downloads == [700, 300 + 200, None]  # lock; both shards in the cache; nothing known
    assert tiny.download == Bytes(1200, 1) and str(tiny.download) == "≥ 1.2 kB"
    assert tiny.hidden_size == 8 and tiny.shard_bytes == 128 * (2 + 1) * 8 * 2  # tokens x states x width x float16
    assert local.downloads == [0] and local.hidden_size == 12 and local.shard_bytes == 128 * 5 * 12 * 2
    assert volumes(config(store_dtype="float32"))[1].shard_bytes == 128 * 5 * 12 * 4
    Path("cache/models--EleutherAI--pythia-tiny/snapshots").joinpath(
        (run / "cache/models--EleutherAI--pythia-tiny/refs/step2").read_text(), "model-00002-of-00002.safetensors"
    ).unlink()  # one shard of two left the cache: that size is no longer known
    assert volumes(config())[0].downloads == [700, None, None]


def test_a_lock_written_before_sizes_were_recorded_reads_them_from_the_cache_or_counts_them_unknown(run):
    commit = add_revision(run / "cache", REPO_ID, "step3", {"model.safetensors": b"w" * 40})
    old = {
        "model": "tiny",
        "checkpoint": "step3",
        "commit_sha": commit,
        "source": "hub",
        "weights": {"model.safetensors": "2" * 64},
    }  # no weight_bytes
    Path("results/lock/tiny/step3.json").write_text(json.dumps(old))
    assert pinning.read_lock("results/lock/tiny/step3.json") == old
    assert volumes(config())[0].downloads == [700, 500, 40]
    Path("results/lock/tiny/step3.json").write_text(json.dumps({**old, "commit_sha": "d" * 40}))
    assert volumes(config())[0].downloads == [700, 500, None]


def test_peak_disk_by_eviction_and_kept_shards(run):
    found = volumes(config())
    shards = 128 * 3 * 8 * 2, 128 * 5 * 12 * 2  # one checkpoint of each model
    assert peak(found, evict_weights=False, keep_embeddings=True) == Bytes(1200 + 3 * shards[0] + shards[1], 1)
    # evicted: a lane of downloads holds two checkpoints at most, one extracting and the next downloading
    assert peak(found, evict_weights=True, keep_embeddings=True) == Bytes(1200 + 3 * shards[0] + shards[1], 1)
    assert peak(found, evict_weights=False, keep_embeddings=False) == Bytes(1200 + max(shards), 1)
    assert peak(found, evict_weights=True, keep_embeddings=False) == Bytes(1200 + max(shards), 1)
    experiment = plan(config(evict_weights=True))
    lanes = [[ckpt] for ckpt in experiment.download_lanes()[0]]  # were each checkpoint a lane of its own
    assert peak(found, evict_weights=True, keep_embeddings=False, lanes=lanes) == Bytes(1200 + max(shards), 1)
    assert peak(found, True, False, lanes=[lanes[0]]) == Bytes(700 + max(shards), 0)  # only step1's lane
    # weights a job reads after the extraction (Rajaee & Pilehvar's) are never evicted: counted whole, once
    one_lane = [experiment.download_lanes()[0]]
    assert peak(found, True, False, one_lane) == Bytes(1200 + max(shards), 1)  # step1 and step2, step3 unknown
    assert peak(found, True, False, one_lane, kept=frozenset({("tiny", "step1")})) == Bytes(1200 + max(shards), 1)
    assert peak(found, True, False, lanes=[lanes[1]], kept=frozenset({("tiny", "step1")})) == Bytes(
        1200 + max(shards), 0
    )
    text = summary(found, config(evict_weights=True)["extraction"], experiment.download_lanes())
    assert "download: ≥ 1.2 kB (1 checkpoints unpinned, not in the HF cache nor the model facts; add --hub" in text
    peak_line = f"peak disk, evict_weights: true: ≥ {disk.human(1200 + max(shards))} (this config)"
    assert f"{peak_line} with keep_embeddings: false" in text
    assert len(text.splitlines()) == 5


def test_hub_sizes_only_when_asked(run, monkeypatch, capsys):
    calls = []

    class FakeApi:
        def model_info(self, repo, revision, files_metadata):
            calls.append((repo, revision, files_metadata))
            return SimpleNamespace(
                sha="e" * 40,
                siblings=[
                    SimpleNamespace(rfilename="model.safetensors", lfs=SimpleNamespace(sha256="3" * 64), size=4000),
                    SimpleNamespace(rfilename="config.json", lfs=None, blob_id="b" * 40, size=600),
                ],
            )

    def fake_download(repo, filename, revision):
        calls.append((repo, filename, revision))
        (run / "fetched.json").write_text(json.dumps({"n_embd": 16}))
        return str(run / "fetched.json")

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    assert volumes(config())[0].downloads[2] is None and calls == []  # offline by default
    assert volumes(config(), hub=True)[0].downloads == [700, 500, 4000]
    assert calls == [(REPO_ID, "step3", True)]  # only the checkpoint known nowhere else
    shutil.rmtree(run / "cache")  # no local config.json now, nor step2's files
    assert volumes(config(), hub=True)[0].hidden_size == 16
    assert calls[-1] == (REPO_ID, "config.json", "step1") and len(calls) == 4  # step2 and step3's sizes, config.json
    calls.clear()
    path = run / "config.yaml"
    path.write_text(yaml.safe_dump(config()))
    assert main(["disk", str(path), "--hub", "--directory", str(run)]) == 0
    out = capsys.readouterr().out
    assert "tiny " in out and "8.7 kB" in out and "download: 8.7 kB\n" in out and len(calls) == 3


def snakemake(workdir: Path, *args) -> subprocess.CompletedProcess:
    return run_snakemake(workdir, "--configfile", TINY, *args)


@pytest.mark.slow
def test_a_dry_run_prints_the_volume_and_a_real_run_does_not(tmp_path):
    dry = snakemake(tmp_path, "-n", "--quiet", "rules")
    assert dry.returncode == 0, dry.stderr
    assert "Disk and download volume of 1 checkpoints of 1 models" in dry.stderr
    # minilm: 128 tokens per layer (metrics.batch_size x batches) x 7 states x 384 (its config.json) x float16 bytes
    assert f"hidden-state shards (float16): {disk.human(128 * 7 * 384 * 2)} in all" in dry.stderr
    real = snakemake(tmp_path, "--cores", "1", "results/lock/minilm/main.json")
    assert real.returncode == 0, real.stderr
    assert "Disk and download volume" not in real.stdout + real.stderr
    assert json.loads((tmp_path / "results/lock/minilm/main.json").read_text())["weight_bytes"]  # sizes recorded
