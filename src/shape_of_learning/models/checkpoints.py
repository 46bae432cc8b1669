"""A model's config entry expanded into the checkpoints to analyse.

An entry has exactly one source: ``hub_id`` (a Hugging Face repo), ``path`` (a saved model directory), ``package``
(``"pkgname/subdir"``, a model shipped inside an installed Python package), ``train`` (a model the pipeline trains
itself, saved under `paths.trained_checkpoint`) or ``finetune`` (another entry fine-tuned by the pipeline, one
checkpoint ``main`` saved under `paths.finetuned_model`, see `shape_of_learning.rajaee_pilehvar`). Its
``checkpoints`` are, for hub/path/package sources:

- absent: one checkpoint ``main`` (the repo's default branch, or the directory itself);
- ``{schedule: {last, every, log_until}, revision: "step{step}"}``: the steps of
  :func:`shape_of_learning.models.schedules.log_then_linear`, each formatted into a revision name;
- a list of revision names (``[global_step1000, ...]``), the step parsed from the name (-1 for a name that is no
  step, ``main``, a sha; a name that says "step" without a readable one, ``stepX``, is refused);
- a list of mappings ``{name, revision, hub_id, step}``, for checkpoints that live in their own repository (TinyLlama).

For a directory source (path/package) a checkpoint other than ``main`` is the subdirectory named by its revision.
A model's random-initialisation baseline (`RandomInit`, named ``random-init``) is not expanded from its entry: the
plan adds it where a figure draws one (`shape_of_learning.figures.plan`), so the name is reserved.
Entries arrive validated by ``workflow/schemas/model.schema.yaml`` (one source, the shapes above, defaults filled);
here live only the checks a schema cannot express: names safe in paths, duplicates, schedules, installed packages.
Everything here is pure and offline: it runs while Snakemake builds the DAG.
"""

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from shape_of_learning import paths
from shape_of_learning.models.schedules import log_then_linear

SOURCES = ("hub_id", "path", "package", "train", "finetune")
RANDOM_INIT = "random-init"  # the name of every `RandomInit` checkpoint
# A model's measured series (`paths.model_table`): its checkpoints, and its random-init baseline where planned
SERIES = ("checkpoints", RANDOM_INIT)
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
# step1000, global_step1000, step-1431k-3T (TinyLlama, thousands), step20000-tokens84B (OLMo)
_STEP_IN_NAME = re.compile(r"step[-_]?(\d+)(k?)(?![0-9A-Za-z])", re.IGNORECASE)
# a name meant to give its step ("step" as a word of its own, as in stepX, step_final, global_stepX), not "footsteps"
_NAMES_A_STEP = re.compile(r"(?<![A-Za-z])step", re.IGNORECASE)


@dataclass(frozen=True)
class Checkpoint:
    model: str
    name: str  # safe in file paths: names the checkpoint's files (shape_of_learning.paths)
    source: str  # "hub" | "local"
    location: str  # hub repo id or local directory
    revision: str | None  # hub branch/tag/sha; None for local directories
    step: int  # training step, -1 where the checkpoint is not a training step


@dataclass(frozen=True)
class RandomInit(Checkpoint):
    """A model's architecture with seeded random weights: the config.json of `location` at `revision` (pinned to the
    commit of the model's final checkpoint, `pinning.pin_random_init`), built with random weights after
    ``torch.manual_seed(seed)`` (`extraction.loading.load_model`). It is no step of the model's training (step -1),
    so it has no health verdict and no place in a series: only the figures that ask for baselines read its rows
    (`figures.rows.select`)."""

    seed: int


def random_init(final: Checkpoint, seed: int) -> RandomInit:
    """The random-initialisation baseline of `final`'s model: its architecture at `final`'s location and revision."""
    return RandomInit(final.model, RANDOM_INIT, final.source, final.location, final.revision, -1, seed)


def parse_step(name: str) -> int:
    """Training step named in a revision or repo name, else -1.

    ``step1000`` and ``global_step1000`` -> 1000, ``step-1431k-3T`` -> 1431000, ``step20000-tokens84B`` -> 20000.
    """
    match = _STEP_IN_NAME.search(name)
    if match is None:
        return -1
    return int(match.group(1)) * (1000 if match.group(2) else 1)


def revisions(schedule: dict, template: str = "step{step}") -> list[str]:
    """Revision names for a log-then-linear schedule, for writing readable configs.

    "Every 10th Pythia step": ``revisions({"last": 143000, "every": 10000, "log_until": 512})`` -> step0, step1, ...,
    step512, step10000, ..., step140000, step143000. "Log-spaced" only: ``{"last": 512, "every": 1024}``.
    """
    items = _revision_items("<schedule>", {"schedule": schedule, "revision": template})
    return [item["revision"] for item in items]


def checkpoints(model: str, entry: dict) -> list[Checkpoint]:
    """Expand one validated model entry into its checkpoints (no network, no file access beyond locating a package)."""
    source = next(key for key in SOURCES if key in entry)  # the schema admits exactly one
    spec = entry.get("checkpoints")
    if source == "finetune":
        if spec is not None:
            raise ValueError(f"model {model!r}: a `finetune` entry has one checkpoint, main; remove `checkpoints`")
        found = [Checkpoint(model, "main", "local", paths.finetuned_model(model), None, -1)]
    elif source == "train":
        if spec is not None:
            raise ValueError(
                f"model {model!r}: a `train` entry takes its checkpoints from train.steps; remove `checkpoints`"
            )
        found = [
            Checkpoint(model, f"step{step}", "local", paths.trained_checkpoint(model, step), None, step)
            for step in _schedule_steps(model, entry["train"]["steps"], "train.steps")
        ]
    else:
        found = [_checkpoint(model, source, entry, item) for item in _revision_items(model, spec)]
    if any(c.name == RANDOM_INIT for c in found):
        raise ValueError(
            f"model {model!r}: the checkpoint name {RANDOM_INIT!r} is reserved for the random-"
            "initialisation baseline the plan adds; give the checkpoint another `name`"
        )
    duplicates = sorted(name for name, count in Counter(c.name for c in found).items() if count > 1)
    if duplicates:
        raise ValueError(f"model {model!r}: duplicate checkpoint names {duplicates}; give each a distinct `name`")
    return found


def tokenizer_location(entry: dict, checkpoint: Checkpoint) -> str:
    """Where the tokenizer comes from: the entry's `tokenizer` (Bloom intermediate repos have none), else the
    checkpoint itself."""
    return entry["tokenizer"] or checkpoint.location


def _revision_items(model: str, spec) -> list[dict]:
    """Normalise the `checkpoints` spec into mappings with at least a revision or a hub_id."""
    if spec is None:
        return [{"revision": "main"}]
    if isinstance(spec, dict):
        steps = _schedule_steps(model, spec["schedule"], "checkpoints.schedule")
        return [{"revision": spec["revision"].format(step=step), "step": step} for step in steps]
    return [{"revision": item} if isinstance(item, str) else item for item in spec]


def _checkpoint(model: str, source: str, entry: dict, item: dict) -> Checkpoint:
    revision = item.get("revision", "main")
    name = item.get("name", revision)
    _check_name(name, f"model {model!r}: checkpoint name {name!r}", "give the checkpoint a `name`")
    step = item.get("step")
    if step is None:
        step = parse_step(name)
        if step < 0 and item.get("hub_id"):
            step = parse_step(item["hub_id"])
        if step < 0 and _NAMES_A_STEP.search(name):
            raise ValueError(
                f"model {model!r}: checkpoint {name!r} says 'step' but gives no step that can be read (digits after "
                "'step', as in step1000, global_step1000, step-480k); write the real revision name, or a mapping "
                f"{{name: {name}, revision: <branch, tag or sha>, step: <training step>}}"
            )
    if item.get("hub_id") or source == "hub_id":
        return Checkpoint(model, name, "hub", item.get("hub_id") or entry["hub_id"], revision, step)
    directory = Path(entry["path"]) if source == "path" else _package_dir(model, entry["package"])
    return Checkpoint(model, name, "local", str(directory if revision == "main" else directory / revision), None, step)


def _schedule_steps(model: str, schedule: dict, key: str) -> list[int]:
    steps = log_then_linear(**schedule)
    if not steps:
        raise ValueError(
            f"model {model!r}: {key} {schedule} leaves no step (every step is below `first`); "
            "lower `first` or raise `last`"
        )
    return steps


def _package_dir(model: str, package: str) -> Path:
    """Directory `subdir` inside the installed package `pkgname` (found without importing it)."""
    top, _, subdir = package.partition("/")
    spec = importlib.util.find_spec(top) if top.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"model {model!r}: package {top!r} is not installed; "
            f"`pip install {top.replace('_', '-')}` or use `path:` to a saved model directory"
        )
    return Path(next(iter(spec.submodule_search_locations)), subdir)


def _check_name(name, what: str, fix: str) -> None:
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise ValueError(f"{what} is not safe in file paths (allowed: letters, digits, '.', '_', '-'); {fix}")
