"""extraction.positions_per_window: the text models of the Godey figure draw k tokens from each window, so that a
byte-level model's vectors come from as many windows as a subword model's (docs/godey.md)."""

import math
from pathlib import Path

import gensim
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from shape_of_learning.experiment.config import (
    ConfigError,
    extraction_settings,
    load_config,
    positions_setting,
    validate_config,
)
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.inputs import per_item_positions, plan_windows
from shape_of_learning.extraction.shards import read_shard
from shape_of_learning.metrics.batches import compute_metrics
from shape_of_learning.models.checkpoints import checkpoints
from test_extract import MINILM
from test_modality import save

# real English news text shipped in gensim's wheel, cut into windows as the corpus stage cuts enwik8
REPO = Path(__file__).resolve().parents[1]
TINY_WIDTH = dict(num_attention_heads=2, intermediate_size=64)
NEWS = " ".join((Path(gensim.__file__).parent / "test" / "test_data" / "lee_background.cor").read_text().split())


def news_windows(count: int, chars: int) -> list[str]:
    return [NEWS[i * chars : (i + 1) * chars] for i in range(count)]


def kept_windows(out_dir: Path, layer: int = 0):
    """Per window, in order, the number of its vectors the layer's shard holds."""
    windows = pq.read_table(out_dir / f"layer_{layer}.parquet", columns=["window"]).column(0).to_numpy()
    index, counts = np.unique(windows, return_counts=True)
    return index.tolist(), counts.tolist()


def test_a_byte_level_and_a_subword_model_draw_their_tokens_from_the_same_windows(tmp_path):
    """A 200-character window is 200 ByT5 bytes and about 40 WordPiece tokens: with every token of the first
    windows, 96 tokens come from 1 window for the byte-level model and 3 for the subword one; with 8 per window,
    both from windows 0-11, 8 each, the same share of same-window pairs: 12 * 8 * 7 / (96 * 95)."""
    config = transformers.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, vocab_size=384)
    byte_level = save(transformers.T5EncoderModel(config), transformers.ByT5Tokenizer(), tmp_path / "byt5", 2, "text")
    wordpiece = transformers.AutoTokenizer.from_pretrained(checkpoints("minilm", MINILM)[0].location)
    bert = transformers.BertConfig(vocab_size=len(wordpiece), hidden_size=32, num_hidden_layers=2, **TINY_WIDTH)
    subword = save(transformers.BertModel(bert), wordpiece, tmp_path / "bert", 2, "text")
    windows = news_windows(16, 200)
    manifests = {}
    for name, entry in (("bytes", byte_level), ("subword", subword)):
        entry = {**entry, "max_length": 256, "batch_size": 16}
        [checkpoint] = checkpoints(name, entry)
        for k in (None, 8):
            out = tmp_path / f"{name}_{k}"
            manifests[name, k] = extract(
                checkpoint, entry, windows, 96, out, store_dtype="float32", positions_per_item=k
            )
            assert kept_windows(out, 0) == kept_windows(out, 2)  # every layer, the same windows
    assert kept_windows(tmp_path / "bytes_8") == kept_windows(tmp_path / "subword_8") == (list(range(12)), [8] * 12)
    assert kept_windows(tmp_path / "bytes_None") == ([0], [96])
    assert kept_windows(tmp_path / "subword_None")[0] == [0, 1, 2]
    shares = {key: manifest["same_item_pair_share"] for key, manifest in manifests.items()}
    assert shares["bytes", 8] == shares["subword", 8] == round(12 * 8 * 7 / (96 * 95), 6)
    assert shares["bytes", None] == 1.0 and shares["subword", None] < 0.5
    assert {manifests[name, 8]["positions_per_item"] for name in ("bytes", "subword")} == {8}
    # the k bytes kept of a window are the byte-level model's own vectors of that window at their positions
    vectors, _ = read_shard(tmp_path / "bytes_8" / "layer_2.parquet")
    index = pq.read_table(tmp_path / "bytes_8" / "layer_2.parquet", columns=["window", "position"]).to_pandas()
    model = transformers.T5EncoderModel.from_pretrained(byte_level["path"]).eval()
    with torch.no_grad():
        last = model(**transformers.ByT5Tokenizer()(windows[:1], return_tensors="pt"), output_hidden_states=True)
    first = (index["window"] == 0).to_numpy()
    expected = last.hidden_states[2][0, index.loc[first, "position"].tolist()]
    np.testing.assert_allclose(vectors[first], expected.numpy(), rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def minilm_states():
    """MiniLM's last-layer vectors of 48 windows of 400 characters (about 83 tokens each), and which positions are
    real tokens ([CLS], [SEP] and padding are not)."""
    location = checkpoints("minilm", MINILM)[0].location
    tokenizer = transformers.AutoTokenizer.from_pretrained(location)
    model = transformers.AutoModel.from_pretrained(location).eval()
    encoded = tokenizer(news_windows(48, 400), return_tensors="pt", padding=True, truncation=True, max_length=128)
    with torch.inference_mode():
        states = model(**encoded).last_hidden_state.double()
    real = encoded["attention_mask"].bool()
    real[:, 0] = False
    real[torch.arange(len(real)), encoded["attention_mask"].sum(1) - 1] = False
    return states, real


def test_the_windows_a_batch_draws_from_no_longer_move_the_average_cosine(minilm_states):
    """One model, two tokenizations of the same windows: all its tokens (about 83 a window), and every fourth (about
    21), as a model with a 4x coarser tokenizer would read them. Every token of the first windows draws 768 vectors
    from 10 and 38 windows: the average cosine differs by many batch std (0.102 +- 0.003 against 0.066 +- 0.004),
    though nothing but the sampling differs. 16 per window draws both from the same 48 windows: they agree within a
    batch std (0.060 +- 0.004 and 0.062 +- 0.003)."""
    states, real = minilm_states
    coarse = real & (torch.arange(real.shape[1]) % 4 == 0)
    n_tokens, k = 768, 16

    def first_windows(candidates):  # extraction without k: every token of the first windows, in order
        keep, total = torch.zeros_like(candidates), 0
        for window, row in enumerate(candidates):
            positions = row.nonzero()[:, 0][: n_tokens - total]
            keep[window, positions], total = True, total + len(positions)
        assert total == n_tokens
        return keep

    def cosine(keep):
        summary = compute_metrics(states[keep].numpy(), ["avg_cosine"], batch_size=192, n_batches=4).summary()
        return float(summary["mean"].iloc[0]), float(summary["std"].iloc[0]), int(keep.any(1).sum())

    today = [cosine(first_windows(candidates)) for candidates in (real, coarse)]
    windows = torch.arange(len(real))
    drawn = [cosine(per_item_positions([candidates], windows, k, n_tokens)[0]) for candidates in (real, coarse)]
    assert [windows for _, _, windows in today] == [10, 38] and [windows for _, _, windows in drawn] == [48, 48]
    (fine, fine_std, _), (coarser, coarse_std, _) = today
    assert fine - coarser > 4 * max(fine_std, coarse_std)
    (fine, fine_std, _), (coarser, coarse_std, _) = drawn
    assert abs(fine - coarser) < min(fine_std, coarse_std)


class CountingTokenizer:
    """A tokenizer whose window i is `lengths[i]` tokens, none special."""

    def __init__(self, lengths: list[int]):
        self.lengths = lengths

    def __call__(self, windows, **_):
        lengths = [self.lengths[int(window)] for window in windows]
        return {"input_ids": [[1] * n for n in lengths], "special_tokens_mask": [[0] * n for n in lengths]}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40), st.integers(1, 6), st.integers(1, 30))
def test_k_per_window_plans_the_first_windows_of_at_least_k_tokens(lengths, k, n_tokens):
    """The plan is the first ceil(n_tokens / k) windows of at least k tokens, whole (k of each are drawn later), or
    a refusal where the windows hold fewer."""
    windows = [str(i) for i in range(len(lengths))]
    long_enough = [i for i, n in enumerate(lengths) if n >= k]
    needed = math.ceil(n_tokens / k)
    if len(long_enough) < needed:
        with pytest.raises(
            ValueError, match=f"{len(long_enough)} windows of at least {k} tokens.*positions_per_window"
        ):
            plan_windows(CountingTokenizer(lengths), windows, n_tokens, 64, True, "m", chunk=7, per_window=k)
        return
    plan = plan_windows(CountingTokenizer(lengths), windows, n_tokens, 64, True, "m", chunk=7, per_window=k)
    assert [window for window, _, _ in plan] == long_enough[:needed]
    assert all(kept == list(range(lengths[window])) for window, _, kept in plan)


def test_the_godey_figure_s_text_models_share_k_per_window_and_the_others_keep_their_protocol():
    """In the paper's config every text model of the Godey figure (BERT and GPT-2, in Figure 1 too) reads 128 tokens
    per window; a text model only in the Razzhigaev figures keeps every token; image models their k per image."""
    config = load_config(REPO / "config.yaml")  # not the working directory: another test module may have changed it
    godey = config["figures"]["profile_by_modality"]["models"]
    text = [model for model in godey if config["models"][model]["modality"] == "text"]
    assert {"byt5-small", "canine-s", "t5-base", "bert-base-uncased", "gpt2"} <= set(text)
    for model in text:
        assert extraction_settings(config, model, "text")["positions_per_window"] == 128
        assert "positions_per_image" not in extraction_settings(config, model, "text")
    assert positions_setting(config, "opt-125m", "text") is None
    assert not {"positions_per_window", "positions_per_image"} & set(extraction_settings(config, "opt-125m", "text"))
    assert positions_setting(config, "resnet-50", "image") == "positions_per_image"
    assert positions_setting(config, "whisper-base", "audio") is None
    with pytest.raises(ConfigError, match="positions_per_window"):
        validate_config({**config, "extraction": {**config["extraction"], "positions_per_window": 0}})
