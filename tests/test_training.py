"""Training the demo's byte-level models: saved checkpoints load offline, learn, and are reproducible."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer, BertModel, GPTNeoXModel

from shape_of_learning.models import ARCHITECTURES, training

TINY = dict(num_layers=2, d_model=32, num_heads=2, seq_len=32, batch_size=16, lr=3e-3, log_every=5)
ARCHS = {"gpt_neox": GPTNeoXModel, "bert": BertModel}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Repetitive UTF-8 prose with multi-byte characters: learnable within ~50 tiny steps."""
    path = tmp_path_factory.mktemp("corpus") / "clean.txt"
    path.write_text("The quick brown fox jumps over the lazy dog near the café. " * 200, encoding="utf-8")
    return path


def weights(checkpoint):
    return load_file(checkpoint / "model.safetensors")


def batch_loss(checkpoint, arch, corpus_path):
    """The objective on a fixed batch (same windows and masks for every checkpoint)."""
    head = AutoModelForCausalLM if arch == "gpt_neox" else AutoModelForMaskedLM
    model = head.from_pretrained(checkpoint, use_safetensors=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    hp = training.Hyperparameters(**TINY)
    ids = torch.tensor(list(corpus_path.read_bytes())) + (len(tokenizer) - 256)
    batch = training.sample_batch(arch, ids, tokenizer, hp, torch.Generator().manual_seed(123))
    with torch.no_grad():
        return model(**batch).loss.item()


@pytest.fixture(scope="module", params=list(ARCHS))
def trained(request, corpus, tmp_path_factory):
    arch = request.param
    out_root = tmp_path_factory.mktemp(arch)
    return arch, out_root, training.train(arch, corpus, out_root, [50, 0, 2, 10, 2], seed=1, **TINY)


@pytest.mark.slow  # trains a model: left out of `make check`
def test_saves_one_loadable_checkpoint_per_step(trained):
    arch, out_root, dirs = trained
    assert dirs == [out_root / f"step{step}" for step in (0, 2, 10, 50)]
    assert sorted(path.name for path in out_root.iterdir()) == ["step0", "step10", "step2", "step50"]  # no temp dirs
    for checkpoint in dirs:
        model = AutoModel.from_pretrained(checkpoint, use_safetensors=True)
        assert type(model) is ARCHS[arch]
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        inputs = tokenizer(["héllo"], return_tensors="pt", return_special_tokens_mask=True)
        expected_mask = [1] + [0] * 6 + ([] if arch == "gpt_neox" else [1])  # é is two bytes
        assert inputs.pop("special_tokens_mask").tolist() == [expected_mask]
        hidden = model(**inputs, output_hidden_states=True).hidden_states
        assert len(hidden) == TINY["num_layers"] + 1
        assert hidden[0].shape == (1, len(expected_mask), TINY["d_model"])
    metadata = json.loads((dirs[-1] / "training.json").read_text())
    assert (metadata["arch"], metadata["step"], metadata["seed"]) == (arch, 50, 1)
    assert metadata["hyperparameters"]["d_model"] == TINY["d_model"]


@pytest.mark.slow  # trains a model: left out of `make check`
def test_loss_decreases_and_weights_move(trained, corpus):
    arch, _, dirs = trained
    first, middle, last = (batch_loss(checkpoint, arch, corpus) for checkpoint in (dirs[0], dirs[2], dirs[3]))
    assert first > middle > last and last < 0.7 * first  # init is ~ln(vocab) = 5.6 nats
    before, after = weights(dirs[0]), weights(dirs[-1])
    assert before.keys() == after.keys()
    assert not any(torch.equal(before[name], after[name]) for name in before if name.endswith("dense.weight"))


@pytest.mark.slow  # trains a model: left out of `make check`
@pytest.mark.parametrize("arch", ARCHS)
def test_same_seed_same_weights(arch, corpus, tmp_path):
    run = lambda seed, name: training.train(arch, corpus, tmp_path / name, [3], seed=seed, **TINY)[0]  # noqa: E731
    a, b, c = weights(run(0, "a")), weights(run(0, "b")), weights(run(1, "c"))
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert not all(torch.equal(a[name], c[name]) for name in a)


def test_tokenizers_flag_special_tokens_and_match_training_ids():
    text = "a é"
    byte_ids = list(text.encode())  # 97, 32, 195, 169
    decoder = training.byte_tokenizer("gpt_neox", 16)
    encoded = decoder([text, "a"], padding=True, return_special_tokens_mask=True)
    offset = len(decoder) - 256
    assert encoded["input_ids"][0] == [decoder.bos_token_id] + [offset + b for b in byte_ids]
    assert encoded["special_tokens_mask"] == [[1, 0, 0, 0, 0], [1, 0, 1, 1, 1]]  # BOS and padding flagged
    assert decoder.decode(encoded["input_ids"][0], skip_special_tokens=True) == text

    encoder = training.byte_tokenizer("bert", 16)
    encoded = encoder([text], return_special_tokens_mask=True)
    offset = len(encoder) - 256
    assert encoded["input_ids"][0] == [encoder.cls_token_id] + [offset + b for b in byte_ids] + [encoder.sep_token_id]
    assert encoded["special_tokens_mask"][0] == [1, 0, 0, 0, 0, 1]
    assert encoder.mask_token_id not in encoded["input_ids"][0] and encoder.mask_token == "[MASK]"


def test_every_architecture_the_schema_accepts_has_its_row_of_facts():
    assert list(training.ARCHITECTURE_FACTS) == list(ARCHITECTURES)
    assert {
        arch: facts.around() for arch, facts in training.ARCHITECTURE_FACTS.items() if hasattr(facts, "around")
    } == {
        "gpt_neox": (["<|endoftext|>"], []),
        "bert": (["[CLS]"], ["[SEP]"]),
    }


def test_bert_masking_follows_80_10_10():
    hp = training.Hyperparameters(seq_len=512, batch_size=64)
    tokenizer = training.byte_tokenizer("bert", hp.seq_len)
    corpus_ids = torch.full((4096,), len(tokenizer) - 256 + ord("x"))
    batch = training.sample_batch("bert", corpus_ids, tokenizer, hp, torch.Generator().manual_seed(0))
    chosen = batch["labels"] != -100
    assert not chosen[:, [0, -1]].any()  # never CLS/SEP
    assert chosen.float().mean().item() == pytest.approx(0.15, abs=0.01)
    inputs = batch["input_ids"][chosen]
    assert (inputs == tokenizer.mask_token_id).float().mean().item() == pytest.approx(0.8, abs=0.02)
    assert (inputs == corpus_ids[0]).float().mean().item() == pytest.approx(0.1 + 0.1 / 256, abs=0.02)
    assert ((inputs >= len(tokenizer) - 256) | (inputs == tokenizer.mask_token_id)).all()  # no other specials


def test_learning_rate_warms_up_then_decays_to_the_floor():
    hp = training.Hyperparameters(lr=1.0, warmup_fraction=0.1, min_lr_fraction=0.1)
    rates = [training.learning_rate(step, 100, hp) for step in range(101)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert max(rates) == pytest.approx(1.0) and rates[100] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(rates[9:], rates[10:]))
    neox = training.Hyperparameters(lr=1.0, warmup_fraction=0.1, min_lr_fraction=0.1, zero_first_update=True)
    assert [training.learning_rate(step, 100, neox) for step in (0, 1, 9)] == pytest.approx([0.0, 0.1, 0.9])


def test_a_zero_first_update_saves_step1_byte_identical_to_step0_as_gpt_neox_does(corpus, tmp_path):
    """Pythia's step0 and step1 are one model (gpt-neox#1373): with zero_first_update the first update is at rate 0."""
    small = {**TINY, "batch_size": 4}
    step0, step1, step2 = training.train("gpt_neox", corpus, tmp_path, [0, 1, 2], zero_first_update=True, **small)
    assert (step0 / "model.safetensors").read_bytes() == (step1 / "model.safetensors").read_bytes()
    assert (step1 / "model.safetensors").read_bytes() != (step2 / "model.safetensors").read_bytes()
    plain = training.train("gpt_neox", corpus, tmp_path / "plain", [0, 1], **small)
    assert (plain[0] / "model.safetensors").read_bytes() != (plain[1] / "model.safetensors").read_bytes()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(arch="gpt2"), ValueError, "unknown arch 'gpt2'"),
        (dict(layers=4), TypeError, r"unknown hyperparameter\(s\) \['layers'\]; valid ones are \['num_layers'"),
        (dict(d_model=30, num_heads=4), ValueError, "divisible"),
        (dict(save_steps=[]), ValueError, "non-empty"),
        (dict(save_steps=[-1, 5]), ValueError, "integers >= 0"),
        (dict(batch_size=100_000), ValueError, "too little for a batch"),
    ],
)
def test_bad_arguments_raise_clear_errors(corpus, tmp_path, kwargs, error, message):
    arguments = dict(arch="bert", corpus=corpus, out_root=tmp_path, save_steps=[1]) | kwargs
    with pytest.raises(error, match=message):
        training.train(**arguments)


def test_rejects_non_utf8_corpus(tmp_path):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("café ".encode("latin-1") * 1000)
    with pytest.raises(ValueError, match="not UTF-8"):
        training.train("gpt_neox", corpus, tmp_path / "out", [1], **TINY)
