"""Character-level, speech and vision models through the same extraction the workflow runs: tiny random models saved
locally, real digit images (scikit-learn), generated audio. Expected counts come from the models' own forward pass."""

import io
import json
import wave

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import transformers

from shape_of_learning.corpus.media import decode_audio, read_media, sample_media, write_media
from shape_of_learning.experiment.config import validate_config, validate_model_entry
from shape_of_learning.extraction.families import depth
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.shards import read_shard
from shape_of_learning.models.checkpoints import checkpoints


def media_spec(fields: dict) -> dict:
    """An image_corpus / audio_corpus entry as the workflow hands it over: validated, defaults filled."""
    config = validate_config({"corpus": {"name": "c"}, "windows": {}, "figures": {},
                              "image_corpus": {"name": "m", **fields},
                              "models": {"m": {"hub_id": "a/b", "kind": "encoder", "layers": 1}}})
    return config["image_corpus"]

WINDOWS = ["The quick brown fox jumps over the lazy dog. " * 3, "Anisotropy in character-level models.",
           "Byte-level models read UTF-8: naïve café."] * 4
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
    return validate_model_entry({"path": str(directory), "kind": "encoder", "layers": layers, "modality": modality,
                                 "batch_size": 3, "max_length": 64})


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


def test_vit_keeps_patches_not_cls_and_matches_a_direct_call(digits, tmp_path):
    config = transformers.ViTConfig(image_size=32, patch_size=8, num_hidden_layers=2, **TINY)
    processor = transformers.ViTImageProcessor(size={"height": 32, "width": 32})
    entry = save(transformers.ViTModel(config), processor, tmp_path / "vit", 2, "image")
    images = digits["data"].tolist()
    manifest = run(entry, images, 50, tmp_path / "out")  # 16 patches per image: 4 images, the last one cut
    assert manifest["windows_used"] == 4 and manifest["modality"] == "image"
    model = transformers.ViTModel.from_pretrained(entry["path"]).eval()
    from shape_of_learning.corpus.media import decode_image
    with torch.no_grad():
        pixels = processor([decode_image(d) for d in images[:4]], return_tensors="pt")["pixel_values"]
        direct = model(pixel_values=pixels, output_hidden_states=True).hidden_states
    for layer, vectors in enumerate(shards(tmp_path / "out", 2)):
        expected = direct[layer][:, 1:].reshape(-1, 32)[:50]  # [CLS] dropped
        np.testing.assert_allclose(vectors, expected.numpy(), atol=1e-5, rtol=1e-4)
    run(entry, images, 50, tmp_path / "with_cls", special_tokens="include")
    np.testing.assert_allclose(shards(tmp_path / "with_cls", 2)[0][0], direct[0][0, 0].numpy(), atol=1e-6)


def test_resnet_stages_are_layers_and_positions_are_tokens(digits, tmp_path):
    config = transformers.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                       layer_type="basic")
    processor = transformers.ConvNextImageProcessor(size={"shortest_edge": 32}, crop_pct=1.0)
    entry = save(transformers.ResNetModel(config), processor, tmp_path / "resnet", 2, "image")
    assert depth(config) == 2
    images = digits["data"].tolist()
    run(entry, images, 100, tmp_path / "out")  # 32 px -> stem 8x8, stage 1 8x8, stage 2 4x4: layers fill unevenly
    model = transformers.ResNetModel.from_pretrained(entry["path"]).eval()
    from shape_of_learning.corpus.media import decode_image
    with torch.no_grad():
        pixels = processor([decode_image(d) for d in images[:7]], return_tensors="pt")["pixel_values"]
        direct = model(pixel_values=pixels, output_hidden_states=True).hidden_states
    assert [tuple(h.shape[2:]) for h in direct] == [(8, 8), (8, 8), (4, 4)]
    for layer, vectors in enumerate(shards(tmp_path / "out", 2)):
        expected = direct[layer].flatten(2).transpose(1, 2).reshape(-1, direct[layer].shape[1])[:100]
        np.testing.assert_allclose(vectors, expected.numpy(), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="40 images yield 640 token vectors at layer 2.*sample about 63 images"):
        [checkpoint] = checkpoints("tiny", entry)
        extract(checkpoint, entry, images, 1000, tmp_path / "too_many")  # float16: full layers write nothing more
    assert not (tmp_path / "too_many").exists() or not list((tmp_path / "too_many").glob("*.parquet"))


@pytest.mark.parametrize("family", ["wav2vec2", "whisper"])
def test_audio_frames_of_padding_are_not_kept(family, tmp_path):
    clips = [wav(0.5), wav(1.0, frequency=220), wav(0.3)]
    if family == "wav2vec2":
        config = transformers.Wav2Vec2Config(num_hidden_layers=2, conv_dim=(16, 16), conv_stride=(5, 4),
                                             conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                                             num_conv_pos_embedding_groups=2, **TINY)
        model, layers = transformers.Wav2Vec2Model(config), 2
        extractor = transformers.Wav2Vec2FeatureExtractor(return_attention_mask=False)
    else:
        config = transformers.WhisperConfig(encoder_layers=2, decoder_layers=1, d_model=32, encoder_attention_heads=2,
                                            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                            num_mel_bins=80, max_source_positions=1500)
        model, layers = transformers.WhisperModel(config), 2
        extractor = transformers.WhisperFeatureExtractor()
    entry = save(model, extractor, tmp_path / family, layers, "audio")
    samples = [len(decode_audio(c, 16000)) for c in clips]
    assert samples == [8000, 16000, 4800]  # resampled from 8 kHz
    # frames per clip: wav2vec2's two convolutions (kernel 10 stride 5, kernel 8 stride 4), Whisper's 10 ms hop
    # halved by its stride-2 convolution (every clip is padded to 30 s)
    if family == "wav2vec2":
        frames = [((s - 10) // 5 + 1 - 8) // 4 + 1 for s in samples]
    else:
        frames = [-(-s // 320) for s in samples]
    manifest = run(entry, clips, sum(frames), tmp_path / "out")
    assert manifest["windows_used"] == 3
    index = pq.read_table(tmp_path / "out" / "layer_0.parquet", columns=["window", "position"]).to_pandas()
    assert index.groupby("window")["position"].max().tolist() == [f - 1 for f in frames]
    with pytest.raises(ValueError, match="3 clips yield"):
        run(entry, clips, sum(frames) + 1, tmp_path / "more")
    if family == "whisper":  # the encoder's weights were loaded (not a fresh head model): same vectors as WhisperModel
        features = extractor([decode_audio(clips[0], 16000)], sampling_rate=16000, return_tensors="pt")
        with torch.no_grad():
            direct = model.eval().encoder(features["input_features"], output_hidden_states=True).hidden_states
        for layer, vectors in enumerate(shards(tmp_path / "out", layers)):
            np.testing.assert_allclose(vectors[:frames[0]], direct[layer][0, :frames[0]].numpy(), atol=1e-4)


@pytest.mark.parametrize("family", ["canine", "t5"])
def test_character_and_byte_level_encoders(family, tmp_path):
    if family == "canine":
        config = transformers.CanineConfig(num_hidden_layers=2, downsampling_rate=4, num_hash_buckets=64,
                                           num_hash_functions=2, local_transformer_stride=16, **TINY)
        model, tokenizer = transformers.CanineModel(config), transformers.CanineTokenizer()
    else:
        config = transformers.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, vocab_size=384)
        model, tokenizer = transformers.T5EncoderModel(config), transformers.ByT5Tokenizer()
    layers = depth(config)
    assert layers == (2 + 4 if family == "canine" else 2)
    entry = save(model, tokenizer, tmp_path / family, layers, "text")
    run(entry, WINDOWS, 60, tmp_path / "out")
    inputs = tokenizer(WINDOWS[:1], truncation=True, max_length=64, return_tensors="pt")
    hidden = model.eval()(input_ids=inputs["input_ids"], output_hidden_states=True).hidden_states
    assert len(hidden) == layers + 1
    index = pq.read_table(tmp_path / "out" / "layer_0.parquet", columns=["token_id"]).column(0).to_numpy()
    assert not set(index.tolist()) & set(tokenizer.all_special_ids)  # byte/char ids, no [CLS]/</s>
    for layer, vectors in enumerate(shards(tmp_path / "out", layers)):
        assert vectors.shape == (60, 32)
        if family == "canine" and hidden[layer].shape[1] != hidden[0].shape[1]:  # molecules: not the first ([CLS])
            np.testing.assert_allclose(vectors[0], hidden[layer][0, 1].detach().numpy(), atol=1e-5)
        else:
            np.testing.assert_allclose(vectors[0], hidden[layer][0, 1 if family == "canine" else 0].detach().numpy(),
                                       atol=1e-5)


@pytest.mark.slow  # trains a model: left out of `make check`
@pytest.mark.parametrize("arch, layers, steps", [("vit", 2, 150), ("resnet", 3, 60)])
def test_digit_trained_image_models_learn_and_are_extracted_like_any_checkpoint(arch, layers, steps, tmp_path):
    from shape_of_learning.models import training

    corpus = tmp_path / "items.parquet"
    write_media(sample_media(media_spec({"sklearn_digits": True, "count": 400, "seed": 0}), "image"), corpus)
    saved = training.train(arch, corpus, tmp_path / "models", [0, steps], seed=0, num_layers=layers, d_model=32,
                           num_heads=2, batch_size=32, lr=3e-3, weight_decay=0.0, patch_size=8)
    losses = [json.loads((path / "training.json").read_text())["loss"] for path in saved]
    assert losses[0] is None and losses[1] < np.log(10) - 0.2  # better than chance (ln 10) after a few seconds
    entry = validate_model_entry({"path": str(saved[1]), "kind": "encoder", "layers": layers, "modality": "image",
                                  "batch_size": 16})
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
