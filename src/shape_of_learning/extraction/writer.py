"""Each batch's kept vectors, moved to the host and written to their shards behind the next batch's forward pass.

On a GPU the shard writes, not the model, set extraction's pace (docs/benchmarks.md), so nothing here makes the main
thread wait for the GPU: a batch's vectors are checked (finite; within float16's range when stored as float16) and
converted to the storage dtype on their device (a layer too small for float16 is stored as float32:
`FLOAT16_SMALLEST_RMS`), copied on a CUDA stream of their own into pinned host memory
(`non_blocking`), and writer threads wait on that copy's event before they read the checks and append to the shards.
The main thread meanwhile queues the next forward pass. On CPU the same steps run with neither stream nor event.

A shard receives its batches in order: each write first waits for the same shard's write of the batch before.
At most `in_flight` batches wait for their writes, which bounds host memory.
"""

import logging
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from shape_of_learning.extraction.loading import DTYPES
from shape_of_learning.extraction.shards import ShardWriter

logger = logging.getLogger(__name__)

FLOAT16_MAX = 65504.0
# A layer whose first batch has a root-mean-square value below this is stored as float32, not float16: float16's
# spacing near zero (2^-24) would then exceed 2^-14 of a typical value, and below 2^-25 every value is stored as 0
# (a random-init EfficientNet's blocks: transformers draws their batch-norm scales from N(0, 0.02) and the states
# shrink block by block to 1e-28).
FLOAT16_SMALLEST_RMS = 2.0**-10


class ShardPipeline:
    """Writes one batch at a time into `shards` (one per layer), overlapping the caller's next forward pass.

    >>> with ShardPipeline(shards, threads=4) as pipeline:
    ...     for batch in batches:
    ...         pipeline.put([(vectors, index), ...], labels)   # per layer: (n, D) on any device, index columns
    ...     pipeline.drain()                                     # every write done, or its error raised here

    An error found in a batch (non-finite values, float16 overflow, a failed write) is raised by a later `put` or
    by `drain`, as its own exception.
    """

    def __init__(self, shards: list[ShardWriter], *, threads: int, in_flight: int = 2):
        self.shards, self.in_flight = shards, in_flight
        self.threads = ThreadPoolExecutor(threads, thread_name_prefix="shard-writer")
        self.pending: deque[list[Future]] = deque()  # per batch waiting for its writes: one future per written layer
        self.last: list[Future | None] = [None] * len(shards)  # per shard, its latest write
        self.copy_streams: dict[torch.device, torch.cuda.Stream] = {}
        self.sized = [False] * len(shards)  # per shard, whether its first batch chose its store dtype

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.threads.shutdown(wait=True, cancel_futures=exc_type is not None)

    def put(self, layers: list[tuple[torch.Tensor, dict]], labels: list[str]) -> None:
        """Queue one batch: per layer its kept vectors (n, D) and index columns (`ShardWriter.append`'s keywords);
        a layer with n = 0 writes nothing. Waits for older batches only beyond `in_flight`."""
        staged = [
            self._stage(vectors, self._store_dtype(layer, vectors, labels[layer])) if len(vectors) else None
            for layer, (vectors, _) in enumerate(layers)
        ]
        events = {device: self._record(device) for device in self.copy_streams}
        writes = []
        for layer, (stage, (_, index)) in enumerate(zip(staged, layers)):
            if stage is None:  # a batch of skipped items (a short CANINE window) keeps nothing
                continue
            host, checks, device = stage
            write = self.threads.submit(
                self._write,
                self.shards[layer],
                host,
                checks,
                events.get(device),
                index,
                self.last[layer],
                labels[layer],
            )
            self.last[layer] = write
            writes.append(write)
        self.pending.append(writes)
        while len(self.pending) > self.in_flight:
            self._wait_oldest()

    def drain(self) -> None:
        """Wait for every queued write; raises the first error of the oldest batch that had one."""
        while self.pending:
            self._wait_oldest()

    def _wait_oldest(self) -> None:
        for write in self.pending.popleft():
            write.result()

    def _store_dtype(self, layer: int, vectors: torch.Tensor, label: str) -> str:
        """The shard's store dtype, float16 turned float32 at its first batch if the values are too small for
        float16 (`FLOAT16_SMALLEST_RMS`; before its first append, so the shard's metadata records it). A GPU wait
        per layer in the first batch, none later."""
        shard = self.shards[layer]
        if shard.store_dtype == "float16" and not self.sized[layer]:
            rms = float(vectors.double().square().mean().sqrt())
            if rms < FLOAT16_SMALLEST_RMS:
                logger.warning(
                    "%s: values of root-mean-square %.3g, too small for float16; stored as float32", label, rms
                )
                shard.store_dtype = "float32"
        self.sized[layer] = True
        return shard.store_dtype

    def _stage(self, vectors: torch.Tensor, store_dtype: str) -> tuple[torch.Tensor, torch.Tensor, torch.device | None]:
        """Checks and storage-dtype copy of `vectors` on their device, then (CUDA) their asynchronous copy to pinned
        host memory on the device's copy stream. Returns (host vectors, host checks, the CUDA device or None)."""
        non_finite = (~torch.isfinite(vectors)).sum().double()
        narrowed = store_dtype == "float16" and vectors.dtype != torch.float16
        # the largest magnitude matters only where the store narrows the range: otherwise no second pass for it
        largest = vectors.abs().amax().double() if narrowed else torch.zeros_like(non_finite)
        checks = torch.stack([non_finite, largest])
        stored = vectors.to(DTYPES[store_dtype])
        if vectors.device.type != "cuda":
            return stored, checks, None
        device = vectors.device
        stream = self.copy_streams.get(device)
        if stream is None:
            stream = self.copy_streams[device] = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))  # the copies start once the forward pass made them
        host = torch.empty(stored.shape, dtype=stored.dtype, pin_memory=True)
        host_checks = torch.empty(checks.shape, dtype=checks.dtype, pin_memory=True)
        with torch.cuda.stream(stream):
            host.copy_(stored, non_blocking=True)
            host_checks.copy_(checks, non_blocking=True)
        for tensor in (stored, checks):  # their memory is not reused by the next forward pass before the copy ran
            tensor.record_stream(stream)
        return host, host_checks, device

    def _record(self, device: torch.device) -> torch.cuda.Event:
        event = torch.cuda.Event()
        event.record(self.copy_streams[device])
        return event

    def _write(
        self,
        shard: ShardWriter,
        host: torch.Tensor,
        checks: torch.Tensor,
        event,
        index: dict,
        previous: Future | None,
        label: str,
    ) -> None:
        if previous is not None:
            previous.result()  # the shard's earlier batch first; its error, if any, is this write's too
        if event is not None:
            event.synchronize()
        non_finite, largest = checks.tolist()
        if non_finite:  # a float16/bfloat16 overflow: never stored, so never averaged into a metric
            raise FloatingPointError(
                f"{label}: {int(non_finite)} non-finite hidden-state values (NaN or Inf, "
                "typically a float16 overflow); extract with `dtype: float32` (the model's "
                "entry or extraction.dtype)"
            )
        if shard.store_dtype == "float16" and largest > FLOAT16_MAX:
            raise ValueError(
                f"{label}: values beyond the float16 range (|x| > {FLOAT16_MAX:g}); extract with store_dtype='float32'"
            )
        shard.append(host.numpy(), **index)
