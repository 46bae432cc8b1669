"""The structure of the configured models as the rehearsal reads it: a view of the model facts (`models.facts`, one
row per Hub repository) with what the pipeline's code makes of each row: the class the extraction loads
(`loaded_as`, `extraction.families.model_class`) and the `FEATURES` it treats differently (`features_of`), both found
by building the row's published architecture on torch's meta device (no memory). The rehearsal's tiny twins are
built from it (`twins`).
"""

import copy
import functools
import re
from dataclasses import dataclass

from shape_of_learning.models import facts

# What the pipeline's code treats differently: the loss head's tying, where the last hidden state is taken (final
# norm), positions (ALiBi, rotary), the block's layout, the encoder-decoder split, CANINE's molecules, the speech front
# ends (frames per second, padding), batch norms at their defaults (extraction.batch_norm)
FEATURES = (
    "alibi",
    "batch_norm",
    "canine_downsampling",
    "encoder_decoder",
    "final_norm",
    "log_mel_frontend",
    "parallel_attention",
    "rotary",
    "tied_head",
    "untied_head",
    "waveform_conv_encoder",
)


@dataclass(frozen=True)
class Structure:
    hub_id: str
    gated: bool
    role: str
    model_type: str
    loaded_as: str
    features: frozenset[str]
    config: dict
    preprocessor: str
    preprocessor_repo: str
    revision_naming: tuple[str, ...]
    revisions: tuple[str, ...]
    weight_files: tuple[str, ...]
    kind: tuple[str, str]  # (kind, modality), as a config entry of the model says them

    def names(self, revision: str) -> bool:
        """Whether `revision` is named as the series names its branches (`{N}`, `{M}`: a number)."""
        return any(
            re.fullmatch(re.escape(template).replace(r"\{N\}", r"\d+").replace(r"\{M\}", r"\d+"), revision)
            for template in self.revision_naming
        )


def table() -> dict[str, Structure]:
    """Every row of the model facts as the rehearsal reads it, by hub_id (built once per process and table)."""
    return _structures(facts.path())


@functools.cache
def _structures(_table) -> dict[str, Structure]:
    return {hub: _structure(hub, row) for hub, row in facts.table().items()}


def _structure(hub: str, row: dict) -> Structure:
    """A row, with the class the extraction loads for it and its features (none for a tokenizer's repository)."""
    loaded_as, features = "", frozenset()
    if row["role"] != "tokenizer":
        import torch

        from shape_of_learning.extraction.families import model_class

        config = facts.build_config(row["config"])
        architecture, _, _ = model_class(copy.deepcopy(config), *kind(row))
        with torch.device("meta"):  # the published width, no memory: T5EncoderModel edits its config, hence the copy
            model = (
                architecture.from_config(copy.deepcopy(config))
                if hasattr(architecture, "from_config")
                else architecture(copy.deepcopy(config))
            )
        loaded_as, features = type(model).__name__, features_of(config, model)
    return Structure(
        hub,
        row["gated"],
        row["role"],
        row["config"]["model_type"],
        loaded_as,
        features,
        {key: value for key, value in row["config"].items() if key != "model_type"},
        row["preprocessor"],
        row["preprocessor_repo"],
        tuple(row["revision_naming"]),
        tuple(row["revisions"]),
        tuple(row["weight_files"]),
        kind(row),
    )


def kind(row: dict) -> tuple[str, str]:
    """(kind, modality) of a row's published class, as a config entry of the model says them."""
    if row["config"]["model_type"] in ("wav2vec2", "hubert", "whisper"):
        return "encoder", "audio"
    architecture = row.get("architecture", "")  # none in a tokenizer's row
    if architecture.endswith("ForImageClassification"):
        return "encoder", "image"
    return ("decoder" if architecture.endswith(("CausalLM", "LMHeadModel")) else "encoder"), "text"


def transformers_config(structure: Structure, **overrides):
    """The row's architecture as a transformers config: its published fields, then `overrides` (a twin's sizes)."""
    return facts.build_config({"model_type": structure.model_type} | structure.config, **overrides)


def features_of(config, model) -> frozenset[str]:
    """The FEATURES of an architecture as the pipeline's code sees it: `config` a transformers config, `model` the
    class the extraction loads built from it (on any device, meta included)."""
    from shape_of_learning.extraction.batch_norm import batch_norms
    from shape_of_learning.extraction.families import last_layer_after_final_norm

    family = config.model_type
    found = {
        "alibi": family == "bloom" or (family == "falcon" and config.alibi),
        "rotary": family in ("gpt_neox", "gptj", "llama", "olmo") or (family == "falcon" and not config.alibi),
        "parallel_attention": (
            family == "gptj"
            or (family == "gpt_neox" and config.use_parallel_residual)
            or (family == "falcon" and config.parallel_attn)
        ),
        "final_norm": bool(last_layer_after_final_norm(config)),
        "encoder_decoder": config.is_encoder_decoder,
        "canine_downsampling": family == "canine" and config.downsampling_rate > 1,
        "waveform_conv_encoder": family in ("wav2vec2", "hubert"),
        "log_mel_frontend": family == "whisper",
        "batch_norm": bool(batch_norms(model)),
    }
    if model.get_output_embeddings() is not None:  # a language-model head: tied to the input embeddings or not
        found["tied_head" if config.tie_word_embeddings else "untied_head"] = True
    return frozenset(name for name, present in found.items() if present)
