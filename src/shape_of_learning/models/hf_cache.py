"""The local Hugging Face cache, as huggingface_hub lays it out: what it holds of a repository, and freeing it.

    {HF_HUB_CACHE}/models--{owner}--{name}/refs/{branch or tag}     the commit sha the ref pointed at when downloaded
                                            snapshots/{commit sha}/   one link per file of that revision ...
                                            blobs/{sha256}            ... to its content, named by its LFS sha256

Read without network: by the offline pin (`pinning`), the offline revision check (`revisions`) and the disk volume
(`disk`); filled one file at a time by `fetch` (the download jobs, a sharded checkpoint's pin), freed only by
`evict_weights`.
"""

import logging
from pathlib import Path

import huggingface_hub  # hf_hub_download looked up when called: shape_of_learning.network
from huggingface_hub import constants
from huggingface_hub.errors import GatedRepoError

from shape_of_learning import network

logger = logging.getLogger(__name__)


def repo_dir(repo: str) -> Path:
    return Path(constants.HF_HUB_CACHE, "models--" + repo.replace("/", "--"))


def cached_refs(repo: str) -> list[str]:
    """The branches and tags of `repo` that the cache has downloaded something of."""
    refs = repo_dir(repo) / "refs"
    return sorted(str(ref.relative_to(refs)) for ref in refs.rglob("*") if ref.is_file()) if refs.is_dir() else []


def commit_of(repo: str, revision: str) -> str:
    """The commit sha a cached ref points at; a revision that is no cached ref is taken for a sha itself."""
    ref = repo_dir(repo) / "refs" / revision
    return ref.read_text().strip() if ref.is_file() else revision


def snapshot(repo: str, commit_sha: str) -> Path | None:
    """The cached snapshot of one commit, or None where the cache has none."""
    folder = repo_dir(repo) / "snapshots" / commit_sha
    return folder if folder.is_dir() else None


def fetch(repo: str, name: str, revision: str | None, why: str = "downloading") -> Path:
    """One file of a revision in the cache (its snapshot link), downloaded unless it is there already, a transient
    failure retried (`network.retry`); a gated repository without a token's access is a PermissionError naming the
    fix. `why` says what the file is fetched for, in the messages."""
    where = f"{repo}@{revision or 'main'}"
    try:
        return Path(
            network.retry(
                lambda: huggingface_hub.hf_hub_download(repo, name, revision=revision),
                what=f"{why} {name} of {where}",
            )
        )
    except GatedRepoError as error:
        raise PermissionError(
            f"{repo} is gated: accept its conditions on its Hub page with your account, then give the run a token of "
            "that account (HF_TOKEN=hf_..., or `hf auth login` where Snakemake runs); or remove the model from the "
            f"config. ({error.response.status_code}, {why} {name} of {where})"
        ) from None


def evict_weights(lock: dict, keep=()) -> list[Path]:
    """Delete a Hub checkpoint's weight files (and only those) from the Hugging Face cache, once its hidden states are
    extracted: the snapshot's links and the blobs no other snapshot links to, but not the files named in `keep` (those
    the cache held before the run's download, `models.download`). Returns the blobs deleted."""
    if lock["source"] != "hub":
        return []  # a package, a local directory or the pipeline's own model: nothing was downloaded
    folder = repo_dir(lock["location"]) / "snapshots" / lock["commit_sha"]
    links = [folder / name for name in lock["weights"] if (folder / name).is_symlink() and name not in keep]
    blobs = {link.resolve() for link in links}
    for link in links:
        link.unlink()
    still_linked = {path.resolve() for path in folder.parent.rglob("*") if path.is_symlink()}
    deleted = [blob for blob in blobs if blob not in still_linked and blob.is_file()]
    size = sum(blob.stat().st_size for blob in deleted)
    for blob in deleted:
        blob.unlink()
    logger.info(
        "evicted %d weight files (%.1f MB) of %s@%s from the Hugging Face cache",
        len(deleted),
        size / 1e6,
        lock["location"],
        lock["commit_sha"],
    )
    return deleted
