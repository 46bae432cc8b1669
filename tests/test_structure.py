"""The model facts as the rehearsal reads them (models/facts.json through rehearsal/structure.py): a row for every Hub
repository the shipped models name (tests/shipped.py), and each row's class and features as the pipeline's own code
finds them in the architecture the row describes."""

import json

import pytest
import yaml

from shape_of_learning import DEFAULT_CONFIG, REPOSITORY
from shape_of_learning.extraction.families import depth
from shape_of_learning.models import facts
from shape_of_learning.models.checkpoints import checkpoints
from shape_of_learning.rehearsal import structure

import shipped

MODELS = shipped.models()
PYTHIA = [
    f"EleutherAI/pythia-{size}{dedup}"
    for size in ("70m", "160m", "410m", "1b", "1.4b", "2.8b")
    for dedup in ("", "-deduped")
]
TINYLLAMA = [
    "TinyLlama/TinyLlama-1.1B-step-50K-105b",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-240k-503b",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-715k-1.5T",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-955k-token-2T",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1195k-token-2.5T",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
]
# The class the extraction loads and the features the pipeline treats differently, of each shipped repository a
# model is loaded from: what extraction/families.py and extraction/batch_norm.py must go on finding
LOADED = {
    ("BertForMaskedLM", "tied_head"): ["google-bert/bert-base-uncased"],
    ("RobertaForMaskedLM", "tied_head"): ["FacebookAI/roberta-base"],
    ("AlbertForMaskedLM", "tied_head"): ["albert/albert-base-v2"],
    ("GPT2LMHeadModel", "final_norm;tied_head"): ["openai-community/gpt2"],
    ("OPTForCausalLM", "final_norm;tied_head"): [
        f"facebook/opt-{size}" for size in ("125m", "1.3b", "2.7b", "6.7b", "13b")
    ],
    ("OPTForCausalLM", "tied_head"): ["facebook/opt-350m"],
    ("LlamaForCausalLM", "final_norm;rotary;untied_head"): [
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-13b-hf",
        "meta-llama/Llama-2-7b-chat-hf",
        *TINYLLAMA,
    ],
    ("GPTJForCausalLM", "final_norm;parallel_attention;rotary;untied_head"): ["EleutherAI/gpt-j-6b"],
    ("FalconForCausalLM", "final_norm;parallel_attention;rotary;tied_head"): [
        "tiiuae/falcon-7b",
        "tiiuae/falcon-7b-instruct",
    ],
    ("GPTNeoXForCausalLM", "final_norm;parallel_attention;rotary;untied_head"): PYTHIA,
    ("BloomForCausalLM", "alibi;final_norm;tied_head"): [
        f"bigscience/bloom-{size}-intermediate" for size in ("560m", "1b1", "1b7", "3b")
    ],
    ("OlmoForCausalLM", "final_norm;rotary;tied_head"): ["allenai/OLMo-1B-hf"],
    ("T5EncoderModel", "encoder_decoder;final_norm"): ["google-t5/t5-base", "google/byt5-small", "google/byt5-base"],
    ("CanineModel", "canine_downsampling"): ["google/canine-s", "google/canine-c"],
    ("Wav2Vec2Model", "waveform_conv_encoder"): ["facebook/wav2vec2-base"],
    ("HubertModel", "waveform_conv_encoder"): ["facebook/hubert-base-ls960"],
    ("WhisperForAudioClassification", "encoder_decoder;final_norm;log_mel_frontend"): ["openai/whisper-base"],
    ("ViTModel", ""): ["google/vit-base-patch16-224", "facebook/deit-base-patch16-224"],
    ("BeitModel", ""): ["microsoft/beit-base-patch16-224"],
    ("CvtModel", "batch_norm"): ["microsoft/cvt-13"],
    ("SegformerModel", ""): ["nvidia/mit-b0"],
    ("ResNetModel", "batch_norm"): ["microsoft/resnet-50"],
    ("EfficientNetModel", "batch_norm"): ["google/efficientnet-b0"],
    ("ConvNextModel", ""): ["facebook/convnext-tiny-224"],
}


def test_every_repository_of_the_shipped_models_has_a_row_in_its_role():
    assert facts.missing(MODELS) == []
    rows = facts.table()
    named = facts.repositories(MODELS)
    assert {hub: rows[hub]["role"] for hub in named} == named
    assert len(named) == 60  # 49 models' repositories, 7 TinyLlama checkpoints (one its model's), 4 Bloom tokenizers
    configured = yaml.safe_load((REPOSITORY / DEFAULT_CONFIG).read_text())["models"]  # a user's additions with them
    assert set(rows) <= set(facts.repositories(configured)), "a row no model of config.yaml names"


def test_a_model_added_without_a_row_is_named_with_the_command_that_adds_it(monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # where a dry run runs: the table's path is shown from there
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
    assert facts.missing(models) == ["acme/new-model", "acme/new-model-step1", "acme/tokenizer"]
    assert facts.missing_lines(models, "my.yaml") == [
        (
            "new-model: no row in the model facts (src/shape_of_learning/models/facts.json) for acme/new-model, "
            "acme/new-model-step1: its cost is unknown and the rehearsal has no twin of it until `python -m "
            "shape_of_learning.models.facts add acme/new-model acme/new-model-step1 --configfile my.yaml` adds it"
        ),
        (
            "new-bloom: no row in the model facts (src/shape_of_learning/models/facts.json) for acme/tokenizer: the "
            "rehearsal has no twin of it until `python -m shape_of_learning.models.facts add acme/tokenizer "
            "--configfile my.yaml` adds it"
        ),
    ]


def test_each_row_is_the_architecture_the_pipeline_loads_with_the_features_it_has():
    rows = structure.table()
    found = {
        hub: (row.loaded_as, ";".join(sorted(row.features))) for hub, row in rows.items() if row.role != "tokenizer"
    }
    assert found == {hub: loaded for loaded, hubs in LOADED.items() for hub in hubs}
    kinds = {}  # each row's modality, and a text model's kind, as read from its published class: its entry's
    for entry in MODELS.values():
        for item in [entry] + [item for item in entry.get("checkpoints") or [] if isinstance(item, dict)]:
            if item.get("hub_id"):
                modality = entry.get("modality", "text")
                kinds[item["hub_id"]] = (entry["kind"] if modality == "text" else "encoder", modality)
    assert {hub: rows[hub].kind for hub in kinds} == kinds  # an image or audio model loads the same as any kind


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


@pytest.mark.parametrize(
    "change, message",
    [
        ({"role": "models"}, "role 'models' is none of"),
        ({"layout_checked": "yes"}, "layout_checked 'yes' is none of"),
        ({"weights_checked": "page"}, "weights_checked 'page' is none of"),
        ({"sizes": None}, "a model's row needs its architecture, sizes"),
    ],
)
def test_a_row_that_breaks_the_tables_rules_is_refused_by_name(tmp_path, monkeypatch, change, message):
    rows = json.loads(facts.TABLE.read_text())
    row = rows["google-bert/bert-base-uncased"] | change
    row = {key: value for key, value in row.items() if value is not None}
    (tmp_path / "facts.json").write_text(json.dumps({"google-bert/bert-base-uncased": row}))
    monkeypatch.setenv(facts.TABLE_VARIABLE, str(tmp_path / "facts.json"))
    with pytest.raises(ValueError, match=f"row google-bert/bert-base-uncased: {message}.*facts add google-bert"):
        facts.table()
