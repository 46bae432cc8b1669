"""The rehearsal's preset (rehearsal/preset.py, written from the shipped models of config.yaml), its STS-B stand-in
(rehearsal/media.py), its faults (rehearsal/__main__.py) and upstream breaks (rehearsal/faults.py); `make rehearsal`
itself runs in CI (.ci/run)."""

import copy
import functools
import gzip
import json
import re
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
import yaml
from safetensors import safe_open

from shape_of_learning.experiment.config import validate_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.extraction.families import depth
from shape_of_learning.logs import FAILED
from shape_of_learning.models.checkpoints import Checkpoint
from shape_of_learning.models.pinning import pin
from shape_of_learning.rajaee_pilehvar import datasets
from shape_of_learning.rehearsal import faults, media, preset, structure, twins
from shape_of_learning.rehearsal.__main__ import check_faults
from shape_of_learning.rehearsal.local_hub import Fault, LocalHub

from hf_cache import add_revision, fresh_client, point_at

import shipped

PAPER = shipped.config()  # config.yaml's shipped models: a user's own additions are no concern of these tests


@functools.cache
def rehearsal() -> dict:
    """The rehearsal's preset of the shipped models, as `make rehearsal` writes it."""
    return preset.rehearsal_config(copy.deepcopy(PAPER))


def test_the_preset_is_written_where_asked_and_a_model_without_a_row_is_refused_naming_the_command(tmp_path, capsys):
    paper = copy.deepcopy(PAPER)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(paper, sort_keys=False))
    assert preset.main(["--configfile", str(tmp_path / "config.yaml"), "--output", str(tmp_path / "r.yaml")]) == 0
    written = (tmp_path / "r.yaml").read_text()
    assert written.startswith(preset.HEADER) and yaml.safe_load(written) == rehearsal()
    paper["models"]["mamba-130m"] = {"hub_id": "state-spaces/mamba-130m-hf", "kind": "decoder", "layers": 24}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(paper, sort_keys=False))
    assert preset.main(["--configfile", str(tmp_path / "config.yaml"), "--output", str(tmp_path / "r.yaml")]) == 2
    assert (
        "add them: python -m shape_of_learning.models.facts add state-spaces/mamba-130m-hf" in capsys.readouterr().err
    )


def test_every_way_of_loading_a_model_of_config_yaml_is_rehearsed():
    rows = structure.table()

    def variants(models):
        return {preset.variant(entry, rows[entry["hub_id"]]) for entry in models.values() if entry.get("hub_id")}

    rehearsed = {name: PAPER["models"][name] for name in rehearsal()["models"]}  # as config.yaml lists its branches
    assert variants(PAPER["models"]) == variants(rehearsed)
    assert len(rehearsal()["models"]) < len(PAPER["models"])  # Pythia's sizes, OPT's, ... by one each


def test_each_rehearsed_model_has_its_twins_depth_and_branches():
    rows = structure.table()
    for name, entry in rehearsal()["models"].items():
        paper = PAPER["models"][name]
        assert {key: entry[key] for key in paper if key not in ("layers", "checkpoints")} == {
            key: value for key, value in paper.items() if key not in ("layers", "checkpoints")
        }, name
        if "finetune" in entry:
            assert entry["layers"] == twins.LAYERS
            continue
        row = rows[entry["hub_id"]]
        assert entry["layers"] == depth(structure.transformers_config(row, **twins.tiny(row))), name
        for checkpoint in entry.get("checkpoints", []):
            if isinstance(checkpoint, dict):
                assert checkpoint in paper["checkpoints"] and rows[checkpoint["hub_id"]].revisions == ("main",)
            else:
                assert checkpoint in row.revisions, name
    assert rehearsal()["models"]["canine-s"]["layers"] == 6  # CANINE's 4 states beside its 2 deep layers
    assert len(rehearsal()["models"]["tinyllama-1.1b"]["checkpoints"]) == 3


def test_every_figure_keeps_models_and_its_settings():
    for kind, entry in PAPER["figures"].items():
        rehearsed = rehearsal()["figures"][kind]
        if isinstance(entry, dict) and "models" in entry:
            assert rehearsed["models"] and set(rehearsed["models"]) <= set(entry["models"]), kind
            assert {k: v for k, v in rehearsed.items() if k != "models"} == {
                k: v for k, v in entry.items() if k != "models"
            }
    assert rehearsal()["figures"]["id_estimators"]["models"] == ["pythia-1.4b"]  # its own, kept for it
    assert rehearsal()["claims"] == PAPER["claims"]


def test_a_model_without_a_row_is_named_with_the_fix():
    paper = copy.deepcopy(PAPER)
    paper["models"]["mamba-130m"] = {"hub_id": "state-spaces/mamba-130m-hf", "kind": "decoder", "layers": 24}
    with pytest.raises(ValueError, match=r"without a row in the model facts .*: \['state-spaces/mamba-130m-hf'\]"):
        preset.rehearsal_config(paper)


def test_a_new_way_of_loading_is_rehearsed_by_its_own_model():
    paper = copy.deepcopy(PAPER)
    paper["models"]["pythia-1b"]["weights"] = "pytorch"  # as pythia-2.8b's, now twice: still one representative
    paper["models"]["gpt2-bin"] = PAPER["models"]["gpt2"] | {"weights": "pytorch"}  # a variant of its own
    kept = preset.rehearsal_config(paper)["models"]
    assert "gpt2-bin" in kept and "pythia-1b" not in kept


def test_a_local_folders_model_is_left_out_and_its_figure_keeps_a_model_with_a_twin():
    paper = copy.deepcopy(PAPER)
    paper["models"]["my-model"] = {"path": "/a/saved/model", "kind": "decoder", "layers": 2}
    paper["figures"]["id_estimators"]["models"] = ["my-model", "pythia-1.4b"]
    rehearsed = preset.rehearsal_config(paper)
    assert "my-model" not in rehearsed["models"] and rehearsed["figures"]["id_estimators"]["models"] == ["pythia-1.4b"]


def test_a_figure_of_local_folders_models_only_is_left_out_and_named(tmp_path, capsys):
    paper = copy.deepcopy(PAPER)
    paper["models"]["my-model"] = {"path": "/a/saved/model", "kind": "decoder", "layers": 2}
    paper["figures"]["id_estimators"]["models"] = ["my-model"]
    paper["figures"]["profile_across_checkpoints"].append({"model": "my-model", "metric": "anisotropy"})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(paper, sort_keys=False))
    assert preset.main(["--configfile", str(tmp_path / "config.yaml"), "--output", str(tmp_path / "r.yaml")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "left out of the rehearsal (their models are local folders, which have no twins): "
        "['profile_across_checkpoints', 'id_estimators']"
    )
    rehearsed = yaml.safe_load((tmp_path / "r.yaml").read_text())
    assert "id_estimators" not in rehearsed["figures"]
    assert rehearsed["figures"]["profile_across_checkpoints"] == rehearsal()["figures"]["profile_across_checkpoints"]


def _named_models(figures: dict) -> list[str]:
    return sorted({model for _, _, names in preset._figure_lists(figures) for model in names})


@pytest.mark.slow  # a rehearsal config per example
@settings(max_examples=30)
@given(st.data())
def test_local_folders_models_leave_out_exactly_the_figure_items_that_name_no_other(data):
    paper = copy.deepcopy(PAPER)
    pairs = {model for pair in paper["rajaee_pilehvar"]["pairs"] for model in pair.values()}
    local = data.draw(st.sets(st.sampled_from([m for m in _named_models(paper["figures"]) if m not in pairs])))
    for model in local:
        paper["models"][model] = {"path": f"/saved/{model}", "kind": paper["models"][model]["kind"], "layers": 2}
    rehearsed = preset.rehearsal_config(paper)
    validate_config(copy.deepcopy(rehearsed))
    assert set(_named_models(rehearsed["figures"])) <= set(rehearsed["models"]) - local
    only_local = {figure for figure, _, names in preset._figure_lists(paper["figures"]) if set(names) <= local}
    assert set(preset.left_out_figures(paper, rehearsed)) == only_local


def test_the_sts_stand_in_is_read_as_sts_b_and_the_same_bytes_each_time(tmp_path):
    archive = media.stsb_archive(tmp_path / "Stsbenchmark.tar.gz")
    assert media.stsb_archive(tmp_path / "again.tar.gz").read_bytes() == archive.read_bytes()
    tar = tmp_path / "stsb.tar"
    tar.write_bytes(gzip.decompress(archive.read_bytes()))
    spec = PAPER["rajaee_pilehvar"]["datasets"]["stsb"] | {"gensim": False}
    train, dev = (datasets.read_split("stsb", spec, split, tar) for split in ("train", "dev"))
    assert (len(train), len(dev)) == (666, 333)  # SimLex-999: every third pair is dev
    assert train.score.between(0, 5).all() and train.iloc[0].to_dict() == {
        "text1": "old",
        "text2": "new",
        "score": 0.79,
    }


def test_a_fault_never_met_or_a_partial_download_fails_the_rehearsal(tmp_path, capsys):
    (tmp_path / "hub").mkdir()
    with LocalHub(tmp_path / "hub", faults=[Fault("/never/*", status=500)]) as hub:
        assert check_faults(hub, tmp_path / "hf-home", fresh=True) == 1  # an empty cache downloads every file
        assert check_faults(hub, tmp_path / "hf-home", fresh=False) == 0  # a rerun may download nothing
        (tmp_path / "hf-home/hub/models--a--b/blobs").mkdir(parents=True)
        (tmp_path / "hf-home/hub/models--a--b/blobs/0123.incomplete").write_bytes(b"part")
        assert check_faults(hub, tmp_path / "hf-home", fresh=False) == 1
    output = capsys.readouterr()
    assert "fault /never/* was never met" in output.err and "0123.incomplete" in output.err
    assert "its file was in the cache already" in output.out


def test_a_branch_that_does_not_exist_is_refused_naming_the_branches_there_are(monkeypatch, tmp_path):
    rows = structure.table()
    twins.publish(tmp_path / "hub", [rows["EleutherAI/pythia-70m"]])
    fresh_client(monkeypatch, tmp_path / "cache")
    with LocalHub(tmp_path / "hub") as hub:
        point_at(hub.endpoint, monkeypatch)
        with pytest.raises(Exception, match="step2000") as refused:
            pin(Checkpoint("pythia-70m", "step2000", "hub", "EleutherAI/pythia-70m", "step2000", 2000))
    assert "step1000" in str(refused.value)


# The fault phase (rehearsal/faults.py): its twins and its judgement, without Snakemake; `make rehearsal` runs it.
@pytest.fixture(scope="module")
def fault_hub(tmp_path_factory):
    """A hub folder with the twins the fault twins are made from, and the fault twins."""
    root = tmp_path_factory.mktemp("faults") / "hub"
    rows = structure.table()
    twins.publish(root, [rows[faults.PYTHIA], rows[faults.FALCON]])
    faults.publish(root)
    return root


def test_the_block_missing_twin_has_one_block_more_in_its_config_than_in_its_weights(fault_hub):
    branch = faults.fault_branch(fault_hub, faults.BLOCK_MISSING)
    source = faults.source_branch(fault_hub, faults.PYTHIA)
    blocks = json.loads((branch / "config.json").read_text())["num_hidden_layers"]
    assert blocks == json.loads((source / "config.json").read_text())["num_hidden_layers"] + 1 == 3
    for weights in ("model.safetensors", "pytorch_model.bin"):
        keys = (
            safe_open(branch / weights, "pt").keys()
            if weights.endswith(".safetensors")
            else torch.load(branch / weights, weights_only=True)
        )
        held = {int(match[1]) for key in keys if (match := re.match(r"gpt_neox\.layers\.(\d+)\.", key))}
        assert held == {0, 1}, weights
    assert faults.missing_block(branch) == "layers.2."
    config = faults.preset(rehearsal(), fault_hub, "results-faults")
    assert config["models"]["block-missing"]["layers"] == 3  # the preflight agrees with config.json


def test_the_shard_missing_twin_lists_a_shard_its_branch_lacks(fault_hub):
    branch = faults.fault_branch(fault_hub, faults.SHARD_MISSING)
    assert faults.missing_shards(branch) == ["model-00002-of-00002.safetensors"]
    assert (branch / "model-00001-of-00002.safetensors").is_file() and (branch / faults.SHARD_INDEX).is_file()
    assert faults.missing_shards(faults.source_branch(fault_hub, faults.FALCON)) == []


def test_the_blob_deleted_twin_is_its_source_whole(fault_hub):
    branch = faults.fault_branch(fault_hub, faults.BLOB_DELETED)
    source = faults.source_branch(fault_hub, faults.PYTHIA)
    assert {path.name: path.read_bytes() for path in branch.iterdir()} == {
        path.name: path.read_bytes() for path in source.iterdir()
    }


def test_the_fault_preset_is_valid_and_no_download_that_must_run_waits_for_another_scenario(fault_hub):
    config = validate_config(faults.preset(rehearsal(), fault_hub, "results-faults"))
    assert list(config["models"]) == [scenario.model for scenario in faults.SCENARIOS]
    assert {key: config[key] for key in ("corpus", "windows")} == {
        key: rehearsal()[key] for key in ("corpus", "windows")
    }
    assert config["extraction"] | {"dtype": None} == validate_config(copy.deepcopy(rehearsal()))["extraction"] | {
        "dtype": None
    }
    waiting = plan(config).download_gates(lambda checkpoint: True)
    assert (faults.BLOB_DELETED.model, faults.BRANCH) not in waiting  # its download must run in the first run
    assert (faults.BLOCK_MISSING.model, faults.BRANCH) not in waiting


def write_first_run(layout, *, messages: dict | None = None, made=()):
    """The logs a first run of the phase leaves, as it must end; `messages` replaces a scenario's failure line,
    `made` the files made that must not be."""
    receipt = layout.receipt(faults.BLOB_DELETED)
    lines = {
        (
            "extract_hidden_states",
            faults.BLOB_DELETED,
        ): f"model.safetensors: not in the Hugging Face cache as {receipt}",
        (
            "extract_hidden_states",
            faults.BLOCK_MISSING,
        ): "12 weights are missing from the checkpoint: gpt_neox.layers.2.*",
        ("pin_checkpoint", faults.SHARD_MISSING): "incomplete shard set: model-00002-of-00002.safetensors",
    }
    for (rule, scenario), line in lines.items():
        log = layout.log(rule, scenario)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"Traceback ...\n{FAILED}{(messages or {}).get(scenario.model, line)}\n")
    for path in made:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")


def judged(layout, fault_hub, capsys):
    verdicts = faults.judge_first_run(layout, fault_hub, layout.base / "hf-home", deleted=[Path("blob")])
    failed = faults.report(verdicts)
    return failed, capsys.readouterr()


def test_every_scenario_that_ends_as_expected_passes(tmp_path, fault_hub, capsys):
    layout = faults.Layout(tmp_path, "results-faults")
    write_first_run(layout)
    failed, output = judged(layout, fault_hub, capsys)
    assert failed == 0 and output.err == ""
    assert output.out.count("ended as expected") == 3


def test_a_scenario_whose_log_lacks_its_message_fails_the_rehearsal_naming_it(tmp_path, fault_hub, capsys):
    layout = faults.Layout(tmp_path, "results-faults")
    write_first_run(layout, messages={"block-missing": "CUDA out of memory"})
    layout.log("pin_checkpoint", faults.SHARD_MISSING).write_text("pinned\n")  # the pin did not fail
    failed, output = judged(layout, fault_hub, capsys)
    assert failed == 2
    assert "block-missing (config.json says one block more than its weights hold) did not end as expected" in output.err
    assert "without naming ['missing from the checkpoint', 'layers.2.']: CUDA out of memory" in output.err
    assert f"{FAILED}CUDA out of memory" in output.err  # its log's tail
    assert "shard-missing" in output.err and "ends without a `job failed:` line" in output.err
    assert "blob-deleted ended as expected" in output.out


def test_a_scenario_that_leaves_a_manifest_fails_the_rehearsal(tmp_path, fault_hub, capsys):
    layout = faults.Layout(tmp_path, "results-faults")
    manifest = layout.manifest(faults.BLOCK_MISSING)
    write_first_run(layout, made=[manifest, layout.lock(faults.SHARD_MISSING)])
    failed, output = judged(layout, fault_hub, capsys)
    assert failed == 2
    assert (
        "block-missing (config.json says one block more than its weights hold) did not end as expected: "
        f"{manifest} was made from the partial model"
    ) in output.err
    assert f"{layout.lock(faults.SHARD_MISSING)} was made from the partial model" in output.err


def test_a_shard_downloaded_or_a_blob_never_deleted_fails_the_rehearsal(tmp_path, fault_hub, capsys):
    layout = faults.Layout(tmp_path, "results-faults")
    write_first_run(layout)
    add_revision(
        tmp_path / "hf-home/hub", faults.SHARD_MISSING.repo, "main", {"model-00001-of-00002.safetensors": b"w"}
    )
    verdicts = faults.judge_first_run(layout, fault_hub, tmp_path / "hf-home", deleted=[])
    assert faults.report(verdicts) == 2
    err = capsys.readouterr().err
    assert "blob-deleted" in err and "no blob was deleted" in err
    assert "model-00001-of-00002.safetensors was made from the partial model" in err


def test_a_recovery_needs_a_zero_exit_its_manifest_and_a_new_download(tmp_path):
    log, manifest = tmp_path / "extract.log", tmp_path / "main.json"
    log.write_text("done\n")
    manifest.write_text("{}")
    assert faults.recovered(faults.BLOB_DELETED, 0, log, manifest, (1, 2)).failures == []
    assert faults.recovered(faults.BLOB_DELETED, 0, log, manifest, (1, 1)).failures == [
        "the second run did not download the deleted weight file again"
    ]
    manifest.unlink()
    log.write_text(f"{FAILED}not in the Hugging Face cache\n")
    failures = faults.recovered(faults.BLOB_DELETED, 1, log, manifest, (1, 2)).failures
    assert failures == [
        "the second run exited 1: not in the Hugging Face cache",
        f"the second run made no {manifest}",
    ]


def test_a_blob_is_deleted_once_its_receipt_is_written_and_not_before(tmp_path):
    hf_home = tmp_path / "hf-home"
    commit = add_revision(hf_home / "hub", "acme/tiny", "main", {"model.safetensors": b"weights", "config.json": b"{}"})
    lock, receipt = tmp_path / "lock.json", tmp_path / "receipt.json"
    lock.write_text(json.dumps({"location": "acme/tiny", "commit_sha": commit, "weights": {"model.safetensors": "x"}}))
    link = hf_home / "hub/models--acme--tiny/snapshots" / commit / "model.safetensors"
    deleter = faults.DeleteOnReceipt(receipt, lock, hf_home)
    deleter.start()
    time.sleep(0.05)
    assert link.resolve().is_file() and deleter.deleted == []
    receipt.write_text("{}")
    for _ in range(200):
        if deleter.deleted:
            break
        time.sleep(0.01)
    deleter.stop()
    assert deleter.deleted == [link.resolve()] and not link.exists()  # the link left dangling
    assert (link.parent / "config.json").resolve().is_file()


def test_a_failed_upstream_break_fails_the_rehearsal(tmp_path, capsys):
    (tmp_path / "hub").mkdir()
    with LocalHub(tmp_path / "hub") as hub:
        assert check_faults(hub, tmp_path / "hf-home", fresh=True, breaks="2 of 3 upstream breaks", broken=1) == 1
        assert check_faults(hub, tmp_path / "hf-home", fresh=True, breaks="3 of 3 upstream breaks") == 0
    output = capsys.readouterr()
    assert "1 upstream break(s) did not end as expected (above): 2 of 3 upstream breaks" in output.err
    assert output.out.strip().endswith("no partial download; 3 of 3 upstream breaks")
