"""A Hugging Face cache laid out as huggingface_hub writes it, for tests that must run with the Hub out of reach."""

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
