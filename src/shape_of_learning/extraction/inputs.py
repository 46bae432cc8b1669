"""What a model reads and which of its vectors count as tokens, per modality (text, image, audio).

The extractor asks an input source for batches: the forward pass's keyword arguments and, for each hidden state it
returns, the token vectors that may be kept. Which of them are kept:

- where every layer holds the same tokens (subword and byte text by default, speech), each layer keeps its first
  `n_tokens`, in item order;
- where layers hold different positions per item (images: a CNN's stem has 64x more positions than its last stage;
  CANINE: characters and 4-character molecules), taking the first `n_tokens` would measure early layers within a few
  items and late layers across hundreds. Such a source is `per_item`: every layer takes the same number k of
  positions from each of the same items (`per_item_positions`), so every layer is measured on the same items. For
  images k is `extraction.positions_per_image`, the same for every image model, so that same-image pairs are the
  same share of every model's pairs (a ViT has 4x the positions of a CNN's last stage);
- where models differ in tokens per item (text: a byte-level model reads about 5x the tokens of a subword model in
  the same window), the text models of the Godey figure keep k = `extraction.positions_per_window` tokens of each
  window, drawn the same way, so that same-window pairs are the same share of every one's pairs.

- text: the tokenizer's ids; padding is never kept, special tokens ([CLS], BOS, ...) only with
  ``special_tokens: include``. CANINE's 12 deep layers run on "molecules" (4 characters each): a molecule is a token,
  except, under ``special_tokens: exclude``, the molecules that hold a special character ([CLS]'s molecule 0 and
  molecule 1, which pools [CLS] with the first 3 characters).
- image: one vector per patch for a vision transformer (ViT, DeiT, BEiT); the [CLS] (and DeiT's distillation) token
  count as special tokens. For a feature map (B, C, H, W) (a CNN stage, CvT, SegFormer) each spatial position is a
  token with C channels. Images are resized by the model's image processor, so no patch is padding.
- audio: one vector per encoder frame (20 ms for wav2vec 2.0, HuBERT and Whisper); frames computed from padding
  (Whisper's padding of every clip to 30 s) are not kept.

A source whose items would change each other's vectors in a shared batch (`solo`) runs one item per forward pass.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch


@dataclass
class Batch:
    inputs: dict[str, torch.Tensor]  # keyword arguments of the forward pass
    items: torch.Tensor  # (B,) index of each row's corpus item (text window, image, clip)
    # one hidden state -> (vectors (B, N, D), keep (B, N) bool on the host, token ids (B, N) or None): the masks
    # come from the inputs, so that choosing the kept vectors never waits for the GPU
    tokens: Callable
    kept: torch.Tensor | None = None  # text: (B, L) the input positions whose vectors are kept


def as_tokens(states: torch.Tensor) -> torch.Tensor:
    """(B, N, D) as is; a feature map (B, C, H, W) as (B, H * W, C), positions in row-major order."""
    return states.flatten(2).transpose(1, 2) if states.dim() == 4 else states


class TextInputs:
    """The first windows that hold the token budget (`plan_windows`), right-padded per batch; with
    `positions_per_window` k (`per_item`), the first windows of at least k tokens, k to be drawn from each.

    CANINE (`per_item`, `solo`) reads characters in its outer layers and molecules in its 12 deep layers
    (modeling_canine.py `CharactersToMolecules.forward`: molecule 0 is [CLS]'s character vector, molecule j >= 1 a
    strided convolution over characters (j-1)*rate .. j*rate-1, the last one truncated). Its windows are tokenized
    as they are read, whole: how many are needed is known only as windows too short for k molecules are skipped. One
    window per pass: in a padded batch a short window gains molecules that mix its last characters with padding,
    which its other molecules attend to, and `_repeat_molecules` fills its last characters from the batch's last
    molecule, so its vectors would depend on the windows beside it.
    """

    unit, modality = "windows", "text"

    def __init__(
        self,
        windows: list[str],
        tokenizer,
        config,
        *,
        n_tokens: int,
        max_length: int,
        exclude_special: bool,
        name: str,
        positions_per_window: int | None = None,
    ):
        self.rate = config.downsampling_rate if config.model_type == "canine" else None
        self.solo = self.rate is not None
        self.per_item = self.solo or positions_per_window is not None
        if self.solo:
            self.windows, self.tokenizer, self.max_length = windows, tokenizer, max_length
            self.exclude_special = exclude_special
        else:
            self.plan = plan_windows(
                tokenizer, windows, n_tokens, max_length, exclude_special, name, per_window=positions_per_window
            )
        self.pad_id = pad_id(tokenizer)

    def __len__(self):
        return len(self.windows) if self.solo else len(self.plan)

    @property
    def kept_tokens(self) -> int:
        """The planned windows' candidate tokens: `n_tokens`, or with k per window all of theirs (k of each kept)."""
        return sum(len(kept) for _, _, kept in self.plan)

    def rows(self, start: int, size: int) -> list[tuple[int, list[int], list[int]]]:
        """(window index, token ids, kept positions) of the batch's windows."""
        if not self.solo:
            return self.plan[start : start + size]
        encoded = self.tokenizer(
            self.windows[start],
            truncation=True,
            max_length=self.max_length,
            return_special_tokens_mask=True,
            return_attention_mask=False,
        )
        return [(start, encoded["input_ids"], kept_positions(encoded["special_tokens_mask"], self.exclude_special))]

    def batch(self, start: int, size: int) -> Batch:
        rows = self.rows(start, size)
        longest = max(len(ids) for _, ids, _ in rows)
        input_ids = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        keep = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, (_, ids, kept) in enumerate(rows):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
            keep[row, kept] = True

        def tokens(states):
            if states.shape[1] == longest:
                return states, keep, input_ids
            # CANINE molecules: [CLS], then molecule j >= 1 pools characters (j-1)*rate .. j*rate-1; a molecule is
            # kept if all its characters are (so none is padding, nor a special character under `exclude`)
            pooled = keep[:, : (states.shape[1] - 1) * self.rate].unflatten(1, (-1, self.rate)).all(2)
            return states, torch.cat([keep[:, :1], pooled], 1), None

        return Batch(
            {"input_ids": input_ids, "attention_mask": attention_mask},
            torch.tensor([window for window, _, _ in rows]),
            tokens,
            keep,
        )


class ImageInputs:
    """Decoded images through the model's image processor (resized, so every patch is image). Every image has the
    same positions per layer, but layers differ (`per_item`); images in a batch do not meet (attention is within an
    image, batch norms run in eval mode), so they are batched."""

    unit, modality = "images", "image"
    per_item, solo = True, False

    def __init__(self, images: list[bytes], processor, config, exclude_special: bool):
        from shape_of_learning.corpus.media import decode_image

        self.images, self.processor, self.decode = images, processor, decode_image
        self.patch_size = getattr(config, "patch_size", None)
        self.exclude_special = exclude_special

    def __len__(self):
        return len(self.images)

    def batch(self, start: int, size: int) -> Batch:
        pixel_values = self.processor(
            [self.decode(data) for data in self.images[start : start + size]], return_tensors="pt"
        )["pixel_values"]
        height, width = pixel_values.shape[-2:]

        def tokens(states):
            vectors = as_tokens(states)
            keep = torch.ones(vectors.shape[:2], dtype=torch.bool)
            if states.dim() == 3 and self.exclude_special and isinstance(self.patch_size, int):
                prefix = vectors.shape[1] - (height // self.patch_size) * (width // self.patch_size)
                keep[:, :prefix] = False  # [CLS] (and DeiT's distillation token) precede the patches
            return vectors, keep, None

        return Batch({"pixel_values": pixel_values}, torch.arange(start, start + len(pixel_values)), tokens)


class AudioInputs:
    """Clips resampled to the feature extractor's rate; frames beyond each clip's own length are padding.

    Whisper pads every clip to 30 s on its own and scales its log-mel per clip (feature_extraction_whisper.py
    `_torch_extract_fbank_features`: the max per item), so clips are batched. wav2vec 2.0 and HuBERT batch only where
    the model was trained with an attention mask and normalises each frame (`return_attention_mask` and
    ``feat_extract_norm: layer``, as feature_extraction_wav2vec2.py's docstring pairs them): the mask makes the
    waveform normalisation use the clip's own samples (`zero_mean_unit_var_norm`) and zeroes padded frames before the
    positional convolution and attention (modeling_wav2vec2.py `Wav2Vec2Encoder.forward`). Base models (group norm,
    no mask: wav2vec2-base, hubert-base) would normalise the waveform and the first convolution's group norm over the
    padded length and attend to padded frames, so each clip runs alone (`solo`).
    """

    unit, modality = "clips", "audio"
    per_item = False

    def __init__(self, clips: list[bytes], feature_extractor, model):
        from shape_of_learning.corpus.media import decode_audio

        self.rate = feature_extractor.sampling_rate
        self.clips = [decode_audio(data, self.rate) for data in clips]
        self.feature_extractor, self.model = feature_extractor, model
        self.whisper = model.config.model_type == "whisper"
        self.masked = (
            not self.whisper
            and feature_extractor.return_attention_mask
            and getattr(model.config, "feat_extract_norm", None) == "layer"
        )
        self.solo = not (self.whisper or self.masked)

    def __len__(self):
        return len(self.clips)

    def frames(self, samples: torch.Tensor) -> torch.Tensor:
        """Encoder frames computed from real samples: wav2vec 2.0/HuBERT's conv stack, or Whisper's 10 ms hop
        halved by its stride-2 convolution (clips are cut at 30 s)."""
        if self.whisper:
            hop = self.feature_extractor.hop_length
            return torch.ceil(samples.clamp(max=self.feature_extractor.n_samples) / (2 * hop)).long()
        return self.model._get_feat_extract_output_lengths(samples)

    def batch(self, start: int, size: int) -> Batch:
        clips = self.clips[start : start + (1 if self.solo else size)]
        if self.whisper:  # Whisper's encoder takes exactly 30 s of log-mel features
            features = self.feature_extractor(clips, sampling_rate=self.rate, return_tensors="pt")
            inputs = {"input_features": features["input_features"]}
        else:
            features = self.feature_extractor(clips, sampling_rate=self.rate, padding=True, return_tensors="pt")
            inputs = {"input_values": features["input_values"]}
            if self.masked:
                inputs["attention_mask"] = features["attention_mask"]
        lengths = self.frames(torch.tensor([len(clip) for clip in clips]))

        def tokens(states):
            keep = torch.arange(states.shape[1]) < lengths[:, None]
            return states, keep, None

        return Batch(inputs, torch.arange(start, start + len(clips)), tokens)


def plan_windows(
    tokenizer,
    windows: list[str],
    n_tokens: int,
    max_length: int,
    exclude_special: bool,
    name: str,
    chunk: int = 256,
    per_window: int | None = None,
) -> list[tuple[int, list[int], list[int]]]:
    """(window index, token ids, kept positions) for the first windows that together hold exactly `n_tokens` kept
    tokens; the last window's kept positions are cut to meet the budget. With `per_window` k: the first
    ceil(n_tokens / k) windows of at least k kept tokens (a shorter one is skipped), their kept positions whole, k of
    each to be drawn (`per_item_positions`). Tokenizes only as far as needed."""
    planned, total = [], 0
    for first in range(0, len(windows), chunk):
        encoded = tokenizer(
            windows[first : first + chunk],
            truncation=True,
            max_length=max_length,
            return_special_tokens_mask=True,
            return_attention_mask=False,
        )
        for offset, (ids, special) in enumerate(zip(encoded["input_ids"], encoded["special_tokens_mask"])):
            kept = kept_positions(special, exclude_special)
            if per_window and len(kept) < per_window:
                continue
            take = min(per_window or len(kept), n_tokens - total)
            if take:
                planned.append((first + offset, ids, kept if per_window else kept[:take]))
                total += take
            if total == n_tokens:
                return planned
    policy = "excluded" if exclude_special else "included"
    usable = f"{len(planned)} windows of at least {per_window} tokens" if per_window else f"{total} usable tokens"
    smaller = "a smaller token budget or extraction.positions_per_window" if per_window else "a smaller token budget"
    raise ValueError(
        f"{name}: the {len(windows)} windows hold {usable} (max_length {max_length}, special tokens {policy}), "
        f"fewer than the budget n_tokens={n_tokens} needs; give more windows, longer windows (raise max_length if "
        f"they are truncated), or {smaller}"
    )


def kept_positions(special_tokens_mask: list[int], exclude_special: bool) -> list[int]:
    return [i for i, is_special in enumerate(special_tokens_mask) if not (exclude_special and is_special)]


def per_item_positions(keeps: list[torch.Tensor], items: torch.Tensor, k: int, budget: int) -> list[torch.Tensor]:
    """Every layer's kept positions (B, N_layer) narrowed to k positions of the same items, at most `budget` in all.

    Rows are taken in order while the budget lasts; a row with fewer than k candidates at some layer is skipped at
    every layer; the last row taken gives only what remains of the budget, at every layer. A layer with more than k
    candidates draws k of them uniformly, with numpy's generator seeded by (item, candidates): the same positions
    whatever the batch size, and the same spatial positions in layers of the same grid.
    """
    keeps = [keep.cpu() for keep in keeps]
    chosen = [torch.zeros_like(keep) for keep in keeps]
    counts = torch.stack([keep.sum(1) for keep in keeps])  # (layers, B)
    for row in range(len(items)):
        take = min(k, budget)
        if take == 0:
            break
        if counts[:, row].min() < k:
            continue
        for keep, out in zip(keeps, chosen):
            candidates = keep[row].nonzero()[:, 0]
            draw = np.random.default_rng([int(items[row]), len(candidates)]).permutation(len(candidates))[:take]
            out[row, candidates[torch.from_numpy(np.sort(draw))]] = True
        budget -= take
    return chosen


def pad_id(tokenizer) -> int:
    """Right padding keeps real tokens at positions 0..n-1 and the attention mask hides the pads, so their id (eos
    for tokenizers without a pad token, like GPT-2 and Pythia) never reaches a kept vector."""
    return next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)
