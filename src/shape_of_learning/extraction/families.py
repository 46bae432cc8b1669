"""What differs between model families: the class that loads one (with the head its loss needs), its depth in hidden
states, its final norm.

A model entry's ``layers`` is checked against `depth` before any weight loads; a family missing from the final-norm
table is measured all the same and recorded as unknown (`last_layer_after_final_norm` is None).
"""

import math

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


# Is hidden_states[-1] taken after the final norm, a norm that follows the last block only? transformers 5 ties the
# last hidden state to `last_hidden_state` (`capture_outputs`), so pre-LN stacks record it after their final norm:
# decoders, the T5 encoder (final_layer_norm), Whisper's encoder (layer_norm). wav2vec 2.0 and HuBERT opt out
# (`capture_outputs(tie_last_hidden_states=False)`): even their pre-LN ("stable") variants record the last block's
# output. Post-LN stacks have no final norm (BERT, CANINE); vision transformers and CNNs apply theirs, if any, to the
# pooled output only (ViT, DeiT, BEiT, CvT and ConvNeXt's layernorm, EfficientNet's top_bn after its top_conv);
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
