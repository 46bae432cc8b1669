"""A model is loaded whole or not at all (extraction/loading.py): tiny twins of the paper's models
(rehearsal/twins.py) broken the ways upstream repositories break, loaded through `load_model` as the extraction
loads them."""

import json
from types import SimpleNamespace

import pytest
import torch
import transformers
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from shape_of_learning.extraction import families
from shape_of_learning.extraction.families import OUTSIDE_HIDDEN_STATES, component, model_class
from shape_of_learning.extraction.loading import _grouped, check_whole, load_model
from shape_of_learning.rehearsal import structure, twins
from shape_of_learning.rehearsal.local_hub import add_branch

ROWS = structure.table()
MODELS = [row for row in ROWS.values() if row.role == "model"]


def twin(root, hub_id: str):
    """The folder of one branch of `hub_id`'s twin (its first revision), loadable as a local checkpoint."""
    row = ROWS[hub_id]
    return add_branch(root, hub_id, row.revisions[0], twins.branch_files(row, row.revisions[0]))


def load(folder, hub_id: str, head: bool = True):
    """`load_model` on a twin's folder, as the extraction calls it: the model, its inputs' device, loss and reason."""
    row = ROWS[hub_id]
    kind, modality = row.kind
    weights = "safetensors" if any(name.endswith(".safetensors") for name in row.weight_files) else "pytorch"
    config = transformers.AutoConfig.from_pretrained(folder)
    return load_model(
        str(folder), None, config, torch.float32, "cpu", False, weights, hub_id, kind=kind, modality=modality, head=head
    )


def edit_config(folder, **changes) -> None:
    path = folder / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def edit_weights(folder, change) -> None:
    """Rewrite the twin's model.safetensors with `change(state)` (its .bin is not read: safetensors are pinned)."""
    path = folder / "model.safetensors"
    save_file(change(load_file(path)), path, metadata={"format": "pt"})


def hidden_states(model, vocab: int) -> tuple:
    with torch.no_grad():
        return model(input_ids=torch.arange(12)[None] % vocab, output_hidden_states=True).hidden_states


# (repository, its config's layer count key, the block's weights named as missing (the model's names) and as
# unexpected (the checkpoint's)): a decoder, an encoder, GPT-2, Whisper's encoder beside its decoder, PyTorch weights
BLOCKS = [
    ("EleutherAI/pythia-70m", "num_hidden_layers", "gpt_neox.layers.2.*", "gpt_neox.layers.1.*"),
    ("google-bert/bert-base-uncased", "num_hidden_layers", "bert.encoder.layer.2.*", "bert.encoder.layer.1.*"),
    ("openai-community/gpt2", "n_layer", "transformer.h.2.*", "transformer.h.1.*"),
    ("openai/whisper-base", "encoder_layers", "encoder.layers.2.*", "model.encoder.layers.1.*"),
    ("facebook/opt-125m", "num_hidden_layers", "model.decoder.layers.2.*", "model.decoder.layers.1.*"),  # .bin only
]


@pytest.mark.parametrize(("hub_id", "key", "missing", "unexpected"), BLOCKS)
def test_a_config_with_one_block_more_than_the_weights_fails_naming_the_missing_block(
    tmp_path, hub_id, key, missing, unexpected
):
    folder = twin(tmp_path, hub_id)
    edit_config(folder, **{key: twins.LAYERS + 1})
    with pytest.raises(ValueError, match="missing from the checkpoint") as error:
        load(folder, hub_id)
    message = str(error.value)
    assert missing in message and hub_id in message and str(folder) in message, message
    assert "config.json and its weights disagree" in message and "pick another revision" in message, message
    assert "not in the model:" not in message, message  # the declared decoder, projector and classifier are no fault


@pytest.mark.parametrize(("hub_id", "key", "missing", "unexpected"), BLOCKS)
def test_weights_with_one_block_more_than_the_config_fail_naming_the_block_the_model_lacks(
    tmp_path, hub_id, key, missing, unexpected
):
    folder = twin(tmp_path, hub_id)
    edit_config(folder, **{key: twins.LAYERS - 1})
    with pytest.raises(ValueError, match="not in the model") as error:
        load(folder, hub_id, head=False)
    assert unexpected in str(error.value) and "missing from the checkpoint" not in str(error.value), str(error.value)


def test_weights_of_another_shape_fail_naming_them(tmp_path):
    folder = twin(tmp_path, "EleutherAI/pythia-70m")
    edit_config(folder, intermediate_size=twins.FFN // 2)
    with pytest.raises(ValueError, match=r"another shape in the checkpoint: gpt_neox\.layers\.0\.mlp\.dense_4h_to_h"):
        load(folder, "EleutherAI/pythia-70m")


@pytest.mark.parametrize(
    ("hub_id", "loss", "note"),
    [
        (
            "EleutherAI/pythia-70m",
            "next-token",
            "the checkpoint has no next-token head (missing weights: lm_head.weight)",
        ),
        (
            "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
            "next-token",
            "the checkpoint has no next-token head (missing weights: lm_head.weight)",
        ),
        (
            "google-bert/bert-base-uncased",
            "masked-lm",
            "the checkpoint has no masked-lm head (missing weights: cls.predictions.bias, cls.predictions.decoder.bias",
        ),
    ],
)
def test_a_checkpoint_without_its_loss_head_loads_with_the_loss_note_and_the_same_hidden_states(
    tmp_path, hub_id, loss, note
):
    whole, headless = twin(tmp_path / "whole", hub_id), twin(tmp_path / "headless", hub_id)
    head = OUTSIDE_HIDDEN_STATES[ROWS[hub_id].model_type].head
    edit_weights(headless, lambda state: {k: v for k, v in state.items() if component(k, "") not in head})
    model, _, kind, reason = load(whole, hub_id)
    assert (kind, reason) == (loss, "")
    bare, _, no_loss, why = load(headless, hub_id)
    assert no_loss is None and why.startswith(note), why
    for ours, theirs in zip(
        hidden_states(model, model.config.vocab_size), hidden_states(bare, model.config.vocab_size)
    ):
        assert torch.equal(ours, theirs)


def test_a_block_missing_beside_a_missing_head_still_fails(tmp_path):
    folder = twin(tmp_path, "EleutherAI/pythia-70m")
    edit_weights(
        folder, lambda state: {k: v for k, v in state.items() if not k.startswith(("lm_head", "gpt_neox.layers.1."))}
    )
    with pytest.raises(ValueError, match=r"missing from the checkpoint: gpt_neox\.layers\.1\.\* \(\d+ weights\)\."):
        load(folder, "EleutherAI/pythia-70m")


def test_what_real_checkpoints_carry_beyond_the_class_loads(tmp_path):
    """bert-base-uncased's NSP head and pooler, which BertForMaskedLM does not build; a ViTForImageClassification
    checkpoint's classifier, without the pooler ViTModel builds; roberta-base's pooler."""
    bert = twin(tmp_path, "google-bert/bert-base-uncased")
    width = twins.WIDTH
    edit_weights(
        bert,
        lambda state: (
            state
            | {
                "cls.seq_relationship.weight": torch.zeros(2, width),
                "cls.seq_relationship.bias": torch.zeros(2),
                "bert.pooler.dense.weight": torch.zeros(width, width),
                "bert.pooler.dense.bias": torch.zeros(width),
            }
        ),
    )
    assert load(bert, "google-bert/bert-base-uncased")[2:] == ("masked-lm", "")
    assert load(bert, "google-bert/bert-base-uncased", head=False)[2] is None
    roberta = twin(tmp_path, "FacebookAI/roberta-base")
    edit_weights(roberta, lambda state: state | {"roberta.pooler.dense.weight": torch.zeros(width, width)})
    assert load(roberta, "FacebookAI/roberta-base")[2:] == ("masked-lm", "")
    vit = twin(tmp_path, "google/vit-base-patch16-224")
    edit_weights(
        vit,
        lambda state: (
            {f"vit.{k}": v for k, v in state.items() if not k.startswith("pooler.")}
            | {"classifier.weight": torch.zeros(1000, width), "classifier.bias": torch.zeros(1000)}
        ),
    )
    model = load(vit, "google/vit-base-patch16-224")[0]
    assert type(model).__name__ == "ViTModel"
    gpt2 = twin(tmp_path, "openai-community/gpt2")  # a tied head: GPT-2's own weights hold none, its embeddings serve
    edit_weights(gpt2, lambda state: {k: v for k, v in state.items() if not k.startswith("lm_head.")})
    assert load(gpt2, "openai-community/gpt2")[2:] == ("next-token", "")


def test_a_family_not_in_the_table_loads_only_whole(tmp_path, monkeypatch):
    folder = twin(tmp_path, "EleutherAI/pythia-70m")
    monkeypatch.delitem(families.OUTSIDE_HIDDEN_STATES, "gpt_neox")
    assert load(folder, "EleutherAI/pythia-70m")[2] == "next-token"  # the checkpoint holds the class's weights
    with pytest.raises(ValueError, match=r"not in the model: lm_head\.weight\. Family 'gpt_neox' is not in .*"):
        load(folder, "EleutherAI/pythia-70m", head=False)  # GPTNeoXModel has no head
    with pytest.raises(ValueError, match="OUTSIDE_HIDDEN_STATES in shape_of_learning/extraction/families.py"):
        load(folder, "EleutherAI/pythia-70m", head=False)


def test_the_table_covers_every_family_of_the_structure_table():
    assert {row.model_type for row in MODELS} <= set(OUTSIDE_HIDDEN_STATES)
    assert [component(key, "bert") for key in ("bert.pooler.dense.weight", "cls.predictions.bias")] == ["pooler", "cls"]
    assert component("model.decoder.layers.0.fc1.weight", "model") == "decoder"


def test_weights_are_named_in_groups_by_their_block_and_counted():
    keys = [f"gpt_neox.layers.{i}.attention.dense.{p}" for i in (10, 2) for p in ("weight", "bias")] + [
        "lm_head.weight"
    ]
    assert _grouped(keys) == ("gpt_neox.layers.2.* (2 weights), gpt_neox.layers.10.* (2 weights), lm_head.weight")
    many = [f"h.{i}.mlp.weight" for i in range(7)]
    assert (
        _grouped(many)
        == "h.0.mlp.weight, h.1.mlp.weight, h.2.mlp.weight, h.3.mlp.weight, and 3 more groups (3 weights)"
    )
    assert _grouped(["cls.predictions.bias", "cls.predictions.decoder.bias"]) == "cls.predictions.* (2 weights)"


@pytest.mark.slow
def test_every_model_of_the_structure_table_loads_clean_with_and_without_its_head(tmp_path):
    """Every twin of a `model` row (the real model's class, features and weight formats; 5-15 s, built one by one)
    passes the check with its loss head and without; none loses its loss to a missing head."""
    for row in MODELS:
        folder = twin(tmp_path, row.hub_id)
        config = transformers.AutoConfig.from_pretrained(folder)
        for head in (True, False):
            model, _, loss, reason = load(folder, row.hub_id, head=head)
            assert not head or type(model).__name__ == row.loaded_as, row.hub_id
            assert loss == model_class(config, *row.kind, head=head)[1], (row.hub_id, head)
            assert not reason.startswith("the checkpoint has no"), (row.hub_id, head, reason)


# --- the rule itself, over generated loading reports ---

FAMILY = "bert"  # its loss head `cls`, its pooler outside the hidden states; `encoder` and `embeddings` inside
PARTS = {"head": "cls", "other": "pooler", "inside": "encoder"}
REPORTED = st.lists(st.tuples(st.sampled_from(sorted(PARTS)), st.integers(0, 11)), max_size=6, unique=True)


@given(missing=REPORTED, unexpected=REPORTED, prefixed=st.booleans())
def test_a_load_fails_exactly_where_a_weight_inside_the_hidden_states_is_missing_or_extra(
    missing, unexpected, prefixed
):
    model = SimpleNamespace(config=SimpleNamespace(model_type=FAMILY), base_model_prefix="bert")

    def key(part: str, index: int) -> str:
        inside = PARTS[part] != "cls"  # the head lies beside the base model, the others in it
        return f"{'bert.' if prefixed and inside else ''}{PARTS[part]}.layer.{index}.weight"

    info = {"missing_keys": [key(*k) for k in missing], "unexpected_keys": [key(*k) for k in unexpected]}
    inside = [k for k in missing + unexpected if k[0] == "inside"]
    if inside:
        with pytest.raises(ValueError, match=r"refused to load .* as SimpleNamespace"):
            check_whole(model, info, "m/c", "acme/m")
    else:
        assert check_whole(model, info, "m/c", "acme/m") == sorted(key(*k) for k in missing if k[0] == "head")


def test_auto_gives_float32_to_a_family_float16_cannot_hold_and_float16_is_refused_for_it(monkeypatch):
    """On a GPU without bfloat16 (the capability stubbed), auto is float16, but float32 for EfficientNet, whose
    random-init states fall below float16's range; float16 asked for it is refused, naming why."""
    from shape_of_learning.extraction.loading import device_and_dtype

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    assert device_and_dtype("auto", "cuda", "vit") == ("cuda", torch.float16)
    assert device_and_dtype("auto", "cuda", "efficientnet") == ("cuda", torch.float32)
    assert device_and_dtype("float32", "cuda", "efficientnet") == ("cuda", torch.float32)
    with pytest.raises(ValueError, match=r"^dtype float16 is refused for efficientnet: .*below float16's"):
        device_and_dtype("float16", "cpu", "efficientnet")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    assert device_and_dtype("auto", "cuda", "efficientnet") == ("cuda", torch.bfloat16)  # float32's exponent range


def test_a_random_efficientnet_in_float16_loses_its_states_which_is_why_auto_avoids_it():
    """The reason FLOAT16_UNDERFLOWS holds EfficientNet: at transformers' initialisation its blocks' states shrink
    below float16's smallest value, and a float16 pass returns zeros where float32 does not."""
    torch.manual_seed(0)
    config = transformers.EfficientNetConfig(
        image_size=64, width_coefficient=0.25, depth_coefficient=0.5, hidden_dim=320
    )
    model = transformers.EfficientNetModel(config).eval()
    pixels = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        full = model(pixel_values=pixels, output_hidden_states=True).hidden_states
        half = model.half()(pixel_values=pixels.half(), output_hidden_states=True).hidden_states
    # default batch-norm statistics here (extraction estimates them, which slows the shrinking): float32 holds
    # blocks 1-5 (down to about 1e-37), float16 none of them
    assert [int(state.abs().max() > 0) for state in full[:6]] == [1] * 6
    assert [int(state.abs().max() > 0) for state in half[:6]] == [1, 0, 0, 0, 0, 0]
    assert "efficientnet" in families.FLOAT16_UNDERFLOWS
