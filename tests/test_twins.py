"""The rehearsal's tiny twins (rehearsal/twins.py): for every row of the structure table a repository on the
series' branches, in its weight formats, that loads as the extraction loads the real model, with the real model's
features, its preprocessor, and the same bytes on every build."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from shape_of_learning.extraction.families import block_states, depth, model_class
from shape_of_learning.models import download
from shape_of_learning.models.checkpoints import Checkpoint
from shape_of_learning.models.pinning import pin
from shape_of_learning.rehearsal import structure, twins
from shape_of_learning.rehearsal.local_hub import LocalHub

from hf_cache import fresh_client, point_at


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """Every twin (~15 s)."""
    root = tmp_path_factory.mktemp("hub")
    twins.publish(root)
    return root


@pytest.fixture(scope="module")
def few(tmp_path_factory):
    """A step series, a sharded .bin-only model and a Bloom branch without a tokenizer."""
    root = tmp_path_factory.mktemp("few")
    rows = structure.table()
    twins.publish(
        root,
        [
            rows[hub_id]
            for hub_id in ("EleutherAI/pythia-70m", "facebook/opt-13b", "bigscience/bloom-560m-intermediate")
        ],
    )
    return root


def _inputs(row, preprocessor):
    if row.preprocessor in ("Wav2Vec2FeatureExtractor", "WhisperFeatureExtractor"):
        clip = np.sin(np.arange(16000) * 0.05).astype(np.float32)  # 1 s at 16 kHz
        return preprocessor(clip, sampling_rate=16000, return_tensors="pt")
    if "Image" in row.preprocessor:
        return preprocessor(Image.new("RGB", (40, 48), (120, 30, 200)), return_tensors="pt")
    return preprocessor(["Layers in the middle are anisotropic."], return_tensors="pt")


@pytest.mark.slow
def test_every_twin_loads_as_the_pipeline_loads_its_model_with_the_same_features(hub):
    import transformers

    auto = {
        "text": transformers.AutoTokenizer,
        "image": transformers.AutoImageProcessor,
        "audio": transformers.AutoFeatureExtractor,
    }
    for hub_id, row in structure.table().items():
        branches = sorted((hub / hub_id / "revisions").iterdir())
        assert [branch.name for branch in branches] == sorted(row.revisions), hub_id
        assert (hub / hub_id / "gated").exists() == row.gated, hub_id
        if row.role == "tokenizer":
            assert transformers.AutoTokenizer.from_pretrained(branches[0])("a b")["input_ids"], hub_id
            continue
        weights = sorted(path.name for path in branches[0].iterdir() if path.suffix in (".bin", ".safetensors"))
        assert weights == sorted(row.weight_files), hub_id
        config = transformers.AutoConfig.from_pretrained(branches[0])
        kind, modality = row.kind
        architecture, _, _ = model_class(config, kind, modality)
        model = architecture.from_pretrained(branches[0]).eval()
        assert (type(model).__name__, structure.features_of(config, model)) == (row.loaded_as, row.features), hub_id
        source = branches[0] if row.preprocessor_repo == hub_id else hub / row.preprocessor_repo / "revisions/main"
        preprocessor = auto[modality].from_pretrained(source)
        with torch.no_grad(), block_states(model) as blocks:  # CvT's blocks through hooks, as extraction reads them
            outputs = model(**_inputs(row, preprocessor), output_hidden_states=True)
        assert len(outputs.hidden_states if blocks is None else blocks) == depth(config) + 1, hub_id


def test_branches_hold_other_weights_and_every_build_the_same_bytes(few):
    hub = few
    row = structure.table()["EleutherAI/pythia-70m"]
    first, last = (hub / row.hub_id / "revisions" / name / "model.safetensors" for name in ("step0", "step143000"))
    assert first.read_bytes() != last.read_bytes()
    again = twins.branch_files(row, "step0")
    assert again["model.safetensors"] == first.read_bytes()
    assert again["pytorch_model.bin"] == (first.parent / "pytorch_model.bin").read_bytes()


def test_sharded_series_get_shards_and_their_index(few):
    hub = few
    branch = hub / "facebook/opt-13b/revisions/main"
    index = json.loads((branch / "pytorch_model.bin.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == [f"pytorch_model-0000{i}-of-00003.bin" for i in (1, 2, 3)]
    assert not (hub / "bigscience/bloom-560m-intermediate/revisions/global_step1000/tokenizer.json").exists()


def test_the_pipeline_pins_and_downloads_twins_through_the_hubs_client(few, monkeypatch, tmp_path):
    """The pin and download jobs' own code, huggingface_hub against the local Hub serving the twins."""

    rows = structure.table()
    twins.publish(few, [rows["bigscience/bloom-560m"], rows["meta-llama/Llama-2-7b-hf"]])
    fresh_client(monkeypatch, tmp_path / "cache")
    with LocalHub(few) as hub:
        point_at(hub.endpoint, monkeypatch)
        checkpoint = Checkpoint(
            "bloom", "global_step10000", "hub", "bigscience/bloom-560m-intermediate", "global_step10000", 10000
        )
        lock = pin(checkpoint)
        receipt = download.download(lock, {"tokenizer": "bigscience/bloom-560m", "weights": "auto"})
        sharded = pin(Checkpoint("opt", "main", "hub", "facebook/opt-13b", "main", -1))
        # its listing is public, its shard index is not: the pin itself refuses (test_download: the download's refusal)
        with pytest.raises(PermissionError, match="Llama-2-7b-hf is gated: accept its conditions"):
            pin(Checkpoint("llama", "main", "hub", "meta-llama/Llama-2-7b-hf", "main", -1))
    # Bloom: the branch's .bin, its tokenizer from the base repository; OPT-13b: its three .bin shards
    assert (lock["weights_format"], sorted(receipt["files"])) == ("pytorch", ["config.json", "pytorch_model.bin"])
    assert (
        receipt["tokenizer"]["location"] == "bigscience/bloom-560m"
        and "tokenizer.json" in receipt["tokenizer"]["files"]
    )
    assert sorted(sharded["weights"]) == [f"pytorch_model-0000{i}-of-00003.bin" for i in (1, 2, 3)]
