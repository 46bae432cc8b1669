"""The rehearsal's preset (rehearsal/preset.py, presets/rehearsal.yaml), its STS-B stand-in (rehearsal/media.py) and
its faults (rehearsal/__main__.py); `make rehearsal` itself runs in CI (.ci/run)."""

import copy
import gzip

import pytest
import yaml

from shape_of_learning import DEFAULT_CONFIG, REPOSITORY
from shape_of_learning.extraction.families import depth
from shape_of_learning.models.checkpoints import Checkpoint
from shape_of_learning.models.pinning import pin
from shape_of_learning.rajaee_pilehvar import datasets
from shape_of_learning.rehearsal import media, preset, structure, twins
from shape_of_learning.rehearsal.__main__ import check_faults
from shape_of_learning.rehearsal.local_hub import Fault, LocalHub

from hf_cache import fresh_client, point_at

PAPER = yaml.safe_load((REPOSITORY / DEFAULT_CONFIG).read_text())
REHEARSAL = yaml.safe_load((REPOSITORY / preset.PRESET).read_text())


def test_the_committed_preset_is_written_from_config_yaml():
    assert preset.main(["--check"]) == 0, "rewrite it: python -m shape_of_learning.rehearsal.preset"


def test_every_way_of_loading_a_model_of_config_yaml_is_rehearsed():
    rows = structure.table()

    def variants(models):
        return {preset.variant(entry, rows[entry["hub_id"]]) for entry in models.values() if entry.get("hub_id")}

    rehearsed = {name: PAPER["models"][name] for name in REHEARSAL["models"]}  # as config.yaml lists its branches
    assert variants(PAPER["models"]) == variants(rehearsed)
    assert len(REHEARSAL["models"]) < len(PAPER["models"])  # Pythia's sizes, OPT's, ... by one each


def test_each_rehearsed_model_has_its_twins_depth_and_branches():
    rows = structure.table()
    for name, entry in REHEARSAL["models"].items():
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
    assert REHEARSAL["models"]["canine-s"]["layers"] == 6  # CANINE's 4 states beside its 2 deep layers
    assert len(REHEARSAL["models"]["tinyllama-1.1b"]["checkpoints"]) == 3


def test_every_figure_keeps_models_and_its_settings():
    for kind, entry in PAPER["figures"].items():
        rehearsed = REHEARSAL["figures"][kind]
        if isinstance(entry, dict) and "models" in entry:
            assert rehearsed["models"] and set(rehearsed["models"]) <= set(entry["models"]), kind
            assert {k: v for k, v in rehearsed.items() if k != "models"} == {
                k: v for k, v in entry.items() if k != "models"
            }
    assert REHEARSAL["figures"]["id_estimators"]["models"] == ["pythia-1.4b"]  # its own, kept for it
    assert REHEARSAL["claims"] == PAPER["claims"]


def test_a_model_without_a_row_is_named_with_the_fix():
    paper = copy.deepcopy(PAPER)
    paper["models"]["mamba-130m"] = {"hub_id": "state-spaces/mamba-130m-hf", "kind": "decoder", "layers": 24}
    with pytest.raises(ValueError, match=r"without a row in .*structure.csv: \['state-spaces/mamba-130m-hf'\]"):
        preset.rehearsal_config(paper)


def test_a_new_way_of_loading_is_rehearsed_by_its_own_model():
    paper = copy.deepcopy(PAPER)
    paper["models"]["pythia-1b"]["weights"] = "pytorch"  # as pythia-2.8b's, now twice: still one representative
    paper["models"]["gpt2-bin"] = PAPER["models"]["gpt2"] | {"weights": "pytorch"}  # a variant of its own
    kept = preset.rehearsal_config(paper)["models"]
    assert "gpt2-bin" in kept and "pythia-1b" not in kept


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
