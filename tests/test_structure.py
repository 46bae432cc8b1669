"""The table of the paper's models' structure (rehearsal/structure.csv): a row for every Hub repository config.yaml
names, and each row's class and features as the pipeline's own code finds them in the architecture it describes."""

import copy
from pathlib import Path

import pytest
import torch
import yaml

from shape_of_learning.extraction.families import depth, model_class
from shape_of_learning.models.checkpoints import checkpoints
from shape_of_learning.rehearsal import structure

REPO = Path(__file__).resolve().parents[1]
MODELS = yaml.safe_load((REPO / "config.yaml").read_text())["models"]


def test_every_repository_of_the_paper_config_has_a_row_in_its_role():
    assert structure.missing(MODELS) == []
    rows = structure.table()
    assert {hub: rows[hub].role for hub in structure.repositories(MODELS)} == {
        hub: row.role for hub, row in rows.items()
    }
    assert len(rows) == 60  # 49 models' repositories, 7 TinyLlama checkpoints (one its model's), 4 Bloom tokenizers


def test_a_model_added_without_a_row_is_named():
    models = MODELS | {
        "new-model": {
            "hub_id": "acme/new-model",
            "kind": "decoder",
            "layers": 2,
            "checkpoints": [{"name": "a", "hub_id": "acme/new-model-step1", "revision": "main"}],
        },
        "new-bloom": {
            "hub_id": "bigscience/bloom-560m-intermediate",
            "tokenizer": "acme/tokenizer",
            "kind": "decoder",
            "layers": 24,
        },
    }
    assert structure.missing(models) == ["acme/new-model", "acme/new-model-step1", "acme/tokenizer"]


def _kinds() -> dict[str, tuple[str, str]]:
    kinds = {}
    for entry in MODELS.values():
        for item in [entry] + [item for item in entry.get("checkpoints") or [] if isinstance(item, dict)]:
            if item.get("hub_id"):
                kinds[item["hub_id"]] = (entry["kind"], entry.get("modality", "text"))
    return kinds


def test_each_row_is_the_architecture_the_pipeline_loads_with_the_features_it_has():
    kinds = _kinds()
    for hub, row in structure.table().items():
        if row.role == "tokenizer":
            continue
        config = structure.transformers_config(row)
        architecture, _, _ = model_class(copy.deepcopy(config), *kinds[hub])
        with torch.device("meta"):  # the published width, no memory: T5EncoderModel edits its config, hence the copy
            model = (
                architecture.from_config(copy.deepcopy(config))
                if hasattr(architecture, "from_config")
                else architecture(copy.deepcopy(config))
            )
        assert (type(model).__name__, structure.features_of(config, model)) == (row.loaded_as, row.features), hub


def test_features_tell_apart_what_the_pipeline_treats_apart():
    rows = structure.table()
    assert "final_norm" in rows["facebook/opt-125m"].features and "final_norm" not in rows["facebook/opt-350m"].features
    assert {"parallel_attention", "rotary", "untied_head"} <= rows["EleutherAI/pythia-70m"].features
    assert "alibi" in rows["bigscience/bloom-560m-intermediate"].features
    assert "batch_norm" in rows["microsoft/cvt-13"].features  # its convolutional projections' BatchNorm2d
    # CvT-13's 13 blocks (1, 2, 10 by stage) are its layers 0-12, taken by hooks: CvtModel returns the 3 stages
    assert depth(structure.transformers_config(rows["microsoft/cvt-13"])) == MODELS["cvt-13"]["layers"] == 12
    assert "batch_norm" not in rows["facebook/convnext-tiny-224"].features
    assert rows["bigscience/bloom-3b-intermediate"].preprocessor_repo == "bigscience/bloom-3b"
    assert rows["bigscience/bloom-3b-intermediate"].weight_files == ("pytorch_model.bin",)
    assert [hub for hub, row in rows.items() if row.gated] == [
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-13b-hf",
        "meta-llama/Llama-2-7b-chat-hf",
    ]


def test_every_configured_checkpoint_is_named_as_its_series_names_branches():
    rows = structure.table()
    for model, entry in MODELS.items():
        for checkpoint in checkpoints(model, entry) if entry.get("hub_id") else []:
            row = rows[checkpoint.location]
            assert row.names(checkpoint.revision), (model, checkpoint.revision, row.revision_naming)
    for row in rows.values():  # the twins' revisions too
        assert all(map(row.names, row.revisions)), row.hub_id
    assert not rows["EleutherAI/pythia-70m"].names("global_step1000")


def test_a_row_with_an_unknown_feature_is_refused_by_name(tmp_path, monkeypatch):
    lines = structure.TABLE.read_text().splitlines()
    (tmp_path / "structure.csv").write_text("\n".join([lines[0], lines[1].replace("tied_head", "tied_heads")]) + "\n")
    monkeypatch.setattr(structure, "TABLE", tmp_path / "structure.csv")
    structure.table.cache_clear()
    try:
        with pytest.raises(ValueError, match="google-bert/bert-base-uncased.*features among"):
            structure.table()
    finally:
        structure.table.cache_clear()
