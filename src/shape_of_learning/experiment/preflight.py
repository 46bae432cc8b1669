"""The run checked before any job, offline, while Snakemake plans it (common.smk): the local data its jobs would read,
and each model's `layers:` against its config.json.

Local data: each configured path that a job still to run reads and that does not exist (`missing_data`): the text
corpus's `local_path`, the image and audio corpora's, a fine-tuning dataset's. Each is one line naming the key, where
to get the data and how to run without it, and the models that cannot be had without it. A dry run prints the lines
and plans the whole run; a real run refuses to start, before anything is written, unless --keep-going leaves out what
needs those models (common.smk). A path whose job's output exists is no longer read and is not checked.

Layers: a model's config.json, wherever one can be read here, gives the model's depth (`extraction.families.depth`),
which its `layers:` must equal (`layer_problems`): a `path:` or `package:` directory's; a Hub checkpoint's at the
commit its lock pins, from the Hugging Face cache's snapshot of that commit; with HF_HUB_OFFLINE (where the pin job
too pins from the cache) the cache's snapshot of its configured revision. Online and unpinned, the cache's ref may be
older than the branch (upstream fixed since): nothing is checked, the pin job reads the Hub and the extraction checks
the depth it loads. Models the pipeline trains have the depth their entry gives them.
config.json is read as JSON, not through transformers, whose import would cost a dry run seconds: where it leaves a
value to the config class's default, or names the block count ambiguously, nothing is checked.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import constants

from shape_of_learning import paths
from shape_of_learning.corpus import MODALITIES
from shape_of_learning.experiment.plan import Experiment
from shape_of_learning.extraction.families import depth
from shape_of_learning.models import hf_cache
from shape_of_learning.models.checkpoints import Checkpoint
from shape_of_learning.rajaee_pilehvar.plan import parse_reference

# The names config classes store their block count under, aliased to `num_hidden_layers` (their `attribute_map`):
# GPT-2, GPT-J and Bloom n_layer, MPT n_layers, T5-style num_layers
BLOCK_COUNT_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")


@dataclass(frozen=True)
class MissingData:
    """A configured local path that a job still to run reads, and does not exist."""

    key: str  # the config key, e.g. image_corpus.local_path
    path: str
    models: tuple[str, ...]  # the models that cannot be had without it
    line: str  # what to tell: the path, where to get it, how to run without it


def missing_data(config: dict, experiment: Experiment) -> list[MissingData]:
    """Every configured local path a job still to run reads and that does not exist (module docstring)."""
    found = []
    corpus = config["corpus"]
    text = tuple(model for model, entry in experiment.models.items() if entry["modality"] == "text")
    if corpus["local_path"] and not corpus["gensim_sample"] and not Path(paths.raw_corpus(corpus["name"])).exists():
        fallback = (
            f"set it to null to download {corpus['url']} (corpus.url)"
            if corpus["url"]
            else "set corpus.url to download it instead"
        )
        found += _missing(
            "corpus.local_path",
            corpus["local_path"],
            text,
            f"the text corpus {corpus['name']}",
            f"point corpus.local_path at your copy, or {fallback}",
        )
    media = [modality for modality in MODALITIES if modality != "text" and _media_missing(config, experiment, modality)]
    kept = ",".join(modality for modality in config["modalities"] if modality not in media)
    for modality in media:
        spec = config[f"{modality}_corpus"]
        where = f" from {spec['homepage']}" if spec["homepage"] else ""
        found += _missing(
            f"{modality}_corpus.local_path",
            spec["local_path"],
            tuple(model for model, entry in experiment.models.items() if entry["modality"] == modality),
            f"the {modality} corpus {spec['name']}{where}",
            f"point {modality}_corpus.local_path at your copy (a folder or a .zip/.tar archive), or "
            f"leave out the {' and '.join(media)} models: --config modalities=[{kept}]",
        )
    for name, spec in config.get("rajaee_pilehvar", {}).get("datasets", {}).items():
        models = tuple(
            model
            for model, entry in experiment.models.items()
            if parse_reference(entry.get("finetune", {}).get("data", ""))[0] == name
        )
        if spec["local_path"] and not Path(paths.dataset(name)).exists():
            fallback = f"set it to null to download {spec['url']}" if spec["url"] else "set its url instead"
            found += _missing(
                f"rajaee_pilehvar.datasets.{name}.local_path",
                spec["local_path"],
                models or tuple(model for pair in experiment.pairs for model in pair.finetuned_models),
                f"the dataset {name}",
                f"point it at your copy, or {fallback}",
            )
    return found


def _media_missing(config: dict, experiment: Experiment, modality: str) -> bool:
    """Whether a planned model reads `modality` from a local path that its sample_media job, still to run, lacks."""
    spec = config.get(f"{modality}_corpus")
    return (
        any(entry["modality"] == modality for entry in experiment.models.values())
        and not spec["sklearn_digits"]
        and not Path(paths.media(spec["name"], modality)).exists()
        and not (spec["local_path"] and Path(spec["local_path"]).expanduser().exists())
    )


def _missing(key: str, path: str | None, models: tuple[str, ...], what: str, fix: str) -> list[MissingData]:
    if path and Path(path).expanduser().exists():
        return []
    state = f"{path} does not exist" if path else "is not set"
    return [MissingData(key, path or "", models, f"{key}: {state}: {what}. Fix: {fix}")]


def layer_problems(experiment: Experiment, configfiles: str = "CONFIG") -> list[str]:
    """One line per model whose `layers:` differs from the depth its config.json gives, naming the right value (and,
    where a lock gave the config.json, how to renew it: `configfiles` are the run's config files, for the command)."""
    found = []
    for model, entry in experiment.models.items():
        if "train" in entry or "finetune" in entry or entry["trust_remote_code"]:
            continue  # the pipeline's own models have the depth of their entry; remote code is not read here
        checkpoint, config_file = next(
            ((ckpt, file) for ckpt in reversed(experiment.checkpoints[model]) if (file := local_config(ckpt))),
            (None, None),
        )
        blocks = config_depth(config_file) if config_file else None
        if blocks is not None and blocks != entry["layers"]:
            found.append(
                f"model {model!r}: layers: {entry['layers']} in the config, but its config.json "
                f"({config_file}{_pinned_by(checkpoint)}) gives a depth of {blocks}; set `layers: {blocks}`"
                + _renew(checkpoint, configfiles)
            )
    return found


def _pinned_by(checkpoint: Checkpoint) -> str:
    lock = Path(paths.lock(checkpoint.model, checkpoint.name))
    return f", at the commit {lock} pins" if checkpoint.source == "hub" and lock.is_file() else ""


def _renew(checkpoint: Checkpoint, configfiles: str) -> str:
    """How to pin a Hub model's checkpoints again, where a lock gave the config.json: upstream may have fixed it."""
    if not _pinned_by(checkpoint):
        return ""
    return (
        ". If upstream has fixed the model since it was pinned, renew its locks: "
        f"`{renew_command(configfiles, checkpoint.model)}`"
    )


def renew_command(configfiles: str, model: str) -> str:
    """The command that pins a model's pinned checkpoints again on the Hub (`models.pinning.renew`)."""
    return f"python -m shape_of_learning renew {configfiles} --model {model}"


def local_config(checkpoint: Checkpoint) -> Path | None:
    """The checkpoint's config.json where one can be read here (module docstring): in its directory, or in the HF
    cache's snapshot of the commit its lock pins, or with HF_HUB_OFFLINE of its configured revision."""
    if checkpoint.source != "hub":
        folder = Path(checkpoint.location)
    else:
        try:
            commit = json.loads(Path(paths.lock(checkpoint.model, checkpoint.name)).read_text())["commit_sha"]
        except (OSError, ValueError, KeyError, TypeError):
            commit = hf_cache.commit_of(checkpoint.location, checkpoint.revision) if constants.HF_HUB_OFFLINE else None
        folder = hf_cache.snapshot(checkpoint.location, commit) if commit else None
    file = folder / "config.json" if folder else None
    return file if file and file.is_file() else None


class _ConfigValues(dict):
    """config.json's values as the attributes `families.depth` reads of a transformers config, `num_hidden_layers`
    under whichever of BLOCK_COUNT_KEYS the file holds (one only: two would be ambiguous); a value the file leaves to
    its class's default raises AttributeError."""

    def __getattr__(self, name):
        if name == "num_hidden_layers" and name not in self:
            held = [key for key in BLOCK_COUNT_KEYS if key in self]
            name = held[0] if len(held) == 1 else name
        if name not in self:
            raise AttributeError(name)
        return self[name]


def config_depth(config_file: Path) -> int | None:
    """The depth a config.json gives (`families.depth`), None where it cannot tell (module docstring)."""
    try:
        values = json.loads(Path(config_file).read_text())
        return depth(_ConfigValues(values)) if isinstance(values, dict) else None
    except (OSError, ValueError, AttributeError, TypeError):
        return None
