"""Fixed text windows, drawn once with a seed from the clean text, that every model embeds.

File format (``results/corpus/{corpus.name}/windows.parquet``): columns window (int, 0..n-1: the order the
extractor consumes them, a random order), start (character offset in the clean text), text; schema metadata key
``shape_of_learning.windows`` holds JSON {seed, n_windows, window_chars, source, source_sha256, source_chars}.
"""

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from shape_of_learning.corpus.io import atomic_path

METADATA_KEY = b"shape_of_learning.windows"
COLUMNS = ["window", "start", "text"]
_MAX_SNAP_CHARS = 64
_WORD_START = re.compile(r"(?:\A|(?<=\s))\S")


def sample_windows(text_path: Path, n_windows: int, window_chars: int, seed: int) -> pd.DataFrame:
    """Draw `n_windows` non-overlapping windows of `window_chars` characters from the clean text at `text_path`.

    Placement is uniform over all non-overlapping placements of windows with stride ``window_chars + slack``: draw
    n distinct values c_0 < ... < c_{n-1} from 0..free+n-1 (free = text length - n * stride) and start window i at
    c_i + i * (stride - 1). Each start then moves forward to the next word start, at most `slack` characters away,
    so windows rarely open mid-word and never overlap; slack = min(64, spare characters per window), so a text with
    no spare room still works. Windows may cross page boundaries (a blank line). The rows come in a seeded random
    order, numbered by `window`, so an extractor that takes windows 0, 1, 2, ... until its budget is met gets a
    random subset of the text. Same text and seed, same windows (numpy's PCG64 generator).

    The frame's ``attrs`` carry the metadata `write_windows` stores.
    """
    if n_windows < 1 or window_chars < 1:
        raise ValueError(f"need n_windows >= 1 and window_chars >= 1, got {n_windows} and {window_chars}")
    raw = Path(text_path).read_bytes()
    text = raw.decode("utf-8")
    needed = n_windows * window_chars
    if len(text) < needed:
        raise ValueError(
            f"{text_path} has {len(text):,} characters, but {n_windows:,} windows x {window_chars:,} "
            f"characters need {needed:,}. Lower `n_windows` or `window_chars`, or use a larger corpus."
        )
    slack = min(_MAX_SNAP_CHARS, (len(text) - needed) // n_windows)
    stride = window_chars + slack
    rng = np.random.default_rng(seed)
    free = len(text) - n_windows * stride
    corners = np.sort(rng.choice(free + n_windows, size=n_windows, replace=False))
    starts = [_next_word_start(text, int(start), slack) for start in corners + np.arange(n_windows) * (stride - 1)]
    order = rng.permutation(n_windows)
    frame = pd.DataFrame(
        {
            "window": np.arange(n_windows, dtype=np.int64),
            "start": np.asarray(starts, dtype=np.int64)[order],
        }
    )
    frame["text"] = [text[start : start + window_chars] for start in frame["start"]]
    frame.attrs = {
        "seed": seed,
        "n_windows": n_windows,
        "window_chars": window_chars,
        "source": str(text_path),
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        "source_chars": len(text),
    }
    return frame


def _next_word_start(text: str, start: int, slack: int) -> int:
    match = _WORD_START.search(text, start, start + slack + 1)
    return match.start() if match else start


def write_windows(frame: pd.DataFrame, path: Path) -> None:
    """Write windows from `sample_windows` to Parquet atomically, with their metadata in the schema."""
    missing = [column for column in COLUMNS if column not in frame.columns]
    needed_attrs = {"seed", "n_windows", "window_chars", "source_sha256"}
    if missing or not needed_attrs <= frame.attrs.keys():
        raise ValueError(
            f"not a windows frame (missing columns {missing}, attrs "
            f"{sorted(needed_attrs - frame.attrs.keys())}); make it with sample_windows()"
        )
    table = pa.Table.from_pandas(frame[COLUMNS], preserve_index=False)
    table = table.replace_schema_metadata({**table.schema.metadata, METADATA_KEY: json.dumps(frame.attrs).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_windows(path: Path) -> list[str]:
    """The window texts in consumption order (window 0 first)."""
    table = pq.read_table(path, columns=["window", "text"]).sort_by("window")
    windows = table.column("window").to_numpy()
    if not np.array_equal(windows, np.arange(len(windows))):
        raise ValueError(f"{path}: window ids are not 0..{len(windows) - 1}; rewrite it with write_windows()")
    return table.column("text").to_pylist()
