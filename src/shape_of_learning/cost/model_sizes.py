"""How large a model is, without downloading it: a Hub model's row of the model facts (`models.facts`: its
parameters, forward parameters, hidden size and weight bytes, each row citing its sources), and a local model
directory's own files (`local`). Locks and the Hugging Face cache refine the download (`cost.disk`).
"""

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from shape_of_learning.models import facts


@dataclass(frozen=True)
class ModelSize:
    parameters: int
    forward_parameters: int
    weight_bytes: int  # of one checkpoint's weight files
    hidden_size: int | None = None  # a local directory's from its config.json, where it names one


def table() -> dict[str, ModelSize]:
    """The sizes of every model row of the model facts, by hub_id."""
    return {hub: ModelSize(**row["sizes"]) for hub, row in facts.table().items() if "sizes" in row}


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
