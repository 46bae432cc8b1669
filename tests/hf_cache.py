"""A Hugging Face cache laid out as huggingface_hub writes it, for tests that must run with the Hub out of reach; and
huggingface_hub in the test's process pointed at a cache of its own and at a local Hub
(shape_of_learning.rehearsal.local_hub)."""

import hashlib
import os
from pathlib import Path


def add_revision(cache: Path, repo: str, revision: str, files: dict[str, bytes]) -> str:
    """Lay out one revision as huggingface_hub does: blobs by sha256, a snapshot of links, refs/{revision}."""
    repo_dir = cache / f"models--{repo.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
    for name, data in files.items():
        blob = repo_dir / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo_dir / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / revision).write_text(commit)
    return commit


def fresh_client(monkeypatch, cache: Path) -> None:
    """huggingface_hub with `cache` for its cache, no token and the network allowed, as on a fresh machine (CI
    exports HF_HUB_OFFLINE=1, which huggingface_hub reads at import; a test that wants it offline sets it after)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(cache.parent / "no-token"))
    monkeypatch.delenv("HF_TOKEN", raising=False)


def point_at(endpoint: str, monkeypatch) -> None:
    """huggingface_hub pointed at another Hub, as HF_ENDPOINT does in a new process (two constants read at import)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
