"""The structure of the paper's models: the committed table (structure.csv, package data) with one row per Hub
repository that config.yaml names (a model's `hub_id`, a checkpoint's own repository, a `tokenizer` repository), and
what of each the pipeline's code depends on. The rehearsal's tiny twins are built from it.

Columns:

- hub_id, gated (`yes`: downloads need a token with the licence accepted), role: `model` (an entry's own repository), `checkpoint` (a checkpoint in a repository of its own, as
  TinyLlama's) or `tokenizer` (read for its tokenizer only, as Bloom's base repositories);
- model_type: the config.json's `model_type` (a key of transformers' CONFIG_MAPPING);
- loaded_as: the class the extraction loads (`extraction.families.model_class`), empty for a tokenizer repository;
- features: `FEATURES` the model has, `;`-separated;
- config: the structural keys of the published config.json where they differ from the transformers class's defaults
  (JSON): with `model_type`, enough to rebuild the architecture's shape at any width;
- preprocessor, preprocessor_files, preprocessor_repo: the tokenizer or feature extractor class, the files it reads,
  and the repository it is read from (Bloom's intermediate branches hold none);
- revision_naming, revisions: the series' branch names (`step{N}`, `global_step{N}`, ...; `{N}`, `{M}` a number,
  `|` between alternatives) and two or three of them;
- weight_files: the weight files of one checkpoint, `;`-separated (`.bin`-only and sharded ones named);
- checked: `page` (the cited page was read for this table), `files` (the repository's file tree was read for
  cost/model_sizes.csv), `no` (from the model card and config.json as known, not re-read); source, note.
"""

import csv
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("structure.csv")
ROLES = ("model", "checkpoint", "tokenizer")
CHECKED = ("page", "files", "no")
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

    def names(self, revision: str) -> bool:
        """Whether `revision` is named as the series names its branches (`{N}`, `{M}`: a number)."""
        return any(
            re.fullmatch(re.escape(template).replace(r"\{N\}", r"\d+").replace(r"\{M\}", r"\d+"), revision)
            for template in self.revision_naming
        )


@functools.cache
def table() -> dict[str, Structure]:
    """The committed table, by hub_id; a row with an unknown role, feature or `checked` is refused by name."""
    with TABLE.open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    found = {}
    for row in rows:
        features = frozenset(filter(None, row["features"].split(";")))
        if (
            row["role"] not in ROLES
            or row["gated"] not in ("yes", "no")
            or row["checked"] not in CHECKED
            or features - set(FEATURES)
        ):
            raise ValueError(
                f"{TABLE}: row {row['hub_id']}: role must be one of {ROLES}, checked one of {CHECKED}, "
                f"features among {FEATURES}"
            )
        found[row["hub_id"]] = Structure(
            row["hub_id"],
            row["gated"] == "yes",
            row["role"],
            row["model_type"],
            row["loaded_as"],
            features,
            json.loads(row["config"]),
            row["preprocessor"],
            row["preprocessor_repo"],
            tuple(row["revision_naming"].split("|")),
            tuple(row["revisions"].split(";")),
            tuple(row["weight_files"].split(";")),
        )
    return found


def repositories(models: dict[str, dict]) -> dict[str, str]:
    """Every Hub repository a config's models name, with its role: {hub_id: role}."""
    found = {}
    for entry in models.values():
        if entry.get("hub_id"):
            found.setdefault(entry["hub_id"], "model")
        if entry.get("tokenizer"):
            found.setdefault(entry["tokenizer"], "tokenizer")
        for item in entry.get("checkpoints") or []:
            if isinstance(item, dict) and item.get("hub_id"):
                found.setdefault(item["hub_id"], "checkpoint")
    return found


def missing(models: dict[str, dict]) -> list[str]:
    """The repositories of `models` that the table has no row for."""
    return sorted(set(repositories(models)) - set(table()))


def transformers_config(structure: Structure, **overrides):
    """The row's architecture as a transformers config: the class of its model_type with its structural keys, then
    `overrides` (a twin's widths)."""
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[structure.model_type](**(structure.config | overrides))


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
