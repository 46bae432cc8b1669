"""Parquet shards of token vectors: one file per (model, checkpoint, layer).

Layout: column ``vector`` FixedSizeBinary[D x itemsize], each value the D little-endian float16 (or float32) numbers
of one token vector, and int32 columns ``window`` (index of the text window), ``position`` (token position in the
window) and ``token_id`` (-1 where the writer was not told). Metadata is JSON in the Arrow schema metadata under
``b"shape_of_learning"`` (``dim``, ``store_dtype``, model, checkpoint, layer, ...). A shard is written to
``<path>.tmp`` and renamed on a clean close, so a file at ``path`` is always complete.

Why bytes rather than a FixedSizeList<float16>: Parquet encodes a list with per-element repetition levels, which
writes at ~170-250 MB/s; a fixed-size binary column writes at memory speed (~4 GB/s, measured on the reference
machine), so writing shards never slows extraction down. Outside this package, decode with
``np.frombuffer(b"".join(table["vector"].to_pylist()), dtype=metadata["store_dtype"]).reshape(-1, metadata["dim"])``
or simply ``read_shard(path)``.
"""

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

METADATA_KEY = b"shape_of_learning"
STORE_DTYPES = ("float16", "float32")
INDEX_COLUMNS = ("window", "position", "token_id")

# Writing speed bounds extraction on a GPU: raw vector bytes neither compress nor dictionary-encode usefully, and
# statistics on them are meaningless. The small int columns compress well.
_WRITE_OPTIONS = dict(
    use_dictionary=list(INDEX_COLUMNS),
    write_statistics=list(INDEX_COLUMNS),
    compression={"vector": "none", **{name: "zstd" for name in INDEX_COLUMNS}},
    data_page_size=8 << 20,
    data_page_version="2.0",
)


def _as_numpy(vectors) -> np.ndarray:
    if hasattr(vectors, "detach"):  # a torch tensor; numpy has no bfloat16, so widen that first
        vectors = vectors.detach().cpu()
        vectors = (vectors.float() if str(vectors.dtype) == "torch.bfloat16" else vectors).numpy()
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[1] == 0:
        raise ValueError(f"vectors must be a 2-D (n, D) array with D >= 1, got shape {vectors.shape}")
    return vectors


class ShardWriter:
    """Streams batches of vectors into one Parquet shard; the file appears at `path` only on a clean exit.

    >>> with ShardWriter("layer_3.parquet", metadata={"layer": 3}) as shard:
    ...     for batch in batches:
    ...         shard.append(batch, windows=w, positions=p, token_ids=t)

    Each `append` becomes one Parquet row group, so memory is bounded by one batch. D is fixed by the first batch.
    On an exception inside the ``with`` block the temporary file is deleted and nothing is renamed.
    """

    def __init__(self, path, *, metadata: dict, store_dtype: str = "float16"):
        if store_dtype not in STORE_DTYPES:
            raise ValueError(f"store_dtype must be one of {sorted(STORE_DTYPES)}, got {store_dtype!r}")
        self.path = Path(path)
        self.tmp_path = self.path.with_name(self.path.name + ".tmp")
        self.metadata = dict(metadata)
        self.store_dtype = store_dtype
        self.rows = 0
        self._writer = None
        self._schema = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def append(self, vectors, *, windows=None, positions=None, token_ids=None):
        vectors = _as_numpy(vectors).astype(self.store_dtype, copy=False)
        n, dim = vectors.shape
        if self._writer is None:
            self._open(dim)
        elif dim != self.metadata["dim"]:
            raise ValueError(f"{self.path}: batch has D={dim}, earlier batches D={self.metadata['dim']}")
        payload = pa.py_buffer(np.ascontiguousarray(vectors, dtype=vectors.dtype.newbyteorder("<")))
        vector_type = self._schema.field("vector").type
        columns = {"vector": pa.FixedSizeBinaryArray.from_buffers(vector_type, n, [None, payload])}
        for name, values in zip(INDEX_COLUMNS, (windows, positions, token_ids)):
            values = np.full(n, -1, np.int32) if values is None else np.asarray(values, dtype=np.int32)
            if values.shape != (n,):
                raise ValueError(f"{self.path}: column {name!r} has shape {values.shape}, expected ({n},)")
            columns[name] = pa.array(values)
        self._writer.write_table(pa.table(columns, schema=self._schema))
        self.rows += n

    def _open(self, dim: int):
        self.metadata.update(dim=dim, store_dtype=self.store_dtype)
        fields = [pa.field("vector", pa.binary(dim * np.dtype(self.store_dtype).itemsize), nullable=False)]
        fields += [pa.field(name, pa.int32(), nullable=False) for name in INDEX_COLUMNS]
        self._schema = pa.schema(fields, metadata={METADATA_KEY: json.dumps(self.metadata).encode()})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self.tmp_path, self._schema, **_WRITE_OPTIONS)

    def close(self):
        """Finish the file and move it to `path` (atomic on POSIX)."""
        if self._writer is None:
            raise ValueError(f"{self.path}: no vectors were appended; a shard needs at least one row")
        self._writer.close()
        os.replace(self.tmp_path, self.path)

    def abort(self):
        """Drop the partial file; `path` is left untouched."""
        if self._writer is not None:
            self._writer.close()
        self.tmp_path.unlink(missing_ok=True)


def read_parquet(path, columns=None, fix: str = "delete it and rerun snakemake, which writes it again") -> pa.Table:
    """Read a Parquet file written by this pipeline; a truncated or corrupt one raises an error naming it and `fix`."""
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"{path} is truncated or corrupt ({error}); {fix}") from error


def read_shard(path) -> tuple[np.ndarray, dict]:
    """Return the shard's vectors as float32 (n, D) and its metadata dict."""
    table = read_parquet(
        path,
        ["vector"],
        fix="delete the shard's directory and rerun snakemake, which extracts it "
        "again (keep_embeddings: false also drops shards once measured)",
    )
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError(f"{path} is not a shape_of_learning shard: no {METADATA_KEY!r} schema metadata")
    metadata = json.loads(raw)
    column = table.column("vector").combine_chunks()
    dtype = np.dtype(metadata["store_dtype"]).newbyteorder("<")
    vectors = np.frombuffer(
        column.buffers()[1],
        dtype=dtype,
        count=len(column) * metadata["dim"],
        offset=column.offset * column.type.byte_width,
    )
    return vectors.reshape(len(column), metadata["dim"]).astype(np.float32), metadata
