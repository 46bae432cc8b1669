"""Character-level, speech and vision models through the same extraction the workflow runs: tiny random models saved
locally, real digit images (scikit-learn), generated audio. Expected counts come from the models' own forward pass."""

import functools
import io
import json
import wave
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import transformers

from shape_of_learning.corpus.media import decode_audio, read_media, sample_media, write_media
from shape_of_learning.experiment.config import validate_config, validate_model_entry
from shape_of_learning.extraction.families import depth, last_layer_after_final_norm, model_class, random_model
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.inputs import as_tokens
from shape_of_learning.extraction.loading import parameter_count
from shape_of_learning.extraction.shards import read_shard
from shape_of_learning.models.checkpoints import checkpoints, random_init


def media_spec(fields: dict) -> dict:
    """An image_corpus / audio_corpus entry as the workflow hands it over: validated, defaults filled."""
    config = validate_config(
        {
            "corpus": {"name": "c"},
            "windows": {},
            "figures": {},
            "image_corpus": {"name": "m", **fields},
            "models": {"m": {"hub_id": "a/b", "kind": "encoder", "layers": 1}},
        }
    )
    return config["image_corpus"]


WINDOWS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Anisotropy in character-level models.",
    "Byte-level models read UTF-8: naïve café.",
] * 4
TINY = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64)


def wav(seconds: float, rate: int = 8000, frequency: float = 440.0) -> bytes:
    """A 16-bit PCM WAV file of a sine tone (8 kHz, so extraction must resample to 16 kHz)."""
    samples = (0.5 * np.sin(2 * np.pi * frequency * np.arange(int(seconds * rate)) / rate) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as clip:
        clip.setnchannels(1), clip.setsampwidth(2), clip.setframerate(rate)
        clip.writeframes(samples.tobytes())
    return buffer.getvalue()


def save(model, preprocessor, directory, layers, modality):
    torch.manual_seed(0)
    model.save_pretrained(directory)
    preprocessor.save_pretrained(directory)
    return validate_model_entry(
        {
            "path": str(directory),
            "kind": "encoder",
            "layers": layers,
            "modality": modality,
            "batch_size": 3,
            "max_length": 64,
        }
    )


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    frame = sample_media(media_spec({"sklearn_digits": True, "count": 40, "seed": 0}), "image")
    path = tmp_path_factory.mktemp("corpus") / "items.parquet"
    write_media(frame, path)
    return read_media(path)


def run(entry, items, n_tokens, out_dir, **kwargs):
    [checkpoint] = checkpoints("tiny", entry)
    return extract(checkpoint, entry, items, n_tokens, out_dir, store_dtype="float32", **kwargs)


def shards(out_dir, layers):
    return [read_shard(out_dir / f"layer_{layer}.parquet")[0] for layer in range(layers + 1)]


def test_digits_are_sampled_with_a_seed_and_stored_verified(digits, tmp_path):
    assert len(digits) == 40 and digits.attrs["available"] == 1797 and digits["label"].between(0, 9).all()
    again = sample_media(media_spec({"sklearn_digits": True, "count": 40, "seed": 0}), "image")
    assert again["name"].tolist() == digits["name"].tolist()
    other_seed = sample_media(media_spec({"sklearn_digits": True, "count": 40, "seed": 1}), "image")
    assert other_seed["name"].tolist() != again["name"].tolist()
    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / "a.wav").write_bytes(wav(1.0))
    (folder / "broken.wav").write_bytes(b"RIFF not a wave file")
    with pytest.raises(ValueError, match="broken.wav is not a readable audio file"):
        sample_media(media_spec({"local_path": str(folder), "count": 2, "seed": 0}), "audio")
    with pytest.raises(ValueError, match="holds 2 audio files.*fewer than audio_corpus.count=3"):
        sample_media(media_spec({"local_path": str(folder), "count": 3, "seed": 0}), "audio")


def test_common_voice_clips_are_drawn_from_its_validated_clips_only(tmp_path):
    """validated.tsv beside clips/ (Common Voice's layout) or inside it names the clips drawn from: the invalidated
    and unrated clips of the folder are never drawn."""
    folder = tmp_path / "en" / "clips"
    folder.mkdir(parents=True)
    for name in ("a.wav", "b.wav", "c.wav", "d.wav"):
        (folder / name).write_bytes(wav(0.2))
    spec = media_spec({"local_path": str(folder), "count": 4, "seed": 0})
    assert sorted(sample_media(spec, "audio")["name"]) == ["a.wav", "b.wav", "c.wav", "d.wav"]  # no list: every clip
    (tmp_path / "en" / "validated.tsv").write_text('client_id\tpath\tsentence\nx\ta.wav\t"Hi\nx\tc.wav\tyes\n')
    with pytest.raises(ValueError, match="holds 2 audio files.*fewer than audio_corpus.count=4"):
        sample_media(spec, "audio")
    drawn = sample_media({**spec, "count": 2}, "audio")
    assert sorted(drawn["name"]) == ["a.wav", "c.wav"] and drawn.attrs["available"] == 2
    (folder / "validated.tsv").write_text("client_id\tpath\nx\td.wav\n")  # in the folder itself: it wins
    assert sample_media({**spec, "count": 1}, "audio")["name"].tolist() == ["d.wav"]


def stored(out_dir, layer):
    """One layer's vectors and their (item, position) index."""
    path = out_dir / f"layer_{layer}.parquet"
    return read_shard(path)[0], pq.read_table(path, columns=["window", "position"]).to_pandas()


def assert_per_item(out_dir, layers, k, n_tokens, solo, special=0):
    """Every layer holds the same items, k positions each (the last item what remains of the budget), and every
    stored vector is the model's value at its recorded position in a forward pass of its item alone; the first
    `special` positions of an item are never kept."""
    items = None
    for layer in range(layers + 1):
        vectors, index = stored(out_dir, layer)
        counts = index.groupby("window", sort=False).size()
        assert len(vectors) == n_tokens and counts.iloc[:-1].eq(k).all() and 0 < counts.iloc[-1] <= k
        assert items is None or counts.index.tolist() == items
        items = counts.index.tolist()
        assert index["position"].min() >= special
        for item, rows in index.groupby("window"):
            expected = as_tokens(solo(item)[layer])[0, rows["position"].tolist()]
            assert_close(vectors[rows.index], expected.numpy())
    return items


def assert_close(actual, expected, relative=1e-5):
    """Equal to within `relative` of the largest magnitude compared (and 1e-4 of each value): a tolerance that scales
    with the values, which span 1 to 1e-20 across a random-init EfficientNet's layers."""
    expected = np.asarray(expected)
    scale = np.abs(expected).max()
    assert scale > 0, "nothing to compare: every expected value is zero"
    np.testing.assert_allclose(actual, expected, atol=relative * scale, rtol=1e-4)


def published_statistics(model, seed: int = 0):
    """Running statistics of the model's batch norms as a trained checkpoint holds them (not the defaults 0 and 1):
    extraction runs such a model as published."""
    generator = torch.Generator().manual_seed(seed)
    for norm in model.modules():
        if isinstance(norm, torch.nn.modules.batchnorm._BatchNorm):
            norm.running_mean.copy_(0.1 * torch.randn(norm.running_mean.shape, generator=generator))
            norm.running_var.copy_(0.5 + torch.rand(norm.running_var.shape, generator=generator))
    return model


def solo_image(model, processor, images):
    from shape_of_learning.corpus.media import decode_image

    @functools.cache  # asked once per layer
    def hidden(item):
        with torch.no_grad():
            pixels = processor([decode_image(images[item])], return_tensors="pt")["pixel_values"]
            if model.config.model_type == "cvt":
                return cvt_blocks(model.eval(), pixels)
            return model.eval()(pixel_values=pixels, output_hidden_states=True).hidden_states

    return hidden


def cvt_blocks(model, pixels) -> list[torch.Tensor]:
    """Every block's output of a CvtModel as a feature map (B, C, H, W), computed stage by stage as CvtStage.forward
    runs its blocks, [CLS] apart: the last block of each stage is the stage output the model returns."""
    states, hidden = [], pixels
    stage_outputs = model(pixel_values=pixels, output_hidden_states=True).hidden_states
    for stage, stage_output in zip(model.encoder.stages, stage_outputs):
        hidden = stage.embedding(hidden)
        batch, channels, height, width = hidden.shape
        tokens = hidden.flatten(2).transpose(1, 2)
        if stage.config.cls_token[stage.stage]:
            tokens = torch.cat([stage.cls_token.expand(batch, -1, -1), tokens], 1)
        for block in stage.layers:
            tokens = block(tokens, height, width)
            states.append(tokens[:, -height * width :].transpose(1, 2).reshape(batch, channels, height, width))
        assert torch.equal(states[-1], stage_output)  # a stage's output is its last block's
        hidden = states[-1]
    return states


CNN_PROCESSOR = dict(size={"shortest_edge": 32}, crop_pct=1.0)
PER_STAGE = dict(patch_sizes=[7, 3], num_attention_heads=[1, 2])
IMAGE_FAMILIES = {  # family: (model, processor, layers, k = the fewest positions per image of any layer, specials)
    "vit": (
        lambda: transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=8, num_hidden_layers=2, **TINY)),
        lambda: transformers.ViTImageProcessor(size={"height": 32, "width": 32}),
        2,
        16,
        1,
    ),
    "beit": (
        lambda: transformers.BeitModel(
            transformers.BeitConfig(image_size=32, patch_size=8, num_hidden_layers=2, use_mask_token=False, **TINY)
        ),
        lambda: transformers.BeitImageProcessor(size={"height": 32, "width": 32}, do_center_crop=False),
        2,
        16,
        1,
    ),
    "resnet": (
        lambda: transformers.ResNetModel(
            transformers.ResNetConfig(
                num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"
            )
        ),
        lambda: transformers.ConvNextImageProcessor(**CNN_PROCESSOR),
        2,
        16,
        0,
    ),  # 8x8, 8x8, 4x4
    "convnext": (
        lambda: transformers.ConvNextModel(
            transformers.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2)
        ),
        lambda: transformers.ConvNextImageProcessor(**CNN_PROCESSOR),
        2,
        16,
        0,
    ),  # 8x8, 8x8, 4x4
    "efficientnet": (
        lambda: transformers.EfficientNetModel(
            transformers.EfficientNetConfig(
                image_size=64, width_coefficient=0.25, depth_coefficient=0.5, hidden_dim=320
            )
        ),
        lambda: transformers.EfficientNetImageProcessor(size={"height": 64, "width": 64}),
        10,
        4,
        0,
    ),  # 32x32 .. 2x2
    "segformer": (
        lambda: transformers.SegformerModel(
            transformers.SegformerConfig(
                num_encoder_blocks=2,
                depths=[1, 1],
                sr_ratios=[2, 1],
                hidden_sizes=[8, 16],
                strides=[4, 2],
                mlp_ratios=[2, 2],
                **PER_STAGE,
            )
        ),
        lambda: transformers.SegformerImageProcessor(size={"height": 32, "width": 32}),
        1,
        16,
        0,
    ),  # 8x8, 4x4
    "cvt": (
        lambda: transformers.CvtModel(
            transformers.CvtConfig(  # depth[1] > 1: CvtStage indexes its drop-path
                embed_dim=[8, 16],
                num_heads=[1, 2],
                depth=[1, 2],
                patch_sizes=[7, 3],
                patch_stride=[4, 2],  # rates by stage
                patch_padding=[2, 1],
                mlp_ratio=[2.0, 2.0],
                attention_drop_rate=[0.0, 0.0],
                drop_rate=[0.0, 0.0],
                drop_path_rate=[0.0, 0.0],
                qkv_bias=[True, True],
                cls_token=[False, True],
                qkv_projection_method=["dw_bn"] * 2,
                kernel_qkv=[3, 3],
                padding_kv=[1, 1],
                stride_kv=[2, 2],
                padding_q=[1, 1],
                stride_q=[1, 1],
            )
        ),
        lambda: transformers.ConvNextImageProcessor(**CNN_PROCESSOR),
        2,
        16,
        0,
    ),  # blocks 8x8, 4x4, 4x4 (+ [CLS] kept apart)
}


@pytest.mark.parametrize("family", list(IMAGE_FAMILIES))
def test_every_layer_holds_k_positions_of_the_same_images_as_a_solo_pass(family, digits, tmp_path):
    """Layers differ in positions per image (a CNN's stem 4x to 64x its last stage): each keeps k of every image's."""
    build, processor, layers, k, special = IMAGE_FAMILIES[family]
    torch.manual_seed(0)
    model, processor = published_statistics(build()), processor()  # batch norms (ResNet, EfficientNet, CvT) as trained
    entry = save(model, processor, tmp_path / family, layers, "image")
    assert depth(model.config) == layers
    images, n_tokens = digits["data"].tolist(), 3 * k + k // 2  # 4 images over two batches of 3, the last one cut
    manifest = run(entry, images, n_tokens, tmp_path / "out")
    solo = solo_image(model, processor, images)
    assert assert_per_item(tmp_path / "out", layers, k, n_tokens, solo, special) == [0, 1, 2, 3]
    assert (manifest["positions_per_item"], manifest["items_used"], manifest["windows_used"]) == (k, 4, 4)
    norms = sum(isinstance(module, torch.nn.BatchNorm2d) for module in model.modules())
    assert (manifest["batch_norm_layers"], manifest["batch_norm_estimated"]) == (norms, 0)  # run as published
    assert (norms > 0) is (family in ("resnet", "efficientnet", "cvt"))
    if family == "resnet":  # positions are drawn per image: the same whatever the batch size
        run({**entry, "batch_size": 1}, images, n_tokens, tmp_path / "solo")
        for layer in range(layers + 1):
            pd.testing.assert_frame_equal(stored(tmp_path / "out", layer)[1], stored(tmp_path / "solo", layer)[1])
        with pytest.raises(ValueError, match="40 images yield 640 token vectors at layer 0.*sample about 63 images"):
            [checkpoint] = checkpoints("tiny", entry)
            extract(checkpoint, entry, images, 1000, tmp_path / "too_many")  # float16: full layers write nothing
        assert not (tmp_path / "too_many").exists() or not list((tmp_path / "too_many").glob("*.parquet"))
    if family == "vit":  # with its [CLS]: 17 positions, all kept
        run(entry, images, 2 * 17, tmp_path / "with_cls", special_tokens="include")
        assert assert_per_item(tmp_path / "with_cls", layers, 17, 2 * 17, solo) == [0, 1]


def image_pixels(processor, images: list[bytes]) -> torch.Tensor:
    from shape_of_learning.corpus.media import decode_image

    return processor([decode_image(data) for data in images], return_tensors="pt")["pixel_values"]


def batch_norm_inputs(model, pixels) -> dict:
    """Each batch norm's input over `pixels` in an eval-mode pass, in the order the norms run."""
    inputs = {}
    hooks = [
        norm.register_forward_pre_hook(lambda module, args: inputs.setdefault(module, args[0]))
        for norm in model.modules()
        if isinstance(norm, torch.nn.BatchNorm2d)
    ]
    with torch.no_grad():
        model.eval()(pixel_values=pixels)
    for hook in hooks:
        hook.remove()
    return inputs


def population_statistics(model, pixels):
    """Computed here, independently of the extraction: each batch norm's running mean and (unbiased) variance set, in
    the order the norms run, to the moments of its input over every position of every image, those before it set."""
    for norm in list(batch_norm_inputs(model, pixels)):
        channels = batch_norm_inputs(model, pixels)[norm].transpose(0, 1).flatten(1).double()
        norm.running_mean.copy_(channels.mean(1))
        norm.running_var.copy_(channels.var(1))
    return model.eval()


def batch_statistics(model, pixels):
    """Each batch norm's running statistics from one train-mode pass over `pixels` as one batch, the rest of the model
    in eval mode (dropout off): the moments of its input over every position of every image, those before it
    normalising with theirs, as `population_statistics` computes them norm by norm (but for the n / (n - 1) between
    the variance a train-mode norm divides by and the unbiased one it keeps)."""
    model.eval()
    for norm in batch_norm_inputs(model, pixels):
        norm.reset_running_stats()
        norm.momentum = None
        norm.train()
    with torch.no_grad():
        model(pixel_values=pixels)
    return model.eval()


def stored_at(out_dir, layer: int, hidden) -> tuple[np.ndarray, np.ndarray]:
    """A layer's stored vectors, and the states `hidden` (of every image, in item order) at their (image, position)."""
    vectors, index = stored(out_dir, layer)
    expected = as_tokens(hidden[layer])[index["window"].tolist(), index["position"].tolist()]
    return vectors, expected.numpy()


def models_measured(monkeypatch) -> list:
    """The models extraction runs its pass on, with the statistics it gave them, as it calls them."""
    from shape_of_learning.extraction import hidden_states

    measured, forward = [], hidden_states._forward
    monkeypatch.setattr(
        hidden_states, "_forward", lambda model, inputs: measured.append(model) or forward(model, inputs)
    )
    return measured


def test_a_random_resnet_s_batch_norms_are_estimated_on_its_images_and_its_floor_computed_independently(
    digits, tmp_path, monkeypatch
):
    """At initialisation every batch norm holds mean 0 and variance 1, the identity in eval mode. Extraction estimates
    them on the images it measures (24, in three batches of 8): each batch norm's output over those images then has
    per-channel mean 0 and variance 1, and the stored floor is the network's with its inputs' statistics, computed
    here norm by norm. With the default statistics the raw cosine of every layer would be 0.70 to 0.80."""
    from shape_of_learning.metrics.cosine import average_cosine

    build, processor, layers, k, _ = IMAGE_FAMILIES["resnet"]
    torch.manual_seed(0)
    model, processor = build(), processor()
    entry = save(model, processor, tmp_path / "resnet", layers, "image") | {"batch_size": 8}
    images = digits["data"].tolist()[:24]
    pixels, measured = image_pixels(processor, images), models_measured(monkeypatch)
    manifest = run(entry, images, 24 * k, tmp_path / "out")
    inputs = batch_norm_inputs(measured[0], pixels)
    assert (manifest["batch_norm_layers"], manifest["batch_norm_estimated"], manifest["batch_norm_items"]) == (
        len(inputs),
        len(inputs),
        24,
    ) and len(inputs) == 6
    for norm, states in inputs.items():
        shape = (1, -1, 1, 1)
        normalised = (states - norm.running_mean.view(shape)) / torch.sqrt(norm.running_var.view(shape) + norm.eps)
        channels = normalised.transpose(0, 1).flatten(1).double()
        assert channels.mean(1).abs().max() < 0.05 and (channels.var(1) - 1).abs().max() < 0.05
    reference = population_statistics(type(model).from_pretrained(tmp_path / "resnet"), pixels)
    with torch.no_grad():
        hidden = reference(pixel_values=pixels, output_hidden_states=True).hidden_states
    for layer in range(layers + 1):
        vectors, expected = stored_at(tmp_path / "out", layer, hidden)
        assert_close(vectors, expected, relative=0.02)  # three batches' statistics against the 24 images'
        assert average_cosine(vectors, device="cpu") == pytest.approx(average_cosine(expected, device="cpu"), abs=2e-3)


def godey_settings(batch_size: int) -> dict:
    return {
        "names": ["avg_cosine", "avg_cosine_centred"],
        "batch_size": batch_size,
        "batches": 2,
        "seed": 0,
        "device": "cpu",
        "settings": {},
    }


def measure(out_dir, manifest: dict, layers: int, settings: dict, tables_dir) -> pd.DataFrame:
    """Every layer's metrics (`measure_layer`, as the metrics jobs run it) and the model's summary table."""
    from shape_of_learning.metrics.layer import measure_layer
    from shape_of_learning.metrics.tables import model_tables

    files = []
    for layer in range(layers + 1):
        files.append(tables_dir / f"{manifest['checkpoint']}_{layer}.parquet")
        measure_layer(
            out_dir / f"layer_{layer}.parquet", manifest, layer=layer, kind="cnn", settings=settings
        ).to_parquet(files[-1])
    return model_tables(files)[1]


def draw_godey(summary: pd.DataFrame, tmp_path):
    from shape_of_learning.figures.kinds import FIGURE_KINDS

    return FIGURE_KINDS["profile_by_modality"].draw(
        summary,
        out_png=tmp_path / "godey.png",
        out_pdf=tmp_path / "godey.pdf",
        metrics=["avg_cosine", "avg_cosine_centred"],
        groups={"tiny": {"modality": "image", "group": "CNN"}},
        random_init_seed=0,
        positions_per_window=None,
        flagged="omit",
    )


def test_a_random_efficientnet_runs_through_extraction_metrics_and_the_godey_figure(digits, tmp_path):
    """transformers draws EfficientNet's batch-norm scales and convolution weights from N(0, 0.02), and batch norm's
    eps (1e-3) outweighs the tiny variances that follow, so the states shrink block by block even with estimated
    statistics (to 1e-28 in a b0 at 224 px): float16 would store zeros. Those layers are stored as float32 and
    measured like any other; the stored floor is a direct forward pass of the same seeded weights with the same
    statistics (one batch of 12 images: the images' own)."""
    from shape_of_learning.models.pinning import pin, pin_random_init

    build, processor, layers, k, _ = IMAGE_FAMILIES["efficientnet"]
    torch.manual_seed(0)
    model, processor = build(), processor()
    entry = save(model, processor, tmp_path / "efficientnet", layers, "image") | {"batch_size": 16, "kind": "cnn"}
    images = digits["data"].tolist()[:12]
    [final] = checkpoints("tiny", entry)
    baseline = random_init(final, 0)
    manifest = extract(baseline, entry, images, 12 * k, tmp_path / "out", pin=pin_random_init(baseline, pin(final)))
    assert manifest["batch_norm_estimated"] == manifest["batch_norm_layers"] > 0 and manifest["batch_norm_items"] == 12
    assert manifest["float32_layers"] == list(range(1, layers + 1))  # the stem's output is float16's size
    with torch.random.fork_rng():
        torch.manual_seed(0)
        reference = transformers.AutoModel.from_config(
            model.config
        )  # the baseline's weights, as extraction builds them
    pixels = image_pixels(processor, images)
    with torch.no_grad():
        hidden = batch_statistics(reference, pixels)(pixel_values=pixels, output_hidden_states=True).hidden_states
    magnitudes = []
    for layer in range(layers + 1):
        vectors, expected = stored_at(tmp_path / "out", layer, hidden)
        assert_close(vectors, expected, relative=1e-3)  # layer 0 in float16: 2^-11 of its values
        magnitudes.append(np.abs(expected).max())
    assert magnitudes[-1] < 1e-6 * magnitudes[0]  # vanishing: a float16 store would hold zeros
    at_init = measure(tmp_path / "out", manifest, layers, godey_settings(16), tmp_path)
    assert at_init["mean"].notna().all() and not at_init["degenerate"].any()
    trained = at_init.assign(checkpoint="main", random_init=False)  # the figure draws a model beside its floor
    figure = draw_godey(pd.concat([trained, at_init], ignore_index=True), tmp_path)
    assert (tmp_path / "godey.png").is_file() and "degenerate" not in " ".join(t.get_text() for t in figure.texts)


def test_a_layer_of_identical_vectors_is_marked_degenerate_left_out_of_the_figure_and_skipped_by_the_claims(
    digits, tmp_path
):
    """A ResNet whose first stage ends, on both its paths, in a batch norm of scale 0 outputs zeros from that stage on:
    those layers are measured as nothing (NaN), marked `degenerate` in the tables, named in the figure's footnote and
    skipped by the claims. Nothing stops."""
    from shape_of_learning.claims.inputs import final_profile, without_degenerate
    from shape_of_learning.metrics.layer import degenerate

    torch.manual_seed(0)
    model = transformers.ResNetModel(
        transformers.ResNetConfig(
            num_channels=3, embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"
        )
    )
    block, layers = model.encoder.stages[0].layers[0], 2
    with torch.no_grad():  # 8 to 16 channels: the shortcut is a convolution and a batch norm too
        block.shortcut.normalization.weight.zero_()
        block.layer[-1].normalization.weight.zero_()
    processor = transformers.ConvNextImageProcessor(**CNN_PROCESSOR)
    entry = save(model, processor, tmp_path / "dead", layers, "image") | {"kind": "cnn"}
    manifest = run(entry, digits["data"].tolist(), 32, tmp_path / "out")
    summary = measure(tmp_path / "out", manifest, layers, godey_settings(16), tmp_path)
    dead = summary.loc[summary["degenerate"], "layer"].unique().tolist()
    assert dead == list(range(1, layers + 1)) and summary.loc[summary["degenerate"], "mean"].isna().all()
    assert summary.loc[~summary["degenerate"], "mean"].notna().all() and (summary["layer"] == 0).any()
    baseline = summary.assign(checkpoint="random-init", random_init=True)  # a floor with the same dead layers
    figure = draw_godey(pd.concat([summary, baseline], ignore_index=True), tmp_path)
    notes = " ".join(text.get_text() for text in figure.texts)
    assert "degenerate layers" in notes and f"tiny/main layers 1-{layers}" in notes.replace("\n", " ")
    assert f"tiny/random-init layers 1-{layers}" in notes.replace("\n", " ")
    as_read = without_degenerate(summary.assign(std=0.01))  # as the claims' reader gives it, with a batch-to-batch std
    assert final_profile(as_read, "tiny", "avg_cosine")[0]["layer"].tolist() == [0]
    zeros, one = np.zeros((5, 3), np.float32), np.tile(np.float32([1, 2, 3]), (5, 1))
    assert degenerate(zeros) and degenerate(one) and degenerate(np.vstack([zeros, one]))
    assert not degenerate(np.vstack([zeros, one, 2 * one[:1]]))


def test_every_image_model_keeps_the_same_positions_per_image(digits, tmp_path):
    """extraction.positions_per_image: a ViT's 64 patches and a ResNet whose last stage is 4x4 keep 4 positions of
    each of the same images at every layer, so pairs within an image are the same share of both (each model's
    fewest would be 64 and 16); where a layer has more, the 4 are drawn with a seed per image. A model with fewer
    positions than asked for is refused, naming the layer and the setting."""
    images, manifests = digits["data"].tolist(), {}
    vit = (
        lambda: transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=4, num_hidden_layers=2, **TINY)),
        lambda: transformers.ViTImageProcessor(size={"height": 32, "width": 32}),
        2,
        64,
        1,
    )
    for family, (build, processor, layers, _, special) in {"vit": vit, "resnet": IMAGE_FAMILIES["resnet"]}.items():
        torch.manual_seed(0)
        model, processor = published_statistics(build()), processor()
        entry = save(model, processor, tmp_path / family, layers, "image")
        manifests[family] = run(entry, images, 4 * 9, tmp_path / family / "out", positions_per_item=4)
        solo = solo_image(model, processor, images)
        assert assert_per_item(tmp_path / family / "out", layers, 4, 4 * 9, solo, special) == list(range(9))
    assert [(m["positions_per_item"], m["items_used"]) for m in manifests.values()] == [(4, 9), (4, 9)]
    patches = stored(tmp_path / "vit" / "out", 2)[1].groupby("window")["position"].apply(tuple)
    assert patches.nunique() > 1  # drawn per image, not one fixed set
    with pytest.raises(
        ValueError,
        match=r"layer 2 has 16 positions per image, fewer than "
        r"extraction.positions_per_image = 17.*at most 16",
    ):
        run(entry, images, 34, tmp_path / "more", positions_per_item=17)


def test_the_old_figure_kind_is_refused_naming_the_new_one_and_positions_rerun_image_models_only():
    from shape_of_learning.experiment.config import ConfigError, extraction_settings, load_config

    demo = load_config(Path(__file__).resolve().parents[1] / "presets/demo.yaml")
    old = {**demo, "figures": {**demo["figures"], "by_modality": demo["figures"]["profile_by_modality"]}}
    with pytest.raises(
        ConfigError,
        match=r"^config\.figures\.by_modality: renamed `profile_by_modality`; rename "
        r"`by_modality:` to `profile_by_modality:` in the config file$",
    ):
        validate_config(old)
    assert demo["extraction"]["positions_per_image"] == 4
    assert extraction_settings(demo, "demo-vit", "image")["positions_per_image"] == 4
    assert "positions_per_window" not in extraction_settings(demo, "demo-vit", "image")
    # the Godey figure's text models read k per window (and no image setting), as the demo runs them
    assert extraction_settings(demo, "demo-pythia", "text")["positions_per_window"] == 32
    assert "positions_per_image" not in extraction_settings(demo, "demo-pythia", "text")


@pytest.mark.parametrize("family", ["wav2vec2", "hubert", "wav2vec2-masked", "whisper"])
def test_audio_frames_are_a_solo_pass_s_and_padding_is_not_kept(family, tmp_path):
    """A clip's vectors are those of a pass on it alone, whatever its batch mates: base models (group norm, no
    attention mask) run clip by clip, masked ones (layer norm) batch with their mask, Whisper pads each clip to 30 s."""
    clips = [wav(0.5), wav(1.0, frequency=220), wav(0.3)]
    speech = dict(
        num_hidden_layers=2,
        conv_dim=(16, 16),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        **TINY,
    )
    if family == "whisper":
        config = transformers.WhisperConfig(
            encoder_layers=2,
            decoder_layers=1,
            d_model=32,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_mel_bins=80,
            max_source_positions=1500,
        )
        model, extractor = transformers.WhisperModel(config), transformers.WhisperFeatureExtractor()
    elif family == "hubert":
        model = transformers.HubertModel(transformers.HubertConfig(**speech))
        extractor = transformers.Wav2Vec2FeatureExtractor(return_attention_mask=False)
    else:
        masked = family == "wav2vec2-masked"  # as wav2vec2-large-lv60: trained with a mask, per-frame layer norm
        model = transformers.Wav2Vec2Model(
            transformers.Wav2Vec2Config(
                feat_extract_norm="layer" if masked else "group", do_stable_layer_norm=masked, **speech
            )
        )
        extractor = transformers.Wav2Vec2FeatureExtractor(return_attention_mask=masked)
    layers = 2
    entry = save(model, extractor, tmp_path / family, layers, "audio")
    samples = [len(decode_audio(c, 16000)) for c in clips]
    assert samples == [8000, 16000, 4800]  # resampled from 8 kHz
    # frames per clip: wav2vec2's two convolutions (kernel 10 stride 5, kernel 8 stride 4), Whisper's 10 ms hop
    # halved by its stride-2 convolution (every clip is padded to 30 s)
    if family == "whisper":
        frames = [-(-s // 320) for s in samples]
    else:
        frames = [((s - 10) // 5 + 1 - 8) // 4 + 1 for s in samples]
    manifest = run(entry, clips, sum(frames), tmp_path / "out")  # batch_size 3: all clips in one batch if batched
    index = pq.read_table(tmp_path / "out" / "layer_0.parquet", columns=["window", "position"]).to_pandas()
    assert index.groupby("window")["position"].max().tolist() == [f - 1 for f in frames]
    ends = np.cumsum([0] + frames)
    for clip, data in enumerate(clips):  # the encoder's weights were loaded (Whisper: not a fresh head model)
        features = extractor([decode_audio(data, 16000)], sampling_rate=16000, return_tensors="pt")
        with torch.no_grad():
            body = model.eval().encoder if family == "whisper" else model.eval()
            solo = body(features[extractor.model_input_names[0]], output_hidden_states=True).hidden_states
        for layer in range(layers + 1):
            assert_close(
                stored(tmp_path / "out", layer)[0][ends[clip] : ends[clip + 1]], solo[layer][0, : frames[clip]].numpy()
            )
    assert manifest["windows_used"] == manifest["items_used"] == 3 and manifest["positions_per_item"] is None
    with pytest.raises(ValueError, match="3 clips yield"):
        run(entry, clips, sum(frames) + 1, tmp_path / "more")


def extraction_model(config):
    """The model as extraction loads it (families.model_class), randomly initialised."""
    return random_model(model_class(config, "encoder", "text", head=False)[0], config)


SPEECH = dict(
    num_hidden_layers=2,
    conv_dim=(16, 16),
    conv_stride=(5, 4),
    conv_kernel=(10, 8),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2,
    **TINY,
)
FINAL_NORM_FAMILIES = {  # family: (model, its inputs)
    "t5": (
        lambda: extraction_model(
            transformers.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, vocab_size=384)
        ),
        {"input_ids": torch.arange(3, 40)[None]},
    ),
    "canine": (
        lambda: extraction_model(
            transformers.CanineConfig(num_hidden_layers=2, num_hash_buckets=64, num_hash_functions=2, **TINY)
        ),
        {"input_ids": torch.arange(60, 124)[None]},
    ),
    "whisper": (
        lambda: extraction_model(
            transformers.WhisperConfig(
                encoder_layers=2,
                decoder_layers=1,
                d_model=32,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                num_mel_bins=8,
                max_source_positions=16,
            )
        ),
        {"input_features": torch.randn(1, 8, 32)},
    ),
    "wav2vec2-base": (
        lambda: extraction_model(transformers.Wav2Vec2Config(**SPEECH)),
        {"input_values": torch.randn(1, 4000)},
    ),
    "wav2vec2-stable": (
        lambda: extraction_model(
            transformers.Wav2Vec2Config(feat_extract_norm="layer", do_stable_layer_norm=True, **SPEECH)
        ),
        {"input_values": torch.randn(1, 4000)},
    ),
    "hubert": (lambda: extraction_model(transformers.HubertConfig(**SPEECH)), {"input_values": torch.randn(1, 4000)}),
    **{
        family: (
            build,
            {
                "pixel_values": torch.randn(
                    1, 3, 64 if family == "efficientnet" else 32, 64 if family == "efficientnet" else 32
                )
            },
        )
        for family, (build, *_) in IMAGE_FAMILIES.items()
    },
}


@pytest.mark.parametrize("family", list(FINAL_NORM_FAMILIES))
def test_final_norm_fact_of_each_family_matches_its_forward_pass(family):
    """The last hidden state is a final norm's output (a norm module outside the numbered blocks) exactly where
    `last_layer_after_final_norm` says so: T5 and Whisper encoders end in one; wav2vec 2.0 and HuBERT record their
    last block's output even when pre-LN ("stable"); post-LN encoders, vision transformers and CNNs (whose last
    norms, if any, act on the pooled output) do not."""
    build, inputs = FINAL_NORM_FAMILIES[family]
    torch.manual_seed(0)
    model, outputs = build().eval(), []
    for name, module in model.named_modules():
        is_norm = type(module).__name__.endswith("Norm") or isinstance(
            module, (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.BatchNorm2d)
        )
        if is_norm and not any(part.isdigit() for part in name.split(".")):
            module.register_forward_hook(lambda module, args, output: outputs.append(output))
    with torch.no_grad():
        last = model(**inputs, output_hidden_states=True).hidden_states[-1]
    after = any(torch.is_tensor(out) and out.shape == last.shape and torch.equal(out, last) for out in outputs)
    assert last_layer_after_final_norm(model.config) is after
    assert after is (family in ("t5", "whisper"))


@pytest.mark.parametrize("family", ["t5", "whisper", "vit"])
def test_models_without_from_config_are_sized_and_built(family):
    """On a GPU, extraction sizes a model on the meta device before loading it; T5's and Whisper's encoder classes
    have no `from_config` (the Auto classes do)."""
    model = FINAL_NORM_FAMILIES[family][0]()
    assert parameter_count(type(model), model.config, False) == sum(p.numel() for p in model.parameters())


def test_byte_level_t5_keeps_bytes_not_eos(tmp_path):
    config = transformers.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, vocab_size=384)
    model, tokenizer = transformers.T5EncoderModel(config), transformers.ByT5Tokenizer()
    assert depth(config) == 2
    entry = save(model, tokenizer, tmp_path / "t5", 2, "text")
    run(entry, WINDOWS, 60, tmp_path / "out")
    inputs = tokenizer(WINDOWS[:1], truncation=True, max_length=64, return_tensors="pt")
    hidden = model.eval()(input_ids=inputs["input_ids"], output_hidden_states=True).hidden_states
    index = pq.read_table(tmp_path / "out" / "layer_0.parquet", columns=["token_id"]).column(0).to_numpy()
    assert not set(index.tolist()) & set(tokenizer.all_special_ids)  # byte ids, no </s>
    for layer, vectors in enumerate(shards(tmp_path / "out", 2)):
        assert vectors.shape == (60, 32)
        assert_close(vectors, hidden[layer][0, :60].detach().numpy())


@pytest.mark.parametrize("special_tokens", ["exclude", "include"])
def test_canine_layers_hold_k_characters_or_molecules_of_the_same_windows(special_tokens, tmp_path):
    """Windows 0, 3, 6, ... are 64 characters with [CLS] and [SEP] (max_length 64), so 16 molecules: [CLS]'s
    (molecule 0), molecule 1 pooling [CLS] with characters 1-3, molecules 2-15; [SEP] (character 63) falls in the
    truncated last convolution output. The others are 40 and 43 characters, 10 molecules: fewer than k, skipped."""
    config = transformers.CanineConfig(
        num_hidden_layers=2,
        downsampling_rate=4,
        num_hash_buckets=64,
        num_hash_functions=2,
        local_transformer_stride=16,
        **TINY,
    )
    model, tokenizer = transformers.CanineModel(config), transformers.CanineTokenizer()
    layers = depth(config)
    assert layers == 2 + 4
    entry = save(model, tokenizer, tmp_path / "canine", layers, "text")
    manifest = run(entry, WINDOWS, 40, tmp_path / "out", special_tokens=special_tokens)
    exclude = special_tokens == "exclude"
    molecules = list(range(2, 16)) if exclude else list(range(16))
    k = len(molecules)

    def solo(window):
        inputs = tokenizer(WINDOWS[window : window + 1], truncation=True, max_length=64, return_tensors="pt")
        with torch.no_grad():
            return model.eval()(**inputs, output_hidden_states=True).hidden_states

    assert assert_per_item(tmp_path / "out", layers, k, 40, solo) == [0, 3, 6]
    shapes = [states.shape[1] for states in solo(0)]
    assert shapes == [64, 64, 16, 16, 16, 64, 64]  # chars, chars, molecules x 3, chars x 2
    for layer, length in enumerate(shapes):
        index = stored(tmp_path / "out", layer)[1]
        positions = index.loc[index["window"] == 0, "position"].tolist()
        if length == 16:
            assert positions == molecules
        else:
            assert len(positions) == k and set(positions) <= set(range(1, 63) if exclude else range(64))
    assert (manifest["positions_per_item"], manifest["items_used"], manifest["windows_used"]) == (k, 3, 7)


@pytest.mark.slow  # trains a model: left out of `make check`
@pytest.mark.parametrize("arch, layers, steps", [("vit", 2, 150), ("resnet", 3, 60)])
def test_digit_trained_image_models_learn_and_are_extracted_like_any_checkpoint(arch, layers, steps, tmp_path):
    from shape_of_learning.models import training

    corpus = tmp_path / "items.parquet"
    write_media(sample_media(media_spec({"sklearn_digits": True, "count": 400, "seed": 0}), "image"), corpus)
    saved = training.train(
        arch,
        corpus,
        tmp_path / "models",
        [0, steps],
        seed=0,
        num_layers=layers,
        d_model=32,
        num_heads=2,
        batch_size=32,
        lr=3e-3,
        weight_decay=0.0,
        patch_size=8,
    )
    losses = [json.loads((path / "training.json").read_text())["loss"] for path in saved]
    assert losses[0] is None and losses[1] < np.log(10) - 0.2  # better than chance (ln 10) after a few seconds
    entry = validate_model_entry(
        {"path": str(saved[1]), "kind": "encoder", "layers": layers, "modality": "image", "batch_size": 16}
    )
    manifest = run(entry, read_media(corpus)["data"].tolist(), 64, tmp_path / "out")
    assert manifest["layers"] == layers and manifest["family"] == arch
    assert [len(v) for v in shards(tmp_path / "out", layers)] == [64] * (layers + 1)


@pytest.mark.parametrize("pack", ["folder", "zip", "tar"])
def test_a_corpus_folder_or_archive_gives_the_same_seeded_sample(pack, tmp_path):
    import tarfile
    import zipfile

    clips = {f"clips/{name}.wav": wav(0.2, frequency=200 + 40 * i) for i, name in enumerate("abcdefgh")}
    if pack == "folder":
        for name, data in clips.items():
            (tmp_path / name).parent.mkdir(exist_ok=True)
            (tmp_path / name).write_bytes(data)
        (tmp_path / "clips/notes.txt").write_text("not a clip")  # other files are not listed
        source, names = tmp_path / "clips", [name.removeprefix("clips/") for name in clips]
    elif pack == "zip":
        source, names = tmp_path / "clips.zip", list(clips)
        with zipfile.ZipFile(source, "w") as archive:
            for name, data in reversed(clips.items()):  # archive order does not matter: names are sorted
                archive.writestr(name, data)
    else:
        source, names = tmp_path / "clips.tar.gz", list(clips)
        with tarfile.open(source, "w:gz") as archive:
            for name, data in clips.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    frame = sample_media(media_spec({"local_path": str(source), "count": 5, "seed": 3}), "audio")
    expected = [names[i] for i in np.random.default_rng(3).choice(8, size=5, replace=False)]
    assert frame["name"].tolist() == expected
    assert frame["data"].tolist() == [clips[name if name in clips else f"clips/{name}"] for name in expected]
    assert (frame["label"] == -1).all() and frame.attrs["available"] == 8


@pytest.mark.parametrize("audio_format", ["FLAC", "MP3"])
def test_compressed_clips_decode_like_wav(audio_format):
    """Common Voice ships MP3: decoded by soundfile (libsndfile), resampled like WAV, same tone within codec loss."""
    soundfile = pytest.importorskip("soundfile")
    rate, seconds = 8000, 0.5
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(int(rate * seconds)) / rate)
    buffer = io.BytesIO()
    soundfile.write(buffer, tone.astype("float32"), rate, format=audio_format)
    decoded, reference = decode_audio(buffer.getvalue(), 16000), decode_audio(wav(seconds), 16000)
    assert decoded.dtype == np.float32 and abs(len(decoded) - len(reference)) <= 0.1 * len(reference)
    assert np.argmax(np.abs(np.fft.rfft(decoded))) * 16000 / len(decoded) == pytest.approx(440, abs=5)
