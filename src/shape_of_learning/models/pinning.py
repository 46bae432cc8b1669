"""Pin each checkpoint to exact weights: the Hub commit sha and the sha256 of every weight file.

A rerun loads by commit sha, so a moved branch cannot change the results silently; the weight hashes expose
checkpoints that are the same weights under different names (`shape_of_learning.health.duplicates`). Upstream does
publish such branches: 76 step branches of EleutherAI/pythia-2.8b serve a `model.safetensors` bit-identical to main's
(EleutherAI/pythia#205), and on pythia-12b two step branches serve the final model's first shard (#206), so identity
is judged per weight file.

Weights come as safetensors or as PyTorch pickles (`pytorch_model*.bin`, which the Bloom intermediate branches and
many Pythia branches publish). A model entry's `weights:` chooses: `safetensors`, `pytorch`, or `auto` (safetensors
where the revision has them, else PyTorch files). PyTorch files are only ever loaded with
``torch.load(weights_only=True)`` (see `shape_of_learning.extraction.loading`), which refuses a pickle that would run
code.
"""

import hashlib
import json
import logging
import re
from pathlib import Path

import huggingface_hub  # HfApi looked up when called: shape_of_learning.network
from huggingface_hub import constants
from huggingface_hub.errors import HfHubHTTPError, HTTPError, OfflineModeIsEnabled

from shape_of_learning import network
from shape_of_learning.models import hf_cache, revisions
from shape_of_learning.models.checkpoints import Checkpoint, RandomInit

logger = logging.getLogger(__name__)

WEIGHT_FILES = {
    "safetensors": re.compile(r"(.*/)?[^/]+\.safetensors"),
    "pytorch": re.compile(r"pytorch_model(-\d+-of-\d+)?\.bin"),  # not training_args.bin, optimizer states, ...
}
WEIGHT_FORMATS = ("auto", *WEIGHT_FILES)


def pin(checkpoint: Checkpoint, weights: str = "auto") -> dict:
    """{model, checkpoint, step, source, location, revision, commit_sha, weights_format, weights: {file: sha256},
    weights_digest, weight_bytes: {file: size}, repository_refs}.

    Hub: the revision is checked against the repository's branches and tags, then one
    ``model_info(files_metadata=True)`` call (no download) gives the commit sha and the LFS sha256 and size of every
    file, each call retried on a transient failure (`network.retry`); without network, the local HF cache. Local
    directory: sha256 and size of its weight files, commit_sha None.
    `weights` picks the format (module docstring); the lock records the one chosen. `weight_bytes` (what the
    checkpoint downloads, for `cost.disk`) lists the files whose size is known; `repository_refs` (the refs read
    on the Hub, for `revisions.check_revisions_offline`) is None where they came from the cache or a directory.
    Locks written before these two keys existed stay readable (`read_lock`).
    """
    if isinstance(checkpoint, RandomInit):  # its location's weights are the trained ones: never its lock
        raise ValueError(
            f"{checkpoint.model}/{checkpoint.name} is a random-init baseline: pin it with "
            "pin_random_init, from the lock of the checkpoint it is built from"
        )
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {WEIGHT_FORMATS}, got {weights!r}")
    where = checkpoint.location + (f"@{checkpoint.revision}" if checkpoint.revision else "")
    if checkpoint.source == "hub":
        commit_sha, files, sizes, refs = _pin_hub(checkpoint.location, checkpoint.revision)
    else:
        (files, sizes), commit_sha, refs = _hash_directory(Path(checkpoint.location), checkpoint), None, None
    weights_format, chosen = select_weights(files, weights, f"{checkpoint.model}/{checkpoint.name} ({where})")
    digest = hashlib.sha256("".join(f"{name}:{sha}\n" for name, sha in sorted(chosen.items())).encode()).hexdigest()
    return dict(
        model=checkpoint.model,
        checkpoint=checkpoint.name,
        step=checkpoint.step,
        source=checkpoint.source,
        location=checkpoint.location,
        revision=checkpoint.revision,
        commit_sha=commit_sha,
        weights_format=weights_format,
        weights=dict(sorted(chosen.items())),
        weights_digest=digest,
        weight_bytes={name: sizes[name] for name in sorted(chosen) if sizes.get(name) is not None},
        repository_refs=refs,
    )


def pin_random_init(checkpoint: RandomInit, final: dict) -> dict:
    """The lock of a random-init baseline: the commit of its model's final checkpoint (`final`, that checkpoint's
    lock), whose config.json gives the architecture, no weight files (none is loaded) and the seed, `init_seed`.
    Taking the commit from the final lock, not from the Hub again, makes the two the same architecture."""
    if (final["model"], final["location"]) != (checkpoint.model, checkpoint.location):
        raise ValueError(
            f"{checkpoint.model}/{checkpoint.name}: the final lock given is of {final['model']} at "
            f"{final['location']}; pass the lock of the checkpoint it is built from"
        )
    return dict(
        model=checkpoint.model,
        checkpoint=checkpoint.name,
        step=checkpoint.step,
        source=checkpoint.source,
        location=checkpoint.location,
        revision=checkpoint.revision,
        commit_sha=final["commit_sha"],
        weights_format=None,
        weights={},
        weights_digest=None,
        weight_bytes={},
        repository_refs=None,
        init_seed=checkpoint.seed,
        architecture_of=final["checkpoint"],
    )


def read_lock(path) -> dict:
    """A lock file written by `pin` (`paths.lock`); a truncated or edited one is refused."""
    try:
        lock = json.loads(Path(path).read_text())
        missing = {"model", "checkpoint", "commit_sha", "weights"} - set(lock)
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as error:
        missing = f"not a JSON object ({error})"
    if missing:
        raise ValueError(
            f"{path} is not a complete lock file (missing: {missing}); delete it and rerun snakemake, "
            "which pins the checkpoint again"
        )
    return lock


def select_weights(files: dict[str, str], weights: str, name: str) -> tuple[str, dict[str, str]]:
    """The weight files of the wanted format among a revision's `files` ({path: sha256}): (format, {path: sha256})."""
    by_format = {
        fmt: {f: sha for f, sha in files.items() if pattern.fullmatch(f)} for fmt, pattern in WEIGHT_FILES.items()
    }
    fmt = weights if weights != "auto" else "safetensors" if by_format["safetensors"] else "pytorch"
    if not by_format[fmt]:
        present = {f: sorted(found) for f, found in by_format.items() if found}
        wanted = "weight files" if weights == "auto" else f"{fmt} weight files"
        fix = (
            f"set `weights: {next(iter(present))}` in the model entry"
            if present
            else "pick a revision that has weights (`python -m shape_of_learning refs MODEL` lists the refs)"
        )
        raise ValueError(f"{name}: no {wanted} among its {len(files)} files (found: {present or 'none'}); {fix}")
    return fmt, by_format[fmt]


def _pin_hub(repo: str, revision: str) -> tuple[str, dict[str, str], dict[str, int | None], list[str] | None]:
    """(commit sha, {file: sha256}, {file: size}, the repository's refs) from the Hub, else from the local cache."""
    try:
        refs = revisions.hub_refs(repo)
        revisions.check_revision(repo, revision, refs, "on the Hub")
        info = network.retry(
            lambda: huggingface_hub.HfApi().model_info(repo, revision=revision, files_metadata=True),
            what=f"reading the files of {repo}@{revision} on the Hub",
        )
    except HfHubHTTPError:
        raise  # the Hub answered (repo not found, gated, ...): its message says which
    except (OfflineModeIsEnabled, HTTPError) as error:  # no network: fall back to what the cache holds
        logger.info("Hub unreachable for %s@%s (%s); pinning from the local cache", repo, revision, error)
    else:
        return info.sha, *hub_files(info.siblings), refs
    # outside the handler, so that the cache's error (no copy, no such revision) is logged without the Hub's
    return *_pin_from_cache(repo, revision), None


def hub_files(siblings) -> tuple[dict[str, str], dict[str, int | None]]:
    """{file: sha256} (LFS) or git blob id, and {file: size in bytes} (None where the Hub gave none), of the
    `siblings` of ``model_info(files_metadata=True)``."""
    files = {s.rfilename: s.lfs.sha256 if s.lfs else f"git-blob:{s.blob_id}" for s in siblings}
    return files, {s.rfilename: getattr(s, "size", None) for s in siblings}


def _pin_from_cache(repo: str, revision: str) -> tuple[str, dict[str, str], dict[str, int]]:
    """Commit sha and weight hashes from the HF cache: refs/{revision} holds the sha; each snapshot file links to a
    blob named by its sha256 (LFS files)."""
    repo_dir = hf_cache.repo_dir(repo)
    if not repo_dir.is_dir():
        raise RuntimeError(
            f"cannot pin {repo}@{revision}: the Hub is unreachable and the cache ({constants.HF_HUB_CACHE}) has no "
            f"copy of {repo}. Pre-fetch it where there is network (`hf download {repo} --revision {revision}`, with "
            "the same HF_HOME), or download the model elsewhere and use a `path:` entry"
        )
    revisions.check_revision(
        repo, revision, hf_cache.cached_refs(repo), f"in the local cache {repo_dir}, the Hub being unreachable"
    )
    commit_sha = hf_cache.commit_of(repo, revision)
    snapshot = hf_cache.snapshot(repo, commit_sha)
    if snapshot is None:
        raise RuntimeError(
            f"cannot pin {repo}@{revision}: the Hub is unreachable and the cache {repo_dir} has no snapshot of it. "
            f"Pre-fetch it where there is network (`hf download {repo} --revision {revision}`, with the same "
            "HF_HOME), or download the model elsewhere and use a `path:` entry"
        )
    files, sizes = {}, {}
    for file in sorted(path for path in snapshot.rglob("*") if path.is_file()):
        blob = file.resolve().name
        is_sha256 = len(blob) == 64 and all(c in "0123456789abcdef" for c in blob)
        files[str(file.relative_to(snapshot))] = blob if is_sha256 else file_sha256(file)
        sizes[str(file.relative_to(snapshot))] = file.stat().st_size
    return commit_sha, files, sizes


def _hash_directory(directory: Path, checkpoint: Checkpoint) -> tuple[dict[str, str], dict[str, int]]:
    if not directory.is_dir():
        raise FileNotFoundError(f"{checkpoint.model}/{checkpoint.name}: model directory {directory} does not exist")
    weights = {
        str(file.relative_to(directory)): file
        for file in sorted(directory.rglob("*"))
        if file.is_file()
        and any(pattern.fullmatch(str(file.relative_to(directory))) for pattern in WEIGHT_FILES.values())
    }
    return (
        {name: file_sha256(file) for name, file in weights.items()},
        {name: file.stat().st_size for name, file in weights.items()},
    )


def file_sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()
