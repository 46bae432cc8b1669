"""A pinned checkpoint downloaded into the Hugging Face cache by a job of its own, before its extraction: on a
cluster on the submit host, where the Hub is reachable, while the GPU jobs run; the extraction then reads the cache
with HF_HUB_OFFLINE=1 (`network.go_offline`) and opens no connection.

What is fetched, at the lock's commit: the weight files the lock chose, each verified against the sha256 it records,
and the files beside them that extraction reads (`SUPPORT_FILE`: config, tokenizer, image processor, feature
extractor); and where the entry names another `tokenizer` repository (Bloom's intermediate repositories have none),
that repository's files of the same kinds at its main branch, as extraction loads it. Files come through
huggingface_hub's `hf_hub_download`, into the layout extraction reads back (`hf_cache`): a connection dropped
mid-file resumes from the bytes received (a Range request), a transient failure is retried (`network.retry`), files
already cached are verified, not fetched again. A weight file whose bytes do not hash to the lock's digest is deleted
from the cache, blob and snapshot link, and the job fails naming both digests: nothing unverified stays for an
extraction to load.

A receipt stands for the files it lists only while the cache still holds them as downloaded (`missing_from_cache`:
each snapshot link there, of the size received, a weight file's blob named by its verified sha256). The download
job's `params:` hold what is missing, so a receipt whose files were removed since (a cache cleanup, an eviction, a
node whose cache is not the submit host's) reruns its download; the extraction refuses a stale receipt naming it
(`check_receipt`), before it loads anything.
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
from shape_of_learning.models import hf_cache
from shape_of_learning.models.checkpoints import Checkpoint
from shape_of_learning.models.pinning import file_sha256

logger = logging.getLogger(__name__)

# Top-level files that AutoConfig, AutoTokenizer, AutoImageProcessor and AutoFeatureExtractor read: JSON configs and
# vocabularies, merges and vocab text files, sentencepiece and tiktoken models, chat templates, remote code (loaded
# only with trust_remote_code). Weight files of any format are not among them: only the lock's are fetched.
SUPPORT_FILE = re.compile(r"[^/]+\.(json|txt|model|tiktoken|jinja|py)")


class DigestMismatchError(ValueError):
    """A downloaded file is not the one its lock records; it was deleted from the cache."""


class StaleReceiptError(FileNotFoundError):
    """A download's receipt lists files that the Hugging Face cache no longer holds as downloaded."""


def needed(checkpoint: Checkpoint, entry: dict) -> bool:
    """Whether a checkpoint's extraction reads files a download job fetches: a Hub checkpoint (a random-init
    baseline's config and tokenizer too), or any checkpoint whose tokenizer is a Hub repository."""
    return checkpoint.source == "hub" or hub_tokenizer(entry) is not None


def hub_tokenizer(entry: dict) -> str | None:
    """The entry's `tokenizer` where it names a Hub repository, not a local directory."""
    tokenizer = entry["tokenizer"]
    return tokenizer if tokenizer and not Path(tokenizer).is_dir() else None


def download(lock: dict, entry: dict, lock_file: str | None = None) -> dict:
    """Fetch what the extraction of `lock`'s checkpoint reads (module docstring) and return the receipt: {model,
    checkpoint, location, commit_sha, files: {name: bytes}, verified: {weight file: digest}, cached_before: [the weight
    files the cache held before the checkpoint was pinned (`lock_file`), which eviction leaves], tokenizer: {location,
    commit_sha, files} or None}."""
    receipt = dict(
        model=lock["model"],
        checkpoint=lock["checkpoint"],
        location=lock["location"],
        commit_sha=lock["commit_sha"],
        files={},
        verified={},
        cached_before=[],
        tokenizer=None,
    )
    if lock["source"] == "hub":
        repo, commit = lock["location"], lock["commit_sha"]
        snapshot = hf_cache.snapshot(repo, commit)
        cached = sorted(name for name in lock["weights"] if snapshot and _cached_before(snapshot / name, lock_file))
        names = sorted({name for name in listing(repo, commit) if SUPPORT_FILE.fullmatch(name)} | set(lock["weights"]))
        paths = {name: hf_cache.fetch(repo, name, commit) for name in names}
        for name, recorded in lock["weights"].items():
            verify(paths[name], recorded, f"{repo}@{commit}: {name}", lock_file or "the lock")
        receipt |= {
            "files": {name: path.stat().st_size for name, path in paths.items()},
            "verified": dict(sorted(lock["weights"].items())),
            "cached_before": cached,
        }
    if tokenizer := hub_tokenizer(entry):
        names = [name for name in listing(tokenizer, None) if SUPPORT_FILE.fullmatch(name)]
        paths = {name: hf_cache.fetch(tokenizer, name, None) for name in names}
        receipt["tokenizer"] = {
            "location": tokenizer,
            "commit_sha": hf_cache.commit_of(tokenizer, "main"),
            "files": {name: path.stat().st_size for name, path in paths.items()},
        }
    return receipt


def _cached_before(link: Path, lock_file: str | None) -> bool:
    """Whether the cache held a weight file before the run pinned its checkpoint (its blob older than the lock), so
    that eviction leaves it: a file this run downloaded, then downloaded again over (a rerun that extracts again
    before the weights were evicted), is not taken for the user's. Without a lock file, whether it is there."""
    if not link.is_file():
        return False
    return lock_file is None or link.resolve().stat().st_mtime < Path(lock_file).stat().st_mtime


def listing(repo: str, revision: str | None) -> list[str]:
    """The files of a revision (None: the main branch): as the Hub lists them, else, with the Hub out of reach, as
    the cache holds them."""
    try:
        info = network.retry(
            lambda: huggingface_hub.HfApi().model_info(repo, revision=revision),
            what=f"listing the files of {repo}@{revision or 'main'}",
        )
        return [sibling.rfilename for sibling in info.siblings]
    except HfHubHTTPError:
        raise  # the Hub answered: no such repository or revision, ...
    except (OfflineModeIsEnabled, HTTPError) as error:  # no network: what the cache holds
        logger.info("Hub unreachable for %s (%s); the files the cache holds", repo, error)
    snapshot = hf_cache.snapshot(repo, hf_cache.commit_of(repo, revision or "main"))
    if snapshot is None:
        raise RuntimeError(
            f"cannot download {repo}@{revision or 'main'}: the Hub is unreachable and the Hugging Face "
            f"cache ({hf_cache.repo_dir(repo)}) has no snapshot of it. Run where the Hub is reachable, "
            "or pre-fetch it there with `hf download` and the same HF_HOME"
        )
    return [path.relative_to(snapshot).as_posix() for path in sorted(snapshot.rglob("*")) if path.is_file()]


def missing_from_cache(receipt_file: str) -> list[str]:
    """The files of a download's receipt that the Hugging Face cache no longer holds as downloaded: "repo/file" for
    each whose snapshot link is gone, whose size is not the one received, or, for a weight file, whose blob is not
    named by the sha256 verified (`hf_cache`: an LFS file's blob is named by its sha256). None (an empty list) where
    the receipt does not exist; an unreadable receipt counts as missing all. Reads no file's content: cheap enough
    for every download job Snakemake plans (its rerun trigger, models.smk)."""
    try:
        receipt = json.loads(Path(receipt_file).read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        return [f"{receipt_file} (unreadable: {error})"]
    parts = [(receipt["location"], receipt["commit_sha"], receipt["files"], receipt["verified"])]
    if receipt.get("tokenizer"):
        tokenizer = receipt["tokenizer"]
        parts.append((tokenizer["location"], tokenizer["commit_sha"], tokenizer["files"], {}))
    missing = []
    for repo, commit, files, verified in parts:
        snapshot = hf_cache.snapshot(repo, commit) if files else None
        for name, size in sorted(files.items()):
            link = snapshot / name if snapshot else None
            digest = verified.get(name, "")
            if (
                link is None
                or not link.is_file()
                or link.stat().st_size != size
                or (digest and not digest.startswith("git-blob:") and link.resolve().name != digest)
            ):
                missing.append(f"{repo}/{name}")
    return missing


def check_receipt(receipt_file: str) -> None:
    """Raise StaleReceiptError, naming the receipt and what is gone, where the cache no longer holds what the receipt
    lists (`missing_from_cache`): the check of every job that loads a model, before it loads anything."""
    if missing := missing_from_cache(receipt_file):
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise StaleReceiptError(
            f"{shown}: not in the Hugging Face cache ({constants.HF_HUB_CACHE}) as the download's receipt "
            f"{receipt_file} records them: removed since it was written (a cache cleanup, `hf cache delete`, an "
            "evicted checkpoint's retry), or this node's cache is not the one the download job filled (HF_HOME must "
            "be on a filesystem both share). Nothing was loaded. Rerun snakemake: the download job runs again, as its "
            f"receipt no longer matches the cache (with --rerun-triggers that leave out params: delete {receipt_file})"
        )


def read_cache_only(receipt_file: str | None) -> None:
    """What a job that loads a model does first (extraction, fine-tuning, the isotropy analysis): read the Hugging Face
    cache only from now on (`network.go_offline`), and, where a download job fetched its files, check that the
    receipt still stands (`check_receipt`)."""
    network.go_offline()
    if receipt_file:
        check_receipt(receipt_file)


def verify(path: Path, recorded: str, what: str, lock_file: str = "the lock") -> None:
    """Raise DigestMismatchError unless the file hashes to `recorded` (a sha256, or "git-blob:<sha1>" for a file
    stored in git itself: `pinning.hub_files`), deleting its blob and snapshot link first."""
    blob = path.resolve()
    found = file_digest(blob, recorded)
    if found == recorded:
        return
    path.unlink(missing_ok=True)
    blob.unlink(missing_ok=True)
    raise DigestMismatchError(
        f"{what} has digest {found}, not the {recorded} its lock records; deleted from the Hugging Face cache. The "
        "Hub served other bytes than it listed when the checkpoint was pinned: rerun (a fault on the way is fixed by "
        f"downloading again); if it persists, the repository was rewritten since: delete {lock_file} and rerun, "
        "which pins the checkpoint again"
    )


def file_digest(path: Path, like: str) -> str:
    """A file's digest in the form of `like`: its sha256, or "git-blob:" and the sha1 of git's blob of it."""
    if not like.startswith("git-blob:"):
        return file_sha256(path)
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return f"git-blob:{digest.hexdigest()}"
