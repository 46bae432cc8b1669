"""Hidden-state extraction: one job per (model, checkpoint), every layer from one forward pass.

Layer 0 is the embedding output, layer L the output of block L (``output_hidden_states=True``; the head a model is
loaded with for its loss changes none of them). Token vectors of padding and, by default, of special tokens (BERT's
[CLS]/[SEP], Llama's BOS) are dropped; every layer holds exactly `n_tokens` of the remaining vectors: the first ones
of the windows, in order, or, where layers differ in positions per item (images, CANINE), k positions of each of the
same items at every layer (`inputs`). Shards stream to disk one batch at a time and appear only when the
whole job has succeeded. What a model reads (text, images, audio) and which of its vectors count as tokens is
`inputs`'s business; how a family differs, `families`'s; how a checkpoint loads, `loading`'s. The same pass records
the checkpoint's loss (`loss`) and fingerprint (`fingerprint`) in the manifest, for `shape_of_learning.health`.
"""

import logging
import math
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm
from transformers import AutoConfig

from shape_of_learning import network, paths
from shape_of_learning.extraction import POSITIONS_PER_ITEM, SPECIAL_TOKEN_POLICIES
from shape_of_learning.extraction.batch_norm import at_defaults, batch_norms, estimate_statistics, estimation_chunks
from shape_of_learning.extraction.families import (
    MASKED_LM,
    NEXT_TOKEN,
    block_states,
    depth,
    last_layer_after_final_norm,
)
from shape_of_learning.extraction.fingerprint import Fingerprint
from shape_of_learning.extraction.inputs import AudioInputs, ImageInputs, TextInputs, per_item_positions
from shape_of_learning.extraction.loading import device_and_dtype, load_model, load_preprocessor
from shape_of_learning.extraction.loss import NextTokenLoss, masked_lm_loss
from shape_of_learning.extraction.shards import STORE_DTYPES, ShardWriter
from shape_of_learning.extraction.writer import ShardPipeline
from shape_of_learning.models import pinning
from shape_of_learning.models.checkpoints import Checkpoint, tokenizer_location

logger = logging.getLogger(__name__)


def extract(
    checkpoint: Checkpoint,
    entry: dict,
    items: list,
    n_tokens: int,
    out_dir: Path,
    *,
    pin: dict | None = None,
    special_tokens: str = "exclude",
    store_dtype: str = "float16",
    device: str = "auto",
    dtype: str = "auto",
    loss: dict | None = None,
    positions_per_item: int | None = None,
) -> dict:
    """Write ``out_dir/layer_{0..L}.parquet`` with `n_tokens` token vectors each and return the job's manifest.

    `items` are the corpus of the entry's ``modality``: text windows (str), or image or audio files (bytes).
    `entry` is the model's validated config entry (``layers``, ``batch_size``, ``max_length``, ``dtype``,
    ``tokenizer``, ``trust_remote_code``, ``modality``, ``weights``; see `experiment.config.validate_model_entry`);
    `pin` is :func:`shape_of_learning.models.pinning.pin` of the checkpoint (computed if None):
    Hub weights load by its commit sha, in the format it chose (safetensors, or PyTorch files through
    ``torch.load(weights_only=True)``, which refuses pickled code). ``device="auto"``: CUDA if present, else CPU.
    `dtype` (extraction.dtype; the entry's own ``dtype`` wins where set): ``auto`` is bf16 on CUDA (fp16 where the
    GPU lacks bf16) and float32 on CPU. A model larger than the free GPU memory loads with
    ``device_map="auto"``; a CUDA out-of-memory halves the batch and retries. `loss` (extraction.loss: tokens,
    mask_probability, seed; None or tokens 0: none) asks for the checkpoint's loss (`loss` module).
    `positions_per_item` is k, the positions every layer keeps per item: an image model's
    extraction.positions_per_image, a text model's of the Godey figure extraction.positions_per_window, the same
    for every such model of a config (`experiment.config.positions_setting`); None: a text model keeps every token of
    its first windows, and an image model or CANINE its fewest positions per item (for use outside the workflow).
    Batch-norm layers that hold their default statistics get them from the items read, before the pass
    (`extraction.batch_norm`).
    """
    name = f"{checkpoint.model}/{checkpoint.name}"
    _check_arguments(special_tokens, store_dtype, n_tokens, name)
    pin = _checked_pin(checkpoint, entry, pin, name)
    revision = pin["commit_sha"]  # None for local directories
    modality, exclude_special = entry["modality"], special_tokens == "exclude"
    config, layers = _checked_config(checkpoint, entry, revision, name)
    device, dtype = device_and_dtype(entry["dtype"] or dtype, device, config.model_type)
    preprocessor = load_preprocessor(entry, checkpoint, revision)
    if modality == "text":  # tokenized before the weights load: a corpus too small fails in seconds
        source = _text_inputs(items, preprocessor, config, entry, n_tokens, exclude_special, positions_per_item, name)
    loaded = _load_weights(checkpoint, entry, pin, config, dtype, device, bool((loss or {}).get("tokens")), name)
    if modality != "text":  # an audio source reads the model's own feature encoder
        source = _media_inputs(modality, items, preprocessor, config, exclude_special, loaded.model)
    # the loss's tokens spread over every window planned: with k per window, over all their tokens
    next_token = NextTokenLoss(loss["tokens"], source.kept_tokens) if loaded.loss_kind == NEXT_TOKEN else None
    body = loaded.model if next_token else loaded.model.base_model  # a masked-LM head has nothing to predict here
    per_item = positions_per_item
    read = math.ceil(n_tokens / per_item) if per_item else len(source)
    statistics = _estimate_batch_norm(body, source, read, entry["batch_size"], loaded.device, dtype, name)
    metadata = _shard_metadata(checkpoint, revision, config, layers, n_tokens, dtype, special_tokens, name)
    stream = _Pass(layers, n_tokens, per_item, name).run(
        body, source, next_token, Path(out_dir), metadata, entry["batch_size"], store_dtype, loaded.device, dtype
    )
    loss_record = _loss_record(next_token, loaded, source, preprocessor, loss, stream["batch_size"])
    _log_job(name, metadata, stream, loaded.seconds, loss_record)
    return _manifest(pin, checkpoint, entry, config, metadata, store_dtype, loaded, statistics, stream, loss_record)


class _Loaded(NamedTuple):
    """A checkpoint's model as `load_model` returns it: the model, the device its inputs go to, the loss its head can
    report (None and why not); and the seconds the load took."""

    model: torch.nn.Module
    device: torch.device
    loss_kind: str | None
    no_loss: str | None
    seconds: float


def _load_weights(
    checkpoint: Checkpoint, entry: dict, pin: dict, config, dtype: torch.dtype, device: str, head: bool, name: str
) -> _Loaded:
    """The checkpoint's model, loaded as its pin says (`loading.load_model`), timed."""
    started = time.perf_counter()
    loaded = load_model(
        checkpoint.location,
        pin["commit_sha"],
        config,
        dtype,
        device,
        entry["trust_remote_code"],
        pin.get("weights_format", "safetensors"),  # locks written before PyTorch files were allowed have none
        name,
        kind=entry["kind"],
        modality=entry["modality"],
        head=head,
        init_seed=pin.get("init_seed"),
    )  # a RandomInit's lock
    return _Loaded(*loaded, time.perf_counter() - started)


def _text_inputs(
    items: list,
    preprocessor,
    config,
    entry: dict,
    n_tokens: int,
    exclude_special: bool,
    positions_per_window: int | None,
    name: str,
) -> TextInputs:
    """The text windows to read, tokenized (`inputs.TextInputs`)."""
    return TextInputs(
        items,
        preprocessor,
        config,
        n_tokens=n_tokens,
        max_length=entry["max_length"],
        exclude_special=exclude_special,
        name=name,
        positions_per_window=positions_per_window,
    )


def _media_inputs(modality: str, items: list, preprocessor, config, exclude_special: bool, model):
    """The image or audio files to read (`inputs.ImageInputs`, `inputs.AudioInputs`)."""
    if modality == "image":
        return ImageInputs(items, preprocessor, config, exclude_special)
    return AudioInputs(items, preprocessor, model)


def _log_job(name: str, metadata: dict, stream: dict, load_seconds: float, loss_record: dict) -> None:
    logger.info(
        "%s: %d tokens x %d layers in %.1f s (%.0f tokens/s), model load %.1f s; loss %s",
        name,
        metadata["tokens"],
        metadata["num_layers"] + 1,
        stream["seconds"],
        stream["tokens_per_second"],
        load_seconds,
        {key: value for key, value in loss_record.items() if key != "per_token"},
    )


def _manifest(
    pin: dict,
    checkpoint: Checkpoint,
    entry: dict,
    config,
    metadata: dict,
    store_dtype: str,
    loaded: _Loaded,
    statistics: dict,
    stream: dict,
    loss_record: dict,
) -> dict:
    """The job's manifest: the pin, what was read and how, the batch-norm estimate, the pass and the loss."""
    return {
        **pin,
        "tokenizer": tokenizer_location(entry, checkpoint),
        "family": config.model_type,
        "kind": entry.get("kind"),
        "layers": metadata["num_layers"],
        "modality": entry["modality"],
        "tokens_per_layer": metadata["tokens"],
        "hidden_size": getattr(config, "hidden_size", None),
        "vocab_size": getattr(config, "vocab_size", None),  # with family, layers and hidden_size: its shape (health)
        "max_length": entry["max_length"],
        "dtype": metadata["model_dtype"],
        "store_dtype": store_dtype,
        "device": str(loaded.device),
        "special_tokens": metadata["special_tokens"],
        "last_layer_after_final_norm": metadata["last_layer_after_final_norm"],
        **statistics,
        **stream,
        "load_seconds": round(loaded.seconds, 3),
        "loss": loss_record,
    }


def _check_arguments(special_tokens: str, store_dtype: str, n_tokens: int, name: str) -> None:
    if special_tokens not in SPECIAL_TOKEN_POLICIES:
        raise ValueError(f"special_tokens must be one of {SPECIAL_TOKEN_POLICIES}, got {special_tokens!r}")
    if store_dtype not in STORE_DTYPES:
        raise ValueError(f"store_dtype must be one of {sorted(STORE_DTYPES)}, got {store_dtype!r}")
    if n_tokens < 1:
        raise ValueError(f"{name}: n_tokens must be >= 1, got {n_tokens}")


def _shard_metadata(
    checkpoint: Checkpoint,
    revision: str | None,
    config,
    layers: int,
    n_tokens: int,
    dtype: torch.dtype,
    special_tokens: str,
    name: str,
) -> dict:
    """What every layer's shard records of the pass (`shards.METADATA_KEY`), its layer added by the writer."""
    after_final_norm = last_layer_after_final_norm(config)
    if after_final_norm is None:
        logger.warning("%s: family %r is not in the final-norm table; recording it as unknown", name, config.model_type)
    return dict(
        model=checkpoint.model,
        checkpoint=checkpoint.name,
        step=checkpoint.step,
        revision=checkpoint.revision,
        commit_sha=revision,
        num_layers=layers,
        tokens=n_tokens,
        model_dtype=str(dtype).removeprefix("torch."),
        special_tokens=special_tokens,
        family=config.model_type,
        last_layer_after_final_norm=after_final_norm,
    )


def _checked_pin(checkpoint: Checkpoint, entry: dict, pin: dict | None, name: str) -> dict:
    """`pin`, the checkpoint's entry of the lock file (computed where None), refused where it is another's."""
    pin = pin or pinning.pin(checkpoint, entry["weights"])
    if (pin["model"], pin["checkpoint"], pin["location"]) != (checkpoint.model, checkpoint.name, checkpoint.location):
        raise ValueError(
            f"{name}: the pin given is for {pin['model']}/{pin['checkpoint']} at {pin['location']}; "
            "pass this checkpoint's entry of the lock file"
        )
    return pin


def _checked_config(checkpoint: Checkpoint, entry: dict, revision: str | None, name: str) -> tuple:
    """The model's config and its number of blocks, refused where the config entry's `layers` or a text model's
    `max_length` does not fit it."""
    config = network.retry(
        lambda: AutoConfig.from_pretrained(
            checkpoint.location, revision=revision, trust_remote_code=entry["trust_remote_code"]
        ),
        what=f"{name}: loading the config of {checkpoint.location}",
    )
    layers = depth(config)
    if layers != entry["layers"]:
        raise ValueError(
            f"{name}: the model has {layers} blocks but its config entry says layers: {entry['layers']}; "
            f"set `layers: {layers}` for model {checkpoint.model!r}"
        )
    max_positions, max_length = getattr(config, "max_position_embeddings", None), entry["max_length"]
    if entry["modality"] == "text" and max_positions is not None and max_length > max_positions:
        raise ValueError(
            f"{name}: max_length {max_length} exceeds the model's {max_positions} positions; "
            f"set `max_length` <= {max_positions}"
        )
    return config, layers


class _Pass:
    """The forward pass over a source, streamed into one shard per layer: how many vectors each layer holds, the
    next item to read, the items used, k where layers differ in positions per item, and the fingerprint of what
    was kept."""

    def __init__(self, layers: int, n_tokens: int, per_item: int | None, name: str):
        self.layers, self.n_tokens, self.per_item, self.name = layers, n_tokens, per_item, name
        self.filled = [0] * (layers + 1)
        self.start = self.used = self.items_used = 0
        self.per_item_counts = []  # vectors kept of each item used, in order: the pairs of one item
        self.fingerprint = Fingerprint(layers + 1)

    def run(
        self,
        body,
        source,
        next_token: NextTokenLoss | None,
        out_dir: Path,
        metadata: dict,
        batch_size: int,
        store_dtype: str,
        device: torch.device,
        dtype: torch.dtype,
    ) -> dict:
        """Write every layer's shard; the manifest's record of the pass: items read and used, positions per item,
        the batch size that fit, the layers stored in float32, the time taken and the fingerprint of what was kept.
        A short shard is never written: the error comes before they close."""
        # On a GPU the shard writes, not the model, set the pace (docs/benchmarks.md): the writer threads of
        # `writer` copy each batch to the host and write it while the GPU runs the next batch. On CPU the cores are
        # busy with the forward pass and one writer thread suffices.
        writer_threads = min(self.layers + 1, len(os.sched_getaffinity(0))) if device.type == "cuda" else 1
        labels = [f"{self.name} layer {layer}" for layer in range(self.layers + 1)]
        started = time.perf_counter()
        with ExitStack() as stack:
            shards = [stack.enter_context(writer) for writer in self._shard_writers(out_dir, metadata, store_dtype)]
            pipeline = stack.enter_context(ShardPipeline(shards, threads=writer_threads))  # before closing
            progress = stack.enter_context(tqdm(total=self.n_tokens, unit="tok", desc=self.name, mininterval=5))
            while self.start < len(source) and min(self.filled) < self.n_tokens:
                batch = source.batch(self.start, batch_size)
                inputs = _on_device(batch.inputs, device, dtype)
                if next_token:  # the head projects only the positions that predict the loss's tokens
                    positions = next_token.positions(batch.kept)
                    inputs |= {"logits_to_keep": positions.to(device, non_blocking=True)}
                outputs = _forward_fitting(body, inputs, batch_size)
                if outputs is None:
                    batch_size //= 2
                    logger.warning("%s: CUDA out of memory; retrying with batch size %d", self.name, batch_size)
                    torch.cuda.empty_cache()
                    continue
                if next_token:
                    next_token.add(outputs.logits, batch.inputs["input_ids"], positions)
                kept = self._keep(batch, outputs.hidden_states, source)
                del outputs
                pipeline.put(kept, labels)
                progress.update(min(self.filled) - progress.n)
            pipeline.drain()
            self._check_complete(source)
        seconds = time.perf_counter() - started
        return {
            "windows_used": self.used,
            "items_used": self.items_used,
            "positions_per_item": self.per_item,
            "same_item_pair_share": self._same_item_pair_share(),
            "batch_size": batch_size,
            "seconds": round(seconds, 3),
            "tokens_per_second": round(self.n_tokens / seconds, 1),
            "float32_layers": [layer for layer, shard in enumerate(shards) if shard.store_dtype != store_dtype],
            "fingerprint": self.fingerprint.record(),
        }

    def _shard_writers(self, out_dir: Path, metadata: dict, store_dtype: str) -> list[ShardWriter]:
        """One shard writer per layer, each recording the pass's `metadata` and its layer."""
        return [
            ShardWriter(
                out_dir / paths.shard_name(layer), store_dtype=store_dtype, metadata={**metadata, "layer": layer}
            )
            for layer in range(self.layers + 1)
        ]

    def _keep(self, batch, hidden: tuple, source) -> list[tuple]:
        """Each layer's kept vectors of one batch, (n_kept, D), with their index (items, positions, token ids)."""
        if len(hidden) != self.layers + 1:
            raise RuntimeError(
                f"{self.name}: the forward pass returned {len(hidden)} hidden states, expected "
                f"{self.layers + 1} (embedding output + {self.layers} blocks)"
            )
        views = [batch.tokens(states) for states in hidden]  # keep masks are on the host: they wait for no GPU
        if source.per_item:
            if self.start == 0:
                self.per_item = _positions_per_item(
                    [keep for _, keep, _ in views], self.per_item, source.modality, source.unit, self.name
                )
            keeps = per_item_positions(
                [keep for _, keep, _ in views], batch.items, self.per_item, self.n_tokens - self.filled[0]
            )
            views = [(vectors, keep, token_ids) for (vectors, _, token_ids), keep in zip(views, keeps)]
        kept = []
        for layer, (vectors, keep, token_ids) in enumerate(views):
            rows, positions = keep.nonzero(as_tuple=True)
            rows, positions = (
                rows[: self.n_tokens - self.filled[layer]],
                positions[: self.n_tokens - self.filled[layer]],
            )
            self.filled[layer] += len(rows)
            if layer == 0:
                self.items_used += len(rows.unique())
                self.per_item_counts += rows.unique_consecutive(return_counts=True)[1].tolist()
            self.used = max(self.used, self.start + int(rows.max()) + 1 if len(rows) else 0)
            index = dict(
                windows=batch.items[rows].numpy(),
                positions=positions.numpy(),
                token_ids=None if token_ids is None else token_ids[rows, positions].numpy(),
            )
            flat = _kept(vectors, rows * vectors.shape[1] + positions)  # rows of (batch * length, D)
            self.fingerprint.add(layer, flat)
            kept.append((flat, index))
        self.start += len(batch.items)
        return kept

    def _same_item_pair_share(self) -> float:
        """The share of pairs of a layer's vectors that lie within one item (text window, image, clip), and so of the
        pairs of a metrics batch drawn from them uniformly, whatever its size: 1 / share is about the items a batch's
        pairs spread over. The same for every model that keeps the same k per item of the same budget."""
        counts = torch.tensor(self.per_item_counts, dtype=torch.float64)
        total = counts.sum()
        return round(float((counts * (counts - 1)).sum() / (total * (total - 1))), 6) if total > 1 else 0.0

    def _check_complete(self, source) -> None:
        if min(self.filled) < self.n_tokens:
            layer = self.filled.index(min(self.filled))
            needed = math.ceil(self.n_tokens * self.start / max(self.filled[layer], 1))
            raise ValueError(
                f"{self.name}: the {len(source)} {source.unit} yield {self.filled[layer]} token vectors "
                f"at layer {layer}, fewer than the budget n_tokens={self.n_tokens}; sample about "
                f"{needed} {source.unit} (the corpus's count) or lower the token budget"
            )


def _loss_record(
    next_token: NextTokenLoss | None, loaded: _Loaded, source, preprocessor, loss: dict | None, batch_size: int
) -> dict:
    """The checkpoint's loss for the manifest: from the pass's own logits, from a masked pass of its own (masking
    changes the hidden states measured), or none with the reason; and the seconds it took beyond the pass."""
    started = time.perf_counter()
    if next_token:
        record = next_token.record()
    elif loaded.loss_kind == MASKED_LM:
        record = masked_lm_loss(
            loaded.model,
            source,
            preprocessor,
            budget=loss["tokens"],
            mask_probability=loss["mask_probability"],
            seed=loss["seed"],
            batch_size=batch_size,
            device=loaded.device,
        )
    else:
        record = {"kind": None, "value": None, "tokens": 0, "reason": loaded.no_loss}
    record["seconds"] = round(time.perf_counter() - started, 3)
    return record


def _on_device(inputs: dict, device: torch.device, dtype: torch.dtype) -> dict:
    """The forward pass's keyword arguments on `device`, floating-point ones in `dtype`. non_blocking: the host
    stages the (pageable) inputs at once, and this thread need not wait for the GPU."""
    return {
        key: value.to(device, dtype=dtype if value.is_floating_point() else None, non_blocking=True)
        for key, value in inputs.items()
    }


def _estimate_batch_norm(
    model, source, items: int, batch_size: int, device: torch.device, dtype: torch.dtype, name: str
) -> dict:
    """The statistics of the batch-norm layers of `model` that hold their defaults, estimated on the first `items`
    of `source`, those the pass reads (`extraction.batch_norm`); and the manifest's record of it: the model's
    batch-norm layers, how many were estimated, on how many items."""
    norms = batch_norms(model)
    defaults = [norm for norm in norms if at_defaults(norm)]
    items = min(items, len(source)) if defaults else 0
    if defaults:
        started = time.perf_counter()
        chunks = estimation_chunks(items, 1 if source.solo else batch_size)
        estimate_statistics(
            model, (_on_device(source.batch(start, size).inputs, device, dtype) for start, size in chunks), defaults
        )
        logger.info(
            "%s: %d of %d batch-norm layers held default statistics; estimated on %d %s in %.1f s",
            name,
            len(defaults),
            len(norms),
            items,
            source.unit,
            time.perf_counter() - started,
        )
    return {"batch_norm_layers": len(norms), "batch_norm_estimated": len(defaults), "batch_norm_items": items}


def _positions_per_item(keeps: list[torch.Tensor], k: int | None, modality: str, unit: str, name: str) -> int:
    """k, the positions every layer keeps per item (`inputs.per_item_positions`), checked on the first item's
    candidates per layer (`keeps`, each (B, N)): `k` itself, or where None the fewest any layer has."""
    counts = [int(keep[0].sum()) for keep in keeps]
    fewest = min(counts)
    if k is None:
        if fewest == 0:
            raise ValueError(
                f"{name}: layer {counts.index(0)} keeps no vector of the first {unit[:-1]}; check the "
                "preprocessor's size and special_tokens"
            )
        return fewest
    if fewest < k:
        raise ValueError(
            f"{name}: layer {counts.index(fewest)} has {fewest} positions per {unit[:-1]}, fewer than "
            f"extraction.{POSITIONS_PER_ITEM[modality]} = {k}, which every such model of the config keeps; set "
            f"it to at most {fewest}"
        )
    return k


def _forward_fitting(model, inputs: dict, batch_size: int):
    """`_forward`, or None after a CUDA out-of-memory at a batch size that can still be halved."""
    try:
        return _forward(model, inputs)
    except torch.cuda.OutOfMemoryError:
        if batch_size == 1:
            raise
    return None  # returned outside the except block, so that the failed pass's tensors can be freed


def _forward(model, inputs: dict):
    """The model's output: `hidden_states`, the embedding output and every block's, each (batch, length, D) or a
    feature map (batch, C, H, W), taken by hooks where the model returns fewer (`families.block_states`); and, with
    a head asked for some positions, their `logits`."""
    with torch.inference_mode(), block_states(model) as blocks:
        outputs = model(**inputs, output_hidden_states=True)
    if blocks is not None:
        outputs.hidden_states = tuple(blocks)
    return outputs


def _kept(states: torch.Tensor, kept_rows: torch.Tensor) -> torch.Tensor:
    """The kept token vectors of one layer, (n_kept, D), on the layer's device; `kept_rows` index (batch * length)
    on the host. Pinned and non_blocking: the index reaches the GPU without this thread waiting for it."""
    if states.device.type == "cuda":
        kept_rows = kept_rows.pin_memory().to(states.device, non_blocking=True)
    return states.flatten(0, 1).index_select(0, kept_rows)  # on the layer's device: device_map may split layers
