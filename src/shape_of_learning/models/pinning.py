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

The lock lists the weight files of the chosen format that transformers' ``from_pretrained`` loads (`loaded_weights`):
the single file (`model.safetensors`, `pytorch_model.bin`) where the revision has one, else every shard the format's
index (`model.safetensors.index.json`, `pytorch_model.bin.index.json`) names in its `weight_map`, and no shard it does
not name. A shard the index names that the revision lacks fails the pin with the files named (`IncompleteShardsError`),
on the submit host, not the extraction on a GPU node: upstream does publish incomplete shard sets. The index is read
from the Hub (one small download per sharded checkpoint, into the HF cache; the download job fetches it again from
there with the other top-level JSON files, `download.SUPPORT_FILE`), the cache snapshot offline, or the directory.
"""

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
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
# What from_pretrained loads of each format: (the single file, the index of shards), transformers.utils'
# SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME and WEIGHTS_INDEX_NAME (tests/test_pinning.py holds them
# equal); not imported from there, which costs every job that reads a lock half a second.
LOADED_FILES = {
    "safetensors": ("model.safetensors", "model.safetensors.index.json"),
    "pytorch": ("pytorch_model.bin", "pytorch_model.bin.index.json"),
}
SHARD_NAME = re.compile(r".*-\d+-of-\d+\.[^/]+")


class IncompleteShardsError(ValueError):
    """A sharded checkpoint's index names a shard its revision lacks: transformers could not load it."""


def pin(checkpoint: Checkpoint, weights: str = "auto") -> dict:
    """{model, checkpoint, step, source, location, revision, commit_sha, weights_format, weights: {file: sha256},
    weights_digest, weight_bytes: {file: size}, repository_refs}.

    Hub: the revision is checked against the repository's branches and tags, then one
    ``model_info(files_metadata=True)`` call gives the commit sha and the LFS sha256 and size of every file, and a
    sharded checkpoint's index is downloaded (nothing else), each call retried on a transient failure
    (`network.retry`); without network, the local HF cache. Local directory: sha256 and size of the weight files that
    load, commit_sha None.
    `weights` picks the format (module docstring); the lock records the one chosen, and of it the files transformers
    loads: the single file, else every shard the index names (`loaded_weights`; IncompleteShardsError where the
    revision lacks one). The index itself is not in `weights` (it holds no tensors; `weights_digest` describes what
    loads): at the pinned commit the download job fetches it with the other top-level JSON files. `weight_bytes`
    (what the checkpoint downloads, for `cost.disk`) lists the files whose size is known; `repository_refs` (the refs
    read on the Hub, for `revisions.check_revisions_offline`) is None where they came from the cache or a directory.
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
        commit_sha, files, sizes, refs, revision = _pin_hub(checkpoint.location, checkpoint.revision)
    else:
        (files, sizes, revision), commit_sha, refs = _list_directory(Path(checkpoint.location), checkpoint), None, None
    label = f"{checkpoint.model}/{checkpoint.name} ({where})"
    weights_format, _ = select_weights(files, weights, label)
    chosen = loaded_weights(files, weights_format, revision, label)
    if checkpoint.source != "hub":  # a directory's files are hashed once chosen: only those that load
        chosen = {file: file_sha256(Path(checkpoint.location) / file) for file in chosen}
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


# What a lock stands for: the files a run loads. A lock whose other keys alone changed stands for the same results.
WHAT_LOADS = ("commit_sha", "weights_format", "weights")


def renew(checkpoint: Checkpoint, weights: str, lock_file: str) -> str:
    """Pin a pinned Hub checkpoint again on the Hub (`python -m shape_of_learning renew`), after upstream fixed or
    moved its branch, and say what changed. The lock is rewritten only where it changed: where what it loads changed
    (`WHAT_LOADS`), as a new file, so that Snakemake reruns what depends on it; where only the refs read on the Hub did,
    with its modification time kept, so that nothing reruns; else not at all."""
    old = read_lock(lock_file)
    new = None if constants.HF_HUB_OFFLINE else pin(checkpoint, weights)
    if new is None or new["repository_refs"] is None:  # offline, or pinned from the cache: what the lock says already
        raise RuntimeError(
            f"{checkpoint.model}/{checkpoint.name}: renewing a lock needs the Hub, which is out of reach "
            f"(HF_HUB_OFFLINE, or no network): {lock_file} is left as it was"
        )
    path, text = Path(lock_file), json.dumps(new, indent=2) + "\n"
    if any(old.get(key) != new[key] for key in WHAT_LOADS):
        _replace(path, text)
        same = "the same weight files" if old["weights"] == new["weights"] else "other weight files"
        return f"renewed: commit {old['commit_sha']} -> {new['commit_sha']}, {same}"
    if old.get("repository_refs") != new["repository_refs"]:
        mtime = path.stat().st_mtime_ns
        _replace(path, text)
        os.utime(path, ns=(mtime, mtime))  # the same results: not newer than what was made from it
        return f"unchanged (commit {new['commit_sha']}); the refs read on the Hub updated"
    return f"unchanged (commit {new['commit_sha']})"


def _replace(path: Path, text: str) -> None:
    """Write a file whole or not at all: a reader never sees half a lock."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.replace(path)


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


@dataclass(frozen=True)
class Revision:
    """Where a revision's files are (on the Hub, in the HF cache or in a directory), for the error messages: `where`,
    and the `fix` an incomplete one calls for; `read(name)` gives the bytes of one of its files (an index)."""

    where: str
    read: Callable[[str], bytes]
    fix: str


def loaded_weights(files: dict[str, str | None], fmt: str, revision: Revision, name: str) -> dict[str, str | None]:
    """The weight files of format `fmt` that transformers' from_pretrained loads, among a revision's `files` ({path:
    sha256}), as it picks them (transformers 5.24 modeling_utils.py, `_get_resolved_checkpoint_files`: in a
    directory `model.safetensors` (l. 591) before its index (l. 598), `pytorch_model.bin` (l. 606) before its index
    (l. 613); on the Hub the single file (l. 640), the index only where that is absent (l. 676, l. 705)); a
    sharded checkpoint's shards are the index's `weight_map` values (utils/hub.py `get_checkpoint_shard_files`,
    l. 968). Raises IncompleteShardsError where the index names a shard `files` lacks, ValueError where there are
    shards and no index, or an index that is not one."""
    single, index = LOADED_FILES[fmt]
    if single in files:
        return {single: files[single]}
    if index not in files:
        candidates = {f: sha for f, sha in files.items() if WEIGHT_FILES[fmt].fullmatch(f)}
        if shards := sorted(f for f in candidates if SHARD_NAME.fullmatch(f)):
            raise ValueError(
                f"{name}: its {fmt} weights are shards ({', '.join(shards)}) without their index {index}, "
                f"{revision.where}: transformers loads shards only through it. Fix: {revision.fix}"
            )
        return candidates  # other names than transformers': as found (select_weights)
    try:
        shards = sorted(set(json.loads(revision.read(index))["weight_map"].values()))
        if not shards or not all(isinstance(shard, str) for shard in shards):
            raise ValueError("its weight_map names no shard files")
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{name}: {index}, {revision.where}, is not an index of shards ({type(error).__name__}: {error}). "
            f"Fix: {revision.fix}"
        ) from None
    if missing := [shard for shard in shards if shard not in files]:
        others = [other for other in LOADED_FILES if other != fmt and _complete(files, other, revision, name)]
        another = (
            f"set `weights: {others[0]}` in the model entry (its {others[0]} weights are complete); " if others else ""
        )
        raise IncompleteShardsError(
            f"{name}: incomplete shard set: its {index} names {len(shards)} shards, and {len(missing)} of them "
            f"{'is' if len(missing) == 1 else 'are'} not among its files {revision.where}: {', '.join(missing)}. "
            f"transformers could not load it. Fix: {another}{revision.fix}"
        )
    return {shard: files[shard] for shard in shards}


def _complete(files: dict[str, str | None], fmt: str, revision: Revision, name: str) -> bool:
    """Whether the revision's weights of format `fmt` load whole (for the fix an error names)."""
    if not any(WEIGHT_FILES[fmt].fullmatch(f) for f in files):
        return False
    try:
        loaded_weights(files, fmt, revision, name)
    except ValueError:
        return False
    return True


def _pin_hub(repo: str, revision: str) -> tuple[str, dict[str, str], dict[str, int | None], list[str] | None, Revision]:
    """(commit sha, {file: sha256}, {file: size}, the repository's refs, where its files are read) from the Hub,
    else from the local cache."""
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
        where = Revision(
            f"on the Hub (commit {info.sha})",
            lambda name: hf_cache.fetch(repo, name, info.sha, why="reading, to pin it,").read_bytes(),
            "pin another revision (`python -m shape_of_learning refs MODEL` lists them); upstream's repository is "
            f"incomplete: report it to its maintainers (https://huggingface.co/{repo}/discussions)",
        )
        return info.sha, *hub_files(info.siblings), refs, where
    # outside the handler, so that the cache's error (no copy, no such revision) is logged without the Hub's
    commit_sha, files, sizes, snapshot = _pin_from_cache(repo, revision)
    where = Revision(
        f"in the local cache's snapshot {snapshot}, the Hub being unreachable",
        lambda name: (snapshot / name).read_bytes(),
        "pin where the Hub is reachable, or complete the cache there (`hf download "
        f"{repo} --revision {revision}`, with the same HF_HOME): a cache may hold a partial download; if the Hub "
        "lacks the file too, pin another revision (`python -m shape_of_learning refs MODEL` lists them) and report "
        f"the incomplete repository to its maintainers (https://huggingface.co/{repo}/discussions)",
    )
    return commit_sha, files, sizes, None, where


def hub_files(siblings) -> tuple[dict[str, str], dict[str, int | None]]:
    """{file: sha256} (LFS) or git blob id, and {file: size in bytes} (None where the Hub gave none), of the
    `siblings` of ``model_info(files_metadata=True)``."""
    files = {s.rfilename: s.lfs.sha256 if s.lfs else f"git-blob:{s.blob_id}" for s in siblings}
    return files, {s.rfilename: getattr(s, "size", None) for s in siblings}


def _pin_from_cache(repo: str, revision: str) -> tuple[str, dict[str, str], dict[str, int], Path]:
    """Commit sha, weight hashes and sizes, and the snapshot, from the HF cache: refs/{revision} holds the sha; each
    snapshot file links to a blob named by its sha256 (LFS files)."""
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
    return commit_sha, files, sizes, snapshot


def _list_directory(directory: Path, checkpoint: Checkpoint) -> tuple[dict[str, None], dict[str, int], Revision]:
    """A local checkpoint directory's files ({path: None}: hashed once chosen), their sizes, and where they are."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{checkpoint.model}/{checkpoint.name}: model directory {directory} does not exist")
    files = {str(file.relative_to(directory)): file for file in sorted(directory.rglob("*")) if file.is_file()}
    where = Revision(
        f"in the directory {directory}",
        lambda name: (directory / name).read_bytes(),
        "complete the directory (a copy or a save cut short?) or point the entry at a complete one",
    )
    return dict.fromkeys(files), {name: file.stat().st_size for name, file in files.items()}, where


def file_sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()
