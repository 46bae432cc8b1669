"""Pinning: Hub revisions to commit shas (HfApi monkeypatched), the offline cache fallback, local weight hashes and
the identical-checkpoint flag."""

import hashlib
import shutil
from types import SimpleNamespace

import pytest
from huggingface_hub import constants
from huggingface_hub.errors import OfflineModeIsEnabled

from shape_of_learning import pinning
from shape_of_learning.pinning import identical_checkpoints, pin
from shape_of_learning.registry import Checkpoint, checkpoints

SHA = "a" * 40
PYTHIA_STEP1000 = Checkpoint("pythia-70m", "step1000", "hub", "EleutherAI/pythia-70m", "step1000", 1000)


def fake_hub(monkeypatch, siblings=None, error=None):
    """Replace HfApi with one whose model_info returns `siblings` or raises `error`; returns the calls made."""
    calls = []

    class FakeApi:
        def model_info(self, repo, revision, files_metadata):
            calls.append((repo, revision, files_metadata))
            if error:
                raise error
            return SimpleNamespace(sha=SHA, siblings=siblings)

    monkeypatch.setattr(pinning, "HfApi", FakeApi)
    return calls


def lfs_file(name, sha256):
    return SimpleNamespace(rfilename=name, lfs=SimpleNamespace(sha256=sha256), blob_id="b" * 40)


def test_hub_pin_records_commit_and_lfs_hashes_in_one_call(monkeypatch):
    calls = fake_hub(monkeypatch, [lfs_file("model.safetensors", "1" * 64), lfs_file("pytorch_model.bin", "2" * 64),
                                   SimpleNamespace(rfilename="config.json", lfs=None, blob_id="c" * 40)])
    pinned = pin(PYTHIA_STEP1000)
    assert calls == [("EleutherAI/pythia-70m", "step1000", True)]
    assert pinned["commit_sha"] == SHA and pinned["weights"] == {"model.safetensors": "1" * 64}
    assert pinned["weights_digest"] == hashlib.sha256(f"model.safetensors:{'1' * 64}\n".encode()).hexdigest()
    assert {k: pinned[k] for k in ("model", "checkpoint", "step", "source", "location", "revision")} == dict(
        model="pythia-70m", checkpoint="step1000", step=1000, source="hub", location="EleutherAI/pythia-70m",
        revision="step1000")


def test_hub_revision_without_safetensors_is_refused(monkeypatch):
    fake_hub(monkeypatch, [lfs_file("pytorch_model.bin", "2" * 64)])
    with pytest.raises(ValueError, match=r"no \.safetensors weights in EleutherAI/pythia-70m@step1000.*safetensors"):
        pin(PYTHIA_STEP1000)


def test_offline_pin_reads_the_hf_cache(monkeypatch, tmp_path):
    fake_hub(monkeypatch, error=OfflineModeIsEnabled("offline"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--EleutherAI--pythia-70m"
    blob_sha = "3" * 64
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / blob_sha).write_bytes(b"weights")
    (repo / "refs").mkdir()
    (repo / "refs" / "step1000").write_text(SHA)
    (repo / "snapshots" / SHA).mkdir(parents=True)
    (repo / "snapshots" / SHA / "model.safetensors").symlink_to(repo / "blobs" / blob_sha)
    pinned = pin(PYTHIA_STEP1000)
    assert pinned["commit_sha"] == SHA and pinned["weights"] == {"model.safetensors": blob_sha}


def test_offline_pin_without_cache_says_how_to_prefetch(monkeypatch, tmp_path):
    fake_hub(monkeypatch, error=OfflineModeIsEnabled("offline"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match="cannot pin EleutherAI/pythia-70m@step1000.*hf download .*--revision"):
        pin(PYTHIA_STEP1000)


def test_local_directory_hashes_and_identical_checkpoints(tmp_path):
    for step, payload in ((0, b"A"), (1, b"A"), (2, b"B"), (3, b"A")):
        directory = tmp_path / "models" / "demo" / f"step{step}"
        directory.mkdir(parents=True)
        (directory / "model.safetensors").write_bytes(payload)
        (directory / "config.json").write_text("{}")
    shutil.copytree(tmp_path / "models" / "demo", tmp_path / "models" / "other")
    entry = {"train": {"arch": "gpt_neox", "steps": {"last": 3, "every": 1, "log_until": 0}}}
    pins = [pin(c) for c in checkpoints("demo", entry, str(tmp_path)) + checkpoints("other", entry, str(tmp_path))]
    assert pins[0]["commit_sha"] is None
    assert pins[0]["weights"] == {"model.safetensors": hashlib.sha256(b"A").hexdigest()}
    demo, other = pins[:4], pins[4:]
    assert identical_checkpoints(demo[::-1]) == {"step1": "step0", "step3": "step0"}  # earliest by step, not order
    assert identical_checkpoints(other) == {"step1": "step0", "step3": "step0"}
    with pytest.raises(ValueError, match=r"one model; got \['demo', 'other'\]"):
        identical_checkpoints(pins)


def test_local_directory_errors(tmp_path):
    missing = Checkpoint("m", "main", "local", str(tmp_path / "nope"), None, -1)
    with pytest.raises(FileNotFoundError, match="m/main: model directory .*nope does not exist"):
        pin(missing)
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ValueError, match="no .safetensors weights"):
        pin(Checkpoint("m", "main", "local", str(tmp_path), None, -1))
