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
"""

import hashlib
import logging
import re
from pathlib import Path

import huggingface_hub  # HfApi, hf_hub_download looked up when called: shape_of_learning.network
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, HTTPError, OfflineModeIsEnabled

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


def needed(checkpoint: Checkpoint, entry: dict) -> bool:
    """Whether a checkpoint's extraction reads files a download job fetches: a Hub checkpoint (a random-init
    baseline's config and tokenizer too), or any checkpoint whose tokenizer is a Hub repository."""
    return checkpoint.source == "hub" or hub_tokenizer(entry) is not None


def hub_tokenizer(entry: dict) -> str | None:
    """The entry's `tokenizer` where it names a Hub repository, not a local directory."""
    tokenizer = entry["tokenizer"]
    return tokenizer if tokenizer and not Path(tokenizer).is_dir() else None


def download(lock: dict, entry: dict) -> dict:
    """Fetch what the extraction of `lock`'s checkpoint reads (module docstring) and return the receipt: {model,
    checkpoint, location, commit_sha, files: {name: bytes}, verified: {weight file: digest}, cached_before: [the weight
    files the cache held already, which eviction leaves], tokenizer: {location, commit_sha, files} or None}."""
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
        cached = sorted(name for name in lock["weights"] if snapshot and (snapshot / name).is_file())
        names = sorted({name for name in listing(repo, commit) if SUPPORT_FILE.fullmatch(name)} | set(lock["weights"]))
        paths = {name: fetch(repo, name, commit) for name in names}
        for name, recorded in lock["weights"].items():
            verify(paths[name], recorded, f"{repo}@{commit}: {name}")
        receipt |= {
            "files": {name: path.stat().st_size for name, path in paths.items()},
            "verified": dict(sorted(lock["weights"].items())),
            "cached_before": cached,
        }
    if tokenizer := hub_tokenizer(entry):
        names = [name for name in listing(tokenizer, None) if SUPPORT_FILE.fullmatch(name)]
        paths = {name: fetch(tokenizer, name, None) for name in names}
        receipt["tokenizer"] = {
            "location": tokenizer,
            "commit_sha": hf_cache.commit_of(tokenizer, "main"),
            "files": {name: path.stat().st_size for name, path in paths.items()},
        }
    return receipt


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


def fetch(repo: str, name: str, revision: str | None) -> Path:
    """One file of a revision in the cache (its snapshot link), downloaded unless it is there already."""
    where = f"{repo}@{revision or 'main'}"
    try:
        return Path(
            network.retry(
                lambda: huggingface_hub.hf_hub_download(repo, name, revision=revision),
                what=f"downloading {name} of {where}",
            )
        )
    except GatedRepoError as error:
        raise PermissionError(
            f"{repo} is gated: accept its conditions on its Hub page with your account, then give the run a token of "
            "that account (HF_TOKEN=hf_..., or `hf auth login` where Snakemake runs); or remove the model from the "
            f"config. ({error.response.status_code}, downloading {name} of {where})"
        ) from None


def verify(path: Path, recorded: str, what: str) -> None:
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
        "downloading again); if it persists, the repository was rewritten since: delete the lock and pin it again"
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
