"""Shards written in one call, for tests that need a layer's file without an extraction."""

from shape_of_learning.extraction.shards import ShardWriter


def write_shard(
    path, vectors, *, metadata: dict, store_dtype: str = "float16", windows=None, positions=None, token_ids=None
) -> None:
    """Write one (n, D) array (numpy or torch) as a complete shard; index columns default to -1."""
    with ShardWriter(path, metadata=metadata, store_dtype=store_dtype) as shard:
        shard.append(vectors, windows=windows, positions=positions, token_ids=token_ids)
