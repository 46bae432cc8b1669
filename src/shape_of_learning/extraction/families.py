"""What differs between model families: the class that loads one (with the head its loss needs), its depth in hidden
states, its final norm, and the weights that lie outside its hidden states.

A model entry's ``layers`` is checked against `depth` before any weight loads; a family missing from the final-norm
table is measured all the same and recorded as unknown (`last_layer_after_final_norm` is None). A family missing from
the table of weights outside the hidden states (`OUTSIDE_HIDDEN_STATES`) loads only where its checkpoint and its class
hold exactly the same weights (`extraction.loading`).
"""

import math
from contextlib import contextmanager
from typing import NamedTuple

NEXT_TOKEN, MASKED_LM = "next-token", "masked-lm"  # the two losses a checkpoint can report (extraction.loss)

T5_FAMILIES = ("t5", "mt5", "umt5")
STAGE_FAMILIES = ("resnet", "convnext", "convnextv2", "regnet")  # embedding output + one state per stage


def model_class(config, kind: str, modality: str, head: bool = True) -> tuple[type, str | None, str]:
    """The transformers class to load, the loss it can report (NEXT_TOKEN, MASKED_LM or None) and why not; with
    `head` False (no loss asked for), the model without a head.

    Text decoders load with their language-model head (AutoModelForCausalLM), text encoders with their masked-LM head
    (AutoModelForMaskedLM) where transformers has one for the family: the hidden states are the base model's either
    way, and the head gives the checkpoint's loss (`extraction.loss`). The encoder alone of encoder-decoders (ByT5,
    Whisper) and vision, speech and CNN models report no loss: the encoder has no language-model head, and an image
    or speech classifier's head predicts labels that the sampled corpus does not carry.
    WhisperForAudioClassification is Whisper's encoder under a (unused, randomly initialised) head: it loads the
    encoder weights of any Whisper checkpoint and returns the encoder's hidden states.
    """
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM  # here: the dry run reads `depth`

    if config.model_type in T5_FAMILIES:
        from transformers import T5EncoderModel

        return T5EncoderModel, None, "measured encoder-only: the encoder has no language-model head"
    if config.model_type == "whisper":
        from transformers import WhisperForAudioClassification

        return WhisperForAudioClassification, None, "measured encoder-only: the encoder has no language-model head"
    if not head:
        return AutoModel, None, "not asked for (extraction.loss.tokens: 0)"
    if modality != "text":
        return AutoModel, None, f"an {modality} model's head predicts labels the sampled corpus does not carry"
    heads = {"decoder": (AutoModelForCausalLM, NEXT_TOKEN), "encoder": (AutoModelForMaskedLM, MASKED_LM)}
    head, loss = heads.get(kind, (None, None))
    if head is None or type(config) not in head._model_mapping:
        return AutoModel, None, f"transformers has no {loss or 'language-model'} head for family {config.model_type!r}"
    return head, loss, ""


def random_model(architecture: type, config, trust_remote_code: bool = False):
    """`architecture` (a `model_class`) built from `config` with randomly initialised weights. The Auto classes build
    through `from_config` (remote code included); the concrete ones (T5EncoderModel, WhisperForAudioClassification)
    have no `from_config` and build through their constructor."""
    if hasattr(architecture, "from_config"):
        return architecture.from_config(config, trust_remote_code=trust_remote_code)
    return architecture(config)


def depth(config) -> int:
    """Hidden states of one forward pass minus one: a model entry's ``layers`` (layer 0 is the first state).

    Transformers: blocks (the embedding output is layer 0). CANINE: 16 = char embeddings, its initial char layer, the
    initial molecules, 12 deep layers, the upsampled projection and the final char layer. ResNet/ConvNeXt: stages
    (layer 0 the stem's output); EfficientNet: MBConv blocks (16 in b0); SegFormer returns its stages only, so its
    layer 0 is stage 1's output; CvT is measured at every block (`HOOKED_BLOCKS`), so its layer 0 is the first
    block's output (13 blocks in CvT-13: layers 0-12).
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
        return sum(config.depth) - 1
    if family == "efficientnet":
        return sum(math.ceil(config.depth_coefficient * repeats) for repeats in config.num_block_repeats)
    return config.num_hidden_layers


def _cvt_feature_map(tokens, height: int, width: int):
    """A CvT block's output (B, [CLS] + H * W, C) as its stage returns the last one: the feature map (B, C, H, W),
    without stage 3's [CLS] token (`CvtStage.forward`)."""
    return tokens[:, -height * width :].transpose(1, 2).reshape(len(tokens), -1, height, width)


# Families whose forward pass returns fewer states than they have blocks, measured at every block through a forward
# hook on each (the block's class, and its output as a state): CvtModel returns its 3 stage outputs only, and 10 of
# CvT-13's 13 blocks lie inside stage 3. A block is called as block(hidden_state, height, width).
HOOKED_BLOCKS = {"cvt": ("CvtLayer", lambda args, output: _cvt_feature_map(output, *args[1:]))}


@contextmanager
def block_states(model):
    """Within it, a list that `model`'s forward passes fill with every block's output, in the order they run, for a
    family of `HOOKED_BLOCKS`; None for any other (its `hidden_states` hold every block)."""
    if model.config.model_type not in HOOKED_BLOCKS:
        yield None
        return
    block, state = HOOKED_BLOCKS[model.config.model_type]
    states = []
    hooks = [
        module.register_forward_hook(lambda _, args, output: states.append(state(args, output)))
        for module in model.modules()
        if type(module).__name__ == block
    ]
    try:
        yield states
    finally:
        for hook in hooks:
            hook.remove()


# Families whose states float16 cannot hold, and why: auto gives them float32 where a GPU lacks bfloat16 (whose
# exponent range is float32's), and float16 is refused (`loading.device_and_dtype`).
FLOAT16_UNDERFLOWS = {
    "efficientnet": "at transformers' initialisation its states shrink block by block below float16's smallest "
    "value (batch-norm scales from N(0, 0.02)): a random-init baseline's blocks 2-10 would be zeros",
}


# Is hidden_states[-1] taken after the final norm, a norm that follows the last block only? transformers 5 ties the
# last hidden state to `last_hidden_state` (`capture_outputs`), so pre-LN stacks record it after their final norm:
# decoders, the T5 encoder (final_layer_norm), Whisper's encoder (layer_norm). wav2vec 2.0 and HuBERT opt out
# (`capture_outputs(tie_last_hidden_states=False)`): even their pre-LN ("stable") variants record the last block's
# output. Post-LN stacks have no final norm (BERT, CANINE). The vision models record their last block's output before
# any final norm (`capture_outputs(tie_last_hidden_states=False)`): ViT and DeiT apply their layernorm to the whole
# sequence after it (BEiT too, or, with mean pooling, to the pooled output only), EfficientNet its top_conv and top_bn
# to the whole last feature map; ConvNeXt's layernorm and CvtForImageClassification's norm the pooled output only;
# SegFormer normalises every stage alike. Verified family by family against the models' own forward pass by
# tests/test_extract.py (text) and tests/test_modality.py (the other families).
_LAST_AFTER_FINAL_NORM = {
    "gpt_neox": True,
    "bloom": True,
    "llama": True,
    "gpt2": True,
    "gptj": True,
    "falcon": True,
    "olmo": True,
    "t5": True,
    "mt5": True,
    "umt5": True,
    "whisper": True,
    "wav2vec2": False,
    "hubert": False,
    "bert": False,
    "roberta": False,
    "albert": False,
    "canine": False,
    "vit": False,
    "deit": False,
    "beit": False,
    "cvt": False,
    "segformer": False,
    "resnet": False,
    "convnext": False,
    "convnextv2": False,
    "regnet": False,
    "efficientnet": False,
}


def last_layer_after_final_norm(config) -> bool | None:
    """Whether the last hidden state of this model family is post final norm; None for a family not checked."""
    if config.model_type == "opt":  # OPT-350m is post-LN and has no final norm
        return config.do_layer_norm_before and not config._remove_final_layer_norm
    return _LAST_AFTER_FINAL_NORM.get(config.model_type)


class Outside(NamedTuple):
    """A family's weights outside its hidden states, by the first component of a weight's name after the loaded
    model's ``base_model_prefix`` (`component`): `head`, the loss head of the class loaded for a loss (its weights
    missing from a checkpoint: no loss, `extraction.loading`); `other`, heads and poolers a checkpoint may lack or
    carry for another class, and modules of the checkpoint the measured class does not use.

    What transformers (5.24) already drops from its loading info needs no declaration: the legacy buffers a class
    ignores (`_keys_to_ignore_on_load_unexpected`, `rotary_emb.inv_freq`, `position_ids`), legacy names it renames on
    load, and a tied weight whose source the checkpoint holds (GPT-2's head, T5's `encoder.embed_tokens`)."""

    head: tuple[str, ...] = ()
    other: tuple[str, ...] = ()


# The weights a checkpoint may lack, or hold beyond the class loaded, without touching the hidden states measured:
# any other missing or unexpected weight fails the load (`extraction.loading`). Not declared (`Outside`): GPT-2's
# `attn.bias`, GPT-NeoX's and GPT-J's `attention.bias`/`masked_bias`, BEiT's `relative_position_index`, LayerNorm.gamma/
# beta and wav2vec 2.0's `weight_g`/`weight_v` (renamed on load), all of which transformers drops or renames itself.
# Sources: the classes' modules in transformers/models/*/modeling_*.py, and the loading reports of the real checkpoints:
# bert-base-uncased carries `cls.seq_relationship` (NSP) and `bert.pooler`, which BertForMaskedLM does not build
# (huggingface/transformers#5404, #8887); ViT checkpoints carry `classifier` and lack the pooler ViTModel builds
# (google-research/vision_transformer#150); wav2vec 2.0 and HuBERT fine-tunes carry a CTC `lm_head` and lack
# `masked_spec_embed` (Zejun-Yang/AniPortrait#78: wav2vec2-base-960h; yerfor/GeneFace#74: hubert-large-ls960-ft).
_CAUSAL = Outside(head=("lm_head",))
_IMAGE_CLASSIFIER = Outside(other=("classifier",))  # *ForImageClassification's head, in checkpoints loaded as AutoModel
_ENCODER_DECODER = Outside(other=("decoder", "lm_head"))  # T5EncoderModel measures the encoder of a whole T5 checkpoint
OUTSIDE_HIDDEN_STATES: dict[str, Outside] = {
    "bert": Outside(head=("cls",), other=("pooler",)),  # `cls` holds the NSP head too; BertForMaskedLM has no pooler
    "roberta": Outside(head=("lm_head",), other=("pooler",)),  # roberta-base carries `roberta.pooler`
    "albert": Outside(head=("predictions",), other=("pooler", "sop_classifier")),  # AlbertForPreTraining's SOP head
    "gpt2": _CAUSAL,
    "opt": _CAUSAL,
    "llama": _CAUSAL,
    "gptj": _CAUSAL,
    "falcon": _CAUSAL,
    "gpt_neox": Outside(head=("lm_head", "embed_out")),  # Pythia's `embed_out`, renamed `lm_head` by transformers 5
    "bloom": _CAUSAL,
    "olmo": _CAUSAL,
    **{family: _ENCODER_DECODER for family in T5_FAMILIES},
    "canine": Outside(other=("pooler",)),
    # Wav2Vec2ForPreTraining's quantizer and projections (facebook/wav2vec2-base), a CTC fine-tune's `lm_head`, and the
    # mask embedding, used only to mask frames in training (SpecAugment): the extraction runs in eval mode, unmasked
    "wav2vec2": Outside(other=("quantizer", "project_q", "project_hid", "lm_head", "masked_spec_embed")),
    "hubert": Outside(other=("lm_head", "masked_spec_embed")),
    # WhisperForAudioClassification: the checkpoint's decoder and its tied `proj_out` unused, the class's own
    # `projector` and `classifier` random (`model_class`)
    "whisper": Outside(other=("decoder", "proj_out", "projector", "classifier")),
    "vit": Outside(other=("pooler", "classifier")),  # ViTForImageClassification (DeiT's checkpoints too) has no pooler
    "deit": Outside(other=("pooler", "classifier", "cls_classifier", "distillation_classifier")),
    "beit": Outside(other=("pooler", "classifier")),  # the pooler: BeitForMaskedImageModeling's checkpoints lack it
    "cvt": Outside(other=("layernorm", "classifier")),  # CvtForImageClassification's norm of the pooled [CLS] token
    "segformer": Outside(other=("classifier", "decode_head")),  # mit-b0 (classification), or a segmentation head
    "resnet": _IMAGE_CLASSIFIER,
    "efficientnet": _IMAGE_CLASSIFIER,
    "convnext": _IMAGE_CLASSIFIER,
    "convnextv2": _IMAGE_CLASSIFIER,
    "regnet": _IMAGE_CLASSIFIER,
}


def component(key: str, prefix: str) -> str:
    """The first component of a weight's name after the loaded model's `prefix` (its ``base_model_prefix``):
    ``bert.pooler.dense.weight`` -> ``pooler``, ``cls.predictions.bias`` -> ``cls``, Whisper's
    ``model.decoder.layers.0.fc1.weight`` -> ``decoder``."""
    if prefix and key.startswith(f"{prefix}."):
        key = key[len(prefix) + 1 :]
    return key.split(".", 1)[0]


def outside_hidden_states(config) -> Outside | None:
    """The weights outside the hidden states of the family of `config` (`OUTSIDE_HIDDEN_STATES`); None for a family
    not declared there."""
    return OUTSIDE_HIDDEN_STATES.get(config.model_type)
