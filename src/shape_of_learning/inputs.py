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

import math
from dataclasses import dataclass
from typing import Callable

import torch
from transformers import AutoModel

T5_FAMILIES = ("t5", "mt5", "umt5")
STAGE_FAMILIES = ("resnet", "convnext", "convnextv2", "regnet")  # embedding output + one state per stage


def model_class(config):
    """The transformers class to load: the encoder alone for encoder-decoders (ByT5, Whisper), else AutoModel.

    WhisperForAudioClassification is Whisper's encoder under a (unused, randomly initialised) head: it loads the
    encoder weights of any Whisper checkpoint and returns the encoder's hidden states.
    """
    if config.model_type in T5_FAMILIES:
        from transformers import T5EncoderModel
        return T5EncoderModel
    if config.model_type == "whisper":
        from transformers import WhisperForAudioClassification
        return WhisperForAudioClassification
    return AutoModel


def depth(config) -> int:
    """Hidden states of one forward pass minus one: a model entry's ``layers`` (layer 0 is the first state).

    Transformers: blocks (the embedding output is layer 0). CANINE: 16 = char embeddings, its initial char layer, the
    initial molecules, 12 deep layers, the upsampled projection and the final char layer. ResNet/ConvNeXt: stages
    (layer 0 the stem's output); EfficientNet: MBConv blocks (16 in b0); SegFormer and CvT return their stages only,
    so their layer 0 is stage 1's output.
    """
    family = config.model_type
    if family == "canine":
        return config.num_hidden_layers + 4
    if family in T5_FAMILIES:
        return config.num_layers
    if family == "whisper":
        return config.encoder_layers
    if family in STAGE_FAMILIES:
        return len(config.depths)
    if family == "segformer":
        return config.num_encoder_blocks - 1
    if family == "cvt":
        return len(config.depth) - 1
    if family == "efficientnet":
        return sum(math.ceil(config.depth_coefficient * repeats) for repeats in config.num_block_repeats)
    return config.num_hidden_layers


@dataclass
class Batch:
    inputs: dict[str, torch.Tensor]  # keyword arguments of the forward pass
    items: torch.Tensor  # (B,) index of each row's corpus item (text window, image, clip)
    tokens: Callable  # one hidden state -> (vectors (B, N, D), keep (B, N) bool, token ids (B, N) or None)


def as_tokens(states: torch.Tensor) -> torch.Tensor:
    """(B, N, D) as is; a feature map (B, C, H, W) as (B, H * W, C), positions in row-major order."""
    return states.flatten(2).transpose(1, 2) if states.dim() == 4 else states


class TextInputs:
    """Windows planned by the tokenizer (see `extract._plan_windows`), right-padded per batch."""

    unit = "windows"

    def __init__(self, plan, pad_id: int, config):
        self.plan, self.pad_id = plan, pad_id
        self.rate = config.downsampling_rate if config.model_type == "canine" else None

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
                     torch.tensor([window for window, _, _ in rows]), tokens)


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
