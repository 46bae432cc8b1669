"""Disk and download volume of a config, from what is known here: lock files, the HF cache, local model directories,
the model facts (`models.facts`).

    python -m shape_of_learning disk config.yaml                   # per model, offline
    python -m shape_of_learning disk presets/demo.yaml presets/ci.yaml --directory /scratch/run
    python -m shape_of_learning disk config.yaml --hub             # ask the Hub the sizes of unpinned checkpoints

A dry run (`snakemake -n`) prints the totals. Nothing is guessed: a checkpoint's download is known from its lock
(`weight_bytes`, written by `pinning.pin`), its weight files in the HF cache or (with --hub) the Hub's listing, else
from the model facts' sizes of each Hub model, each row citing its sources (`model_sizes`); a model in
none of these counts as unknown and totals are lower bounds ("≥"). One checkpoint's hidden-state shards hold

    tokens per layer (metrics.batches x metrics.batch_size) x (layers + 1) x hidden size x bytes of store_dtype

bytes of vectors (Parquet adds up to 12 bytes per token of index columns, compressed), the hidden size read from
the model's config.json where a local copy exists (`hidden_size`, `d_model` or `n_embd`), else the model facts'
(for CNNs, whose stages differ in width, the mean width of the states extracted); unknown otherwise. Peak disk:
weights of every checkpoint, or with `extraction.evict_weights` of two at a time in each lane of downloads (one
extracting or measured, the next downloading: `plan.Experiment.download_gates`), every lane's at once at worst;
shards of every checkpoint with `extraction.keep_embeddings`, else (temp()) of one checkpoint per extraction ahead of
its metrics jobs, at least one. The corpus and the results themselves are small next to these and are not counted.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import huggingface_hub  # HfApi, hf_hub_download looked up when called: shape_of_learning.network

from shape_of_learning import network, paths
from shape_of_learning.cost import model_sizes
from shape_of_learning.cost.model_sizes import ModelSize
from shape_of_learning.experiment.plan import DOWNLOADS_AHEAD
from shape_of_learning.models import facts, hf_cache, pinning
from shape_of_learning.models.checkpoints import Checkpoint

HIDDEN_SIZE_KEYS = ("hidden_size", "d_model", "n_embd")


@dataclass(frozen=True)
class Bytes:
    """A sum of known sizes, and how many of its terms are unknown (then `known` is a lower bound)."""

    known: int = 0
    unknown: int = 0

    def __add__(self, other: "Bytes") -> "Bytes":
        return type(self)(self.known + other.known, self.unknown + other.unknown)

    def __str__(self) -> str:
        if self.unknown and not self.known:
            return "unknown"
        return f"{'≥ ' if self.unknown else ''}{human(self.known)}"


def human(size: int) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000


@dataclass
class ModelVolume:
    model: str
    downloads: list[int | None]  # bytes per checkpoint; None where unknown; 0 where nothing is downloaded
    hidden_size: int | None
    shard_bytes: int | None  # one checkpoint's hidden-state shards
    weights: list[int | None] = field(default_factory=list)  # bytes each checkpoint loads (a local model's files)
    cached: list[bool] = field(default_factory=list)  # whether its weight files are all in the HF cache already
    size: ModelSize | None = None  # parameters: the model facts', or a local directory's (`model_sizes`)
    tabled: int = 0  # checkpoints whose download is the model facts'
    checkpoints: list[str] = field(default_factory=list)  # their names, in the order of `downloads`

    @property
    def download(self) -> Bytes:
        return sum(map(as_bytes, self.downloads), Bytes())

    @property
    def shards(self) -> Bytes:
        return Bytes((self.shard_bytes or 0) * len(self.downloads), 0 if self.shard_bytes else len(self.downloads))


def as_bytes(size: int | None) -> Bytes:
    return Bytes(0, 1) if size is None else Bytes(size)


def volumes(
    checkpoints: dict[str, list[Checkpoint]], models: dict[str, dict], tokens: int, store_dtype: str, hub: bool = False
) -> list[ModelVolume]:
    """Per model: each checkpoint's download, and its shards' bytes for `tokens` per layer stored as `store_dtype`
    (module docstring), read from the working directory (`paths.lock`, relative `path:` entries); `hub` asks the Hub
    for unknown sizes."""
    found = []
    for model, ckpts in checkpoints.items():
        entry = models[model]
        locks = [_lock(Path(paths.lock(model, ckpt.name))) for ckpt in ckpts]
        in_cache = [
            cached_sizes(ckpt, lock, entry["weights"]) if ckpt.source == "hub" else None
            for ckpt, lock in zip(ckpts, locks)
        ]
        downloads = [
            checkpoint_download(ckpt, lock, sizes, entry["weights"], hub)
            for ckpt, lock, sizes in zip(ckpts, locks, in_cache)
        ]
        hidden = next(filter(None, (hidden_size(ckpt, lock) for ckpt, lock in zip(ckpts, locks))), None)
        tabled, row = 0, model_sizes.table().get(entry.get("hub_id"))
        if row:  # a size the model facts know, where locks, the cache and the Hub tell none
            tabled, downloads = downloads.count(None), [row.weight_bytes if d is None else d for d in downloads]
        local = [model_sizes.local(Path(ckpt.location)) if ckpt.source != "hub" else None for ckpt in ckpts]
        size = model_sizes.of(model, models, checkpoints)
        if "finetune" in entry:  # fine-tuning keeps the base model's architecture
            base = next((v for v in found if v.model == entry["finetune"]["base"]), None)
            hidden = hidden or (base and base.hidden_size)
        hidden = hidden or (size and size.hidden_size)
        if hub and not hidden and ckpts[0].source == "hub":  # its config.json (a few kB) into the HF cache
            hidden = hidden_size(
                ckpts[0],
                None,
                network.retry(
                    lambda: huggingface_hub.hf_hub_download(
                        ckpts[0].location, "config.json", revision=ckpts[0].revision
                    ),
                    what=f"downloading the config.json of {ckpts[0].location}",
                ),
            )
        weights = [
            d if ckpt.source == "hub" else (files.weight_bytes if files else size and size.weight_bytes)
            for ckpt, d, files in zip(ckpts, downloads, local)
        ]
        cached = [sizes is not None for sizes in in_cache]
        shard = shard_bytes(tokens, entry["layers"], hidden, store_dtype) if hidden else None
        found.append(
            ModelVolume(
                model,
                downloads,
                hidden,
                shard,
                weights=weights,
                cached=cached,
                size=size,
                tabled=tabled,
                checkpoints=[ckpt.name for ckpt in ckpts],
            )
        )
    return found


def shard_bytes(tokens: int, layers: int, hidden_size: int, store_dtype: str) -> int:
    """One checkpoint's hidden-state shards: `tokens` vectors of `hidden_size` in each of its layers + 1 states."""
    return tokens * (layers + 1) * hidden_size * np.dtype(store_dtype).itemsize


def checkpoint_download(
    ckpt: Checkpoint, lock: dict | None, in_cache: dict[str, int] | None, weights: str, hub: bool = False
) -> int | None:
    """Bytes of a checkpoint's weight files: its lock's `weight_bytes`, else those of its weight files in the HF
    cache (`in_cache`: `cached_sizes`), else (with `hub`) the Hub's file sizes; None where unknown. 0 for a local
    directory: nothing is downloaded."""
    if ckpt.source != "hub":
        return 0
    if lock and set(lock.get("weight_bytes", {})) == set(lock["weights"]):
        return sum(lock["weight_bytes"].values())
    if in_cache is None and hub:
        return hub_download(ckpt, weights)
    return sum(in_cache.values()) if in_cache is not None else None


def cached_sizes(ckpt: Checkpoint, lock: dict | None, weights: str) -> dict[str, int] | None:
    """The sizes of a Hub checkpoint's weight files in the HF cache; None unless every one of them is there."""
    snapshot = _snapshot(ckpt, lock)
    if snapshot is None:
        return None
    try:
        return _file_sizes(snapshot, lock["weights"] if lock else _complete_weights(snapshot, weights))
    except ValueError:  # no weight files of that format in the snapshot
        return None


def hub_download(ckpt: Checkpoint, weights: str) -> int | None:
    """Bytes of a checkpoint's weight files as the Hub lists them (one `model_info` call, nothing downloaded)."""
    info = network.retry(
        lambda: huggingface_hub.HfApi().model_info(ckpt.location, revision=ckpt.revision, files_metadata=True),
        what=f"reading the files of {ckpt.location}@{ckpt.revision} on the Hub",
    )
    files, sizes = pinning.hub_files(info.siblings)
    _, chosen = pinning.select_weights(files, weights, f"{ckpt.model}/{ckpt.name}")
    return None if any(sizes[name] is None for name in chosen) else sum(sizes[name] for name in chosen)


def hidden_size(ckpt: Checkpoint, lock: dict | None, config: str | None = None) -> int | None:
    """The model's width from a local config.json: `config`, else the checkpoint's directory or its cache snapshot."""
    folder = _snapshot(ckpt, lock) if ckpt.source == "hub" else Path(ckpt.location)
    if not config and not folder:
        return None
    try:
        settings = json.loads(Path(config or folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return next((settings[key] for key in HIDDEN_SIZE_KEYS if isinstance(settings.get(key), int)), None)


def _lock(path: Path) -> dict | None:
    try:
        lock = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # unpinned, or a broken lock (the pin job reports that one)
    return lock if isinstance(lock, dict) and isinstance(lock.get("weights"), dict) else None


def _snapshot(ckpt: Checkpoint, lock: dict | None) -> Path | None:
    return hf_cache.snapshot(
        ckpt.location, lock["commit_sha"] if lock else hf_cache.commit_of(ckpt.location, ckpt.revision)
    )


def _complete_weights(snapshot: Path, weights: str) -> list[str]:
    """The weight files of a cached snapshot, and every shard its index names (ValueError if none)."""
    files = [str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_symlink() or p.is_file()]
    _, chosen = pinning.select_weights(dict.fromkeys(files, ""), weights, str(snapshot))
    for index in snapshot.glob("*.index.json"):
        shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        if shards & set(chosen):
            chosen |= dict.fromkeys(shards, "")
    return list(chosen)


def _file_sizes(snapshot: Path, names) -> dict[str, int] | None:
    """Sizes of the snapshot's files `names` (their blobs); None if any is missing (not downloaded, or evicted)."""
    paths = [snapshot / name for name in names]
    return {str(p): p.stat().st_size for p in paths} if all(p.is_file() for p in paths) else None


def summary(
    found: list[ModelVolume],
    extraction: dict,
    lanes: list[list[Checkpoint]] | None = None,
    kept: frozenset[tuple[str, str]] = frozenset(),
) -> str:
    """A few lines for the dry run: total download, shards, and the peak disk of each evict_weights/keep_embeddings
    setting, the config's (its `extraction` section) marked; `lanes` and `kept` as `peak` takes them."""
    download = sum((v.download for v in found), Bytes())
    shards = sum((v.shards for v in found), Bytes())
    no_width = [v.model for v in found if v.hidden_size is None]
    current = (extraction["evict_weights"], extraction["keep_embeddings"])
    tabled = sum(v.tabled for v in found)
    lines = [
        f"Disk and download volume of {sum(len(v.downloads) for v in found)} checkpoints of {len(found)} models "
        f"(from {paths.lock_dir('*')}/, the HF cache, local model directories and the model facts; per model: "
        "python -m shape_of_learning disk CONFIG):",
        f"  download: {download}"
        + "".join(
            f" ({text})"
            for text in [
                f"{tabled} checkpoints sized by the model facts, {facts.path().name}: "
                "their repositories' published sizes"
                if tabled
                else "",
                f"{download.unknown} checkpoints unpinned, not in the HF cache nor the "
                "model facts; add --hub to the command above to ask the Hub"
                if download.unknown
                else "",
            ]
            if text
        ),
    ]
    lines.append(
        f"  hidden-state shards ({extraction['store_dtype']}): {shards}{' in all' if shards.known else ''}"
        + (
            f" (hidden size unknown for {len(no_width)} of {len(found)} models: no local config.json, no row "
            "in the model facts)"
            if no_width
            else ""
        )
    )
    if not any(peak(found, evict, keep, lanes, kept).known for evict in (False, True) for keep in (False, True)):
        return "\n".join([*lines, "  peak disk: unknown until the sizes above are"])
    for evict in (False, True):
        settings = [
            f"{peak(found, evict, keep, lanes, kept)}{' (this config)' if (evict, keep) == current else ''} with "
            f"keep_embeddings: {str(keep).lower()}"
            for keep in (False, True)
        ]
        lines.append(f"  peak disk, evict_weights: {str(evict).lower()}: {'; '.join(settings)}")
    return "\n".join(lines)


def peak(
    found: list[ModelVolume],
    evict_weights: bool,
    keep_embeddings: bool,
    lanes: list[list[Checkpoint]] | None = None,
    kept: frozenset[tuple[str, str]] = frozenset(),
) -> Bytes:
    """Weights of every checkpoint, or (evicted once measured) of the DOWNLOADS_AHEAD + 1 largest of each lane
    of downloads (`lanes`: `Experiment.download_lanes`; one lane of every checkpoint where not given) and of those
    never evicted (`kept`, (model, checkpoint): `Experiment.kept_weights`), plus shards of every checkpoint (or of the
    largest, temp() shards leaving once their metrics are done): one extraction in flight at a time."""
    downloads = [size for v in found for size in v.downloads]
    if evict_weights:
        sizes = {(v.model, name): size for v in found for name, size in zip(v.checkpoints, v.downloads)}
        keys = [[(ckpt.model, ckpt.name) for ckpt in lane] for lane in lanes] if lanes else [list(sizes)]
        groups = [[sizes[key] for key in lane if key not in kept] for lane in keys]
        weights = sum(
            (Bytes(sum(sorted(filter(None, group))[-DOWNLOADS_AHEAD - 1 :]), group.count(None)) for group in groups),
            sum((as_bytes(sizes[key]) for key in kept if key in sizes), Bytes()),
        )
    else:
        weights = sum(map(as_bytes, downloads), Bytes())
    shards = (
        sum((v.shards for v in found), Bytes())
        if keep_embeddings
        else Bytes(max((v.shard_bytes or 0 for v in found), default=0), sum(not v.shard_bytes for v in found))
    )
    return weights + shards


def table(found: list[ModelVolume]) -> str:
    rows = [("model", "checkpoints", "download", "unknown", "hidden size", "shards/checkpoint", "shards")]
    for v in found:
        rows.append(
            (
                v.model,
                str(len(v.downloads)),
                str(v.download),
                str(v.download.unknown or ""),
                str(v.hidden_size or "?"),
                human(v.shard_bytes) if v.shard_bytes else "?",
                str(v.shards),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        for row in rows
    )
