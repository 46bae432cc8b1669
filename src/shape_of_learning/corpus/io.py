"""File helpers shared by the corpus stages: atomic writes and transparent decompression."""

import bz2
import contextlib
import gzip
import os
from pathlib import Path

ZIP_MAGIC = b"PK\x03\x04"
_STREAM_OPENERS = {b"BZh": bz2.open, b"\x1f\x8b": gzip.open}


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary sibling of `path`; rename it onto `path` on success, delete it on error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def open_decompressed(path: Path):
    """Open `path` for binary reading, decompressing .bz2 or .gz on the fly (detected by magic bytes, not name)."""
    with open(path, "rb") as probe:
        magic = probe.read(4)
    if magic == ZIP_MAGIC:
        raise ValueError(f"{path} is a zip archive; extract it first with shape_of_learning.corpus.obtain()")
    opener = next((open_ for prefix, open_ in _STREAM_OPENERS.items() if magic.startswith(prefix)), open)
    return opener(path, "rb")
