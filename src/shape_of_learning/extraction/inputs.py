"""What a model reads and which of its vectors count as tokens, per modality (text, image, audio).

The extractor asks an input source for batches: the forward pass's keyword arguments and, for each hidden state it
returns, the token vectors to keep. Every layer then keeps its first `n_tokens` kept vectors, in item order.

- text: the tokenizer's ids; padding is never kept, special tokens ([CLS], BOS, ...) only with
  ``special_tokens: include``. CANINE's 12 deep layers run on "molecules" (4 characters each): a molecule is a token,
  except molecule 0 ([CLS]) and molecules made only of padding.
- image: one vector per patch for a vision transformer (ViT, DeiT, BEiT); the [CLS] (and DeiT's distillation) token
  count as special tokens. For a feature map (B, C, H, W) (a CNN stage, CvT, SegFormer) each spatial position is a
  token with C channels. Images are resized by the model's image processor, so no patch is padding.
- audio: one vector per encoder frame (20 ms for wav2vec 2.0, HuBERT and Whisper); frames computed from padding
  (batch padding, Whisper's padding of every clip to 30 s) are not kept.
"""

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class Batch:
    inputs: dict[str, torch.Tensor]  # keyword arguments of the forward pass
    items: torch.Tensor  # (B,) index of each row's corpus item (text window, image, clip)
    tokens: Callable  # one hidden state -> (vectors (B, N, D), keep (B, N) bool, token ids (B, N) or None)
    kept: torch.Tensor | None = None  # text: (B, L) the input positions whose vectors are kept


def as_tokens(states: torch.Tensor) -> torch.Tensor:
    """(B, N, D) as is; a feature map (B, C, H, W) as (B, H * W, C), positions in row-major order."""
    return states.flatten(2).transpose(1, 2) if states.dim() == 4 else states


class TextInputs:
    """The first windows that hold the token budget (`plan_windows`), right-padded per batch.

    CANINE's deep layers see one molecule per `downsampling_rate` characters, so its budget is planned in characters:
    `n_tokens` molecules need about `n_tokens` x (rate + 1) characters.
    """

    unit = "windows"

    def __init__(self, windows: list[str], tokenizer, config, *, n_tokens: int, max_length: int,
                 exclude_special: bool, name: str):
        self.rate = config.downsampling_rate if config.model_type == "canine" else None
        budget = n_tokens * (self.rate + 1) if self.rate else n_tokens
        self.plan = plan_windows(tokenizer, windows, budget, max_length, exclude_special, name)
        self.pad_id = pad_id(tokenizer)

    def __len__(self):
        return len(self.plan)

    def batch(self, start: int, size: int) -> Batch:
        rows = self.plan[start:start + size]
        longest = max(len(ids) for _, ids, _ in rows)
        input_ids = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        keep = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, (_, ids, kept) in enumerate(rows):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            attention_mask[row, :len(ids)] = 1
            keep[row, kept] = True

        def tokens(states):
            if states.shape[1] == longest:
                return states, keep.to(states.device), input_ids
            # CANINE molecules: [CLS], then molecule j >= 1 pools characters (j-1)*rate .. j*rate-1
            molecules = attention_mask[:, :(states.shape[1] - 1) * self.rate].unflatten(1, (-1, self.rate)).amax(2)
            return states[:, 1:], molecules.bool().to(states.device), None

        return Batch({"input_ids": input_ids, "attention_mask": attention_mask},
                     torch.tensor([window for window, _, _ in rows]), tokens, keep)


class ImageInputs:
    """Decoded images through the model's image processor (resized, so every patch is image)."""

    unit = "images"

    def __init__(self, images: list[bytes], processor, config, exclude_special: bool):
        from shape_of_learning.corpus.media import decode_image

        self.images, self.processor, self.decode = images, processor, decode_image
        self.patch_size = getattr(config, "patch_size", None)
        self.exclude_special = exclude_special

    def __len__(self):
        return len(self.images)

    def batch(self, start: int, size: int) -> Batch:
        pixel_values = self.processor([self.decode(data) for data in self.images[start:start + size]],
                                      return_tensors="pt")["pixel_values"]
        height, width = pixel_values.shape[-2:]

        def tokens(states):
            vectors = as_tokens(states)
            keep = torch.ones(vectors.shape[:2], dtype=torch.bool, device=vectors.device)
            if states.dim() == 3 and self.exclude_special and isinstance(self.patch_size, int):
                prefix = vectors.shape[1] - (height // self.patch_size) * (width // self.patch_size)
                keep[:, :prefix] = False  # [CLS] (and DeiT's distillation token) precede the patches
            return vectors, keep, None

        return Batch({"pixel_values": pixel_values}, torch.arange(start, start + len(pixel_values)), tokens)


class AudioInputs:
    """Clips resampled to the feature extractor's rate; frames beyond each clip's own length are padding."""

    unit = "clips"

    def __init__(self, clips: list[bytes], feature_extractor, model):
        from shape_of_learning.corpus.media import decode_audio

        self.rate = feature_extractor.sampling_rate
        self.clips = [decode_audio(data, self.rate) for data in clips]
        self.feature_extractor, self.model = feature_extractor, model
        self.whisper = model.config.model_type == "whisper"

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
        clips = self.clips[start:start + size]
        if self.whisper:  # Whisper's encoder takes exactly 30 s of log-mel features
            features = self.feature_extractor(clips, sampling_rate=self.rate, return_tensors="pt")
            inputs = {"input_features": features["input_features"]}
        else:
            features = self.feature_extractor(clips, sampling_rate=self.rate, padding=True, return_tensors="pt")
            inputs = {"input_values": features["input_values"]}
            if self.feature_extractor.return_attention_mask:  # models trained with one; base models zero-pad
                inputs["attention_mask"] = features["attention_mask"]
        lengths = self.frames(torch.tensor([len(clip) for clip in clips]))

        def tokens(states):
            keep = torch.arange(states.shape[1], device=states.device) < lengths.to(states.device)[:, None]
            return states, keep, None

        return Batch(inputs, torch.arange(start, start + len(clips)), tokens)


def plan_windows(tokenizer, windows: list[str], n_tokens: int, max_length: int, exclude_special: bool,
                 name: str, chunk: int = 256) -> list[tuple[int, list[int], list[int]]]:
    """(window index, token ids, kept positions) for the first windows that together hold exactly `n_tokens` kept
    tokens; the last window's kept positions are cut to meet the budget. Tokenizes only as far as needed."""
    planned, total = [], 0
    for first in range(0, len(windows), chunk):
        encoded = tokenizer(windows[first:first + chunk], truncation=True, max_length=max_length,
                            return_special_tokens_mask=True, return_attention_mask=False)
        for offset, (ids, special) in enumerate(zip(encoded["input_ids"], encoded["special_tokens_mask"])):
            kept = [i for i, is_special in enumerate(special) if not (exclude_special and is_special)]
            kept = kept[:n_tokens - total]
            if kept:
                planned.append((first + offset, ids, kept))
                total += len(kept)
            if total == n_tokens:
                return planned
    policy = "excluded" if exclude_special else "included"
    raise ValueError(f"{name}: the {len(windows)} windows hold {total} usable tokens (max_length {max_length}, "
                     f"special tokens {policy}), fewer than the budget n_tokens={n_tokens}; give more windows, "
                     "longer windows (raise max_length if they are truncated), or a smaller token budget")


def pad_id(tokenizer) -> int:
    """Right padding keeps real tokens at positions 0..n-1 and the attention mask hides the pads, so their id (eos
    for tokenizers without a pad token, like GPT-2 and Pythia) never reaches a kept vector."""
    return next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)
