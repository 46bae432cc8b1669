"""How large a model is, without downloading it: the committed table of every configured Hub model (model_sizes.csv,
package data), and a local model directory's own files.

The table's columns, one row per Hub repository (`hub_id`, a model entry's own; a model whose checkpoints live in
repositories of their own, as TinyLlama's, is read from its entry's):

- parameters: every parameter of the checkpoint's architecture as transformers builds it from the repository's
  config.json, counted on the meta device (what `extraction.loading.parameter_count` counts);
- forward_parameters: those each token is multiplied through in the extraction's pass: the model's body (no head:
  the loss's logits are a few hundred tokens'), its embedding tables left out; ALBERT's shared layer counted at each
  of its 12 uses; for T5, ByT5 and Whisper the encoder's, which alone runs;
- hidden_size: the width of the hidden states; where stages differ in width (CNNs, CvT, SegFormer), the mean over
  the states the pipeline extracts, so that shard bytes come out right;
- weights_dtype, weight_bytes: the dtype and total size of the weight files a checkpoint downloads;
- checked: `files` (the sizes and dtype were read on the cited huggingface.co page: the repository's file tree),
  `mirror` (a gated repository: a public copy's file tree), `no` (parameters x bytes of the dtype, plus the buffers
  the note names, not checked against the Hub); source, note.

The table is generated from the models' published config.json fields (model_configs.json, each with its source) by
`python -m shape_of_learning.cost.model_table`. Locks and the Hugging Face cache refine the download (`cost.disk`);
a local directory's sizes come from its safetensors headers (`local`).
"""

import csv
import functools
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("model_sizes.csv")
CHECKED = ("files", "mirror", "no")


@dataclass(frozen=True)
class ModelSize:
    parameters: int
    forward_parameters: int
    weight_bytes: int  # of one checkpoint's weight files
    hidden_size: int | None = None  # a local directory's from its config.json, where it names one


@functools.cache
def table() -> dict[str, ModelSize]:
    """The committed table, by hub_id (read once per process)."""
    with TABLE.open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    if bad := [row["hub_id"] for row in rows if row["checked"] not in CHECKED]:
        raise ValueError(f"{TABLE}: rows {bad} have a `checked` other than {CHECKED}")
    return {
        row["hub_id"]: ModelSize(
            int(row["parameters"]), int(row["forward_parameters"]), int(row["weight_bytes"]), int(row["hidden_size"])
        )
        for row in rows
    }


def of(model: str, models: dict[str, dict], checkpoints: dict[str, list]) -> ModelSize | None:
    """A model's size as far as it is known before its run: the table's row of its `hub_id`, else its newest local
    checkpoint directory's (`local`), else, for a fine-tuning, its base model's; None where none is known."""
    entry = models[model]
    size = table().get(entry.get("hub_id")) or next(
        filter(
            None, (local(Path(ckpt.location)) for ckpt in reversed(checkpoints.get(model, [])) if ckpt.source != "hub")
        ),
        None,
    )
    if size is None and "finetune" in entry:  # fine-tuning keeps the base model's architecture
        return of(entry["finetune"]["base"], models, checkpoints)
    return size


def counted(architecture: str, body: str, config, body_options: dict | None = None) -> tuple[int, int]:
    """The table's `parameters` and `forward_parameters` of a transformers `config`, built on torch's meta device (no
    memory, no download): every parameter of the checkpoint's `architecture` (a transformers class name, as its
    config.json's `architectures` names it); and those of the `body` the extraction runs (built with `body_options`,
    such as `add_pooling_layer: false`; the encoder alone for T5, ByT5 and Whisper), every embedding table
    left out once, a table two modules share (T5's `shared` and its encoder's `embed_tokens`) counted once, and
    ALBERT's layer groups, shared across its depth, counted at each use (model_table regenerates the table)."""
    import torch
    import transformers

    with torch.device("meta"):
        full = getattr(transformers, architecture)(config)
        runs = _transformers_class(body, config.model_type)(config, **(body_options or {}))
    tables = {
        id(p): p.numel()
        for module in runs.modules()
        if isinstance(module, torch.nn.Embedding)
        for p in module.parameters(recurse=False)
    }
    forward = sum(p.numel() for p in runs.parameters()) - sum(tables.values())
    if shared := getattr(getattr(runs, "encoder", None), "albert_layer_groups", None):
        uses = config.num_hidden_layers // config.num_hidden_groups  # each group runs this many times
        forward += (uses - 1) * sum(p.numel() for p in shared.parameters())
    return sum(p.numel() for p in full.parameters()), forward


def _transformers_class(name: str, model_type: str):
    """A transformers class by name: exported, or of its model type's modeling module (Whisper's encoder)."""
    import importlib

    import transformers

    module = f"transformers.models.{model_type}.modeling_{model_type}"
    return getattr(transformers, name, None) or getattr(importlib.import_module(module), name)


def local(folder: Path) -> ModelSize | None:
    """A model directory's sizes from the headers of its safetensors files (every tensor's shape; their bytes on
    disk): parameters, and forward parameters less the token-embedding table (vocab_size x hidden size of its
    config.json, where both are given), and that hidden size. None where the folder holds no safetensors (absent,
    not yet trained)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    parameters = sum(_tensor_elements(file) for file in files)
    try:
        settings = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        settings = {}
    width = next(
        (settings[key] for key in ("hidden_size", "d_model", "n_embd") if isinstance(settings.get(key), int)), 0
    )
    embedding = settings.get("vocab_size", 0) * width if isinstance(settings.get("vocab_size"), int) else 0
    return ModelSize(parameters, parameters - embedding, sum(file.stat().st_size for file in files), width or None)


def _tensor_elements(file: Path) -> int:
    """Elements of every tensor of a safetensors file: its header is 8 bytes of length, then JSON (dtype, shape)."""
    with file.open("rb") as stream:
        (length,) = struct.unpack("<Q", stream.read(8))
        header = json.loads(stream.read(length))
    return sum(math.prod(tensor["shape"]) for name, tensor in header.items() if name != "__metadata__")
