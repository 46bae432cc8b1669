"""Loading a pinned checkpoint for extraction: its dtype and device, its weights in the pinned format only, and its
placement when it does not fit on the GPU. In the workflow it reads the Hugging Face cache only, offline, where the
checkpoint's download job put its files (`shape_of_learning.models.download`); called elsewhere, a download from the
Hub that fails transiently is retried (`shape_of_learning.network.retry`).

A model is loaded whole or not at all. Every weight of the class must come from the checkpoint, and every weight of
the checkpoint must be the class's, but for the weights declared outside the hidden states, per family
(`families.OUTSIDE_HIDDEN_STATES`: heads, poolers, modules the class does not use). Any other weight missing from the
checkpoint (transformers would draw it at random), in the checkpoint but not in the model (the model would silently
measure fewer blocks than the checkpoint holds), or of another shape fails the load with the weights named: the
checkpoint's config.json and its weights disagree. Where the only weights missing are the loss head's, the model
loads, its hidden states unchanged, and reports no loss, with why.
"""

import logging
import pickle
import re
from collections import Counter

import torch
from accelerate.utils import get_max_memory

from shape_of_learning import network
from shape_of_learning.extraction.families import (
    FLOAT16_UNDERFLOWS,
    component,
    model_class,
    outside_hidden_states,
    random_model,
)
from shape_of_learning.models.checkpoints import Checkpoint, tokenizer_location

logger = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load_preprocessor(entry: dict, checkpoint: Checkpoint, revision: str | None):
    """What turns the entry's modality into model inputs: the tokenizer, image processor or feature extractor of the
    checkpoint at its pinned `revision`, or of the entry's `tokenizer` (Bloom's intermediate repositories have none)."""
    from transformers import AutoFeatureExtractor, AutoImageProcessor, AutoTokenizer

    source = tokenizer_location(entry, checkpoint)
    kind = {"text": AutoTokenizer, "image": AutoImageProcessor, "audio": AutoFeatureExtractor}[entry["modality"]]
    revision = revision if source == checkpoint.location else None
    return network.retry(
        lambda: kind.from_pretrained(source, revision=revision, trust_remote_code=entry["trust_remote_code"]),
        what=f"loading the {entry['modality']} preprocessor of {source}",
    )


def device_and_dtype(dtype: str, device: str, family: str | None = None) -> tuple[str, torch.dtype]:
    """The device and forward-pass dtype: `auto` is float32 on CPU and bfloat16 on CUDA, else float16, or float32 for
    a family whose states float16 cannot hold (`families.FLOAT16_UNDERFLOWS`), for which float16 is refused."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        if not device.startswith("cuda"):
            return device, torch.float32
        if torch.cuda.is_bf16_supported():
            return device, torch.bfloat16
        return device, torch.float32 if family in FLOAT16_UNDERFLOWS else torch.float16
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(DTYPES)}, got {dtype!r}")
    if dtype == "float16" and family in FLOAT16_UNDERFLOWS:
        raise ValueError(f"dtype float16 is refused for {family}: {FLOAT16_UNDERFLOWS[family]}; use float32 or auto")
    return device, DTYPES[dtype]


def load_model(
    location: str,
    revision: str | None,
    config,
    dtype: torch.dtype,
    device: str,
    trust_remote_code: bool,
    weights_format: str = "safetensors",
    name: str = "",
    *,
    kind: str = "",
    modality: str = "text",
    head: bool = True,
    init_seed: int | None = None,
) -> tuple:
    """The model in eval mode, the device its inputs go to, and the loss its head can report (None and why not),
    from the pinned weight format only; with `init_seed` (a random-init baseline, `models.checkpoints.RandomInit`),
    the architecture of `config` with random weights instead, seeded, no weights read.

    The class is `families.model_class`'s (without a head where `head` is False). A checkpoint without the head's
    weights (a sentence-transformers model, an encoder fine-tuned without its head) loads all the same, its hidden
    states unchanged, and reports no loss: a randomly initialised head measures nothing. Any other weight missing from
    the checkpoint, or in it but not in the model, that its family does not declare outside the hidden states
    (`families.OUTSIDE_HIDDEN_STATES`) is a ValueError naming them (`check_whole`).
    """
    if init_seed is not None:
        return _random_init(config, kind, modality, dtype, device, trust_remote_code, init_seed)
    kwargs = {
        "config": config,
        "revision": revision,
        "dtype": dtype,
        "use_safetensors": weights_format == "safetensors",
        "weights_only": True,
        "trust_remote_code": trust_remote_code,
        "output_loading_info": True,
        # a weight of another shape is reported, not raised without the checkpoint's name: `check_whole` refuses it
        "ignore_mismatched_sizes": True,
    }
    architecture, loss, reason = model_class(config, kind, modality, head)
    max_memory = _memory_split(architecture, config, trust_remote_code, dtype, device, location)
    if max_memory is not None:
        model, info = _from_pretrained(architecture, location, name, device_map="auto", max_memory=max_memory, **kwargs)
        missing_head = check_whole(model, info, name, location, revision)
        # inputs go where the first module (the embeddings) was placed
        return model, next(model.parameters()).device, *_head(loss, reason, missing_head)
    model, info = _from_pretrained(architecture, location, name, **kwargs)
    missing_head = check_whole(model, info, name, location, revision)
    return model.to(device), torch.device(device), *_head(loss, reason, missing_head)


def _random_init(
    config, kind: str, modality: str, dtype: torch.dtype, device: str, trust_remote_code: bool, init_seed: int
) -> tuple:
    """`load_model`'s answer for a random-init baseline: the architecture of `config` with weights drawn from
    `init_seed`, and no loss."""
    architecture = model_class(config, kind, modality, head=False)[0]
    with torch.random.fork_rng(devices=[]):  # the seed alone sets the weights; the caller's RNG is left as it was
        torch.manual_seed(init_seed)
        model = random_model(architecture, config, trust_remote_code)  # on CPU: the same weights on any device
    model.config.use_cache = False
    return (
        model.to(device=device, dtype=dtype).eval(),
        torch.device(device),
        None,
        "random initialisation: its head was never trained",
    )


def _memory_split(
    architecture: type, config, trust_remote_code: bool, dtype: torch.dtype, device: str, location: str
) -> dict | None:
    """The memory of each device for ``device_map="auto"`` where the weights take more than 80% of the GPU's free
    memory (leaving room for activations); None where they fit, or on CPU."""
    if not device.startswith("cuda"):
        return None
    weight_bytes = parameter_count(architecture, config, trust_remote_code) * dtype.itemsize
    index = torch.device(device).index or 0
    free_bytes = torch.cuda.mem_get_info(index)[0]
    if weight_bytes <= 0.8 * free_bytes:
        return None
    logger.info(
        "%s: %.1f GB of weights vs %.1f GB free on %s; loading with device_map='auto'",
        location,
        weight_bytes / 1e9,
        free_bytes / 1e9,
        device,
    )
    # accelerate would fill the GPU with weights and leave no room for a batch's activations (seen on an H200: out
    # of memory at batch size 1), so weights get 70% of the free memory and the rest goes to CPU
    return get_max_memory() | {index: int(0.7 * free_bytes)}


def parameter_count(architecture: type, config, trust_remote_code: bool) -> int:
    """The parameters of `architecture` built from `config`, counted on the meta device: nothing is allocated."""
    with torch.device("meta"):
        return sum(p.numel() for p in random_model(architecture, config, trust_remote_code).parameters())


def _head(loss: str | None, reason: str, missing: list[str]) -> tuple[str | None, str]:
    """The loss the model reports and why not: none where the checkpoint lacks weights of the loss head (`missing`)."""
    if loss and missing:
        shown = ", ".join(sorted(missing)[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        return None, f"the checkpoint has no {loss} head (missing weights: {shown})"
    return loss, reason


def check_whole(model, info: dict, name: str, location: str, revision: str | None = None) -> list[str]:
    """The weights of the loss head that the checkpoint lacks (initialised at random: the model reports no loss),
    from transformers' loading info (``from_pretrained(..., output_loading_info=True)``).

    Raises ValueError, naming the checkpoint, the class and the weights, where a weight outside those its family
    declares outside the hidden states (`families.OUTSIDE_HIDDEN_STATES`) is missing from the checkpoint, in the
    checkpoint but not in the model, or of another shape; for a family not declared there, where any weight is.
    """
    config, prefix = model.config, model.base_model_prefix
    outside = outside_hidden_states(config)
    head, other = (outside.head, outside.other) if outside is not None else ((), ())
    missing, unexpected = sorted(info.get("missing_keys", ())), sorted(info.get("unexpected_keys", ()))
    mismatched = sorted(info.get("mismatched_keys", ()))
    missing_head = [key for key in missing if component(key, prefix) in head]
    declared = [key for key in missing if component(key, prefix) in other]
    undeclared_missing = [key for key in missing if component(key, prefix) not in (*head, *other)]
    undeclared_unexpected = [key for key in unexpected if component(key, prefix) not in (*head, *other)]
    if undeclared_missing or undeclared_unexpected or mismatched:
        raise ValueError(
            _incomplete(
                type(model).__name__,
                config.model_type,
                outside is not None,
                undeclared_missing,
                undeclared_unexpected,
                mismatched,
                name,
                location,
                revision,
            )
        )
    if declared:  # a pooler, an unused classifier: drawn at random, outside the hidden states measured
        logger.info("%s: initialised at random, outside the hidden states: %s", name, _grouped(declared))
    return missing_head


def _incomplete(
    cls: str,
    family: str,
    declared: bool,
    missing: list[str],
    unexpected: list[str],
    mismatched: list,
    name: str,
    location: str,
    revision: str | None,
) -> str:
    """`check_whole`'s message: what disagrees, its likely cause and its fix."""
    where = f"{location} at revision {revision}" if revision else location
    found = []
    if missing:
        found.append(f"{len(missing)} weights of the model are missing from the checkpoint: {_grouped(missing)}")
    if unexpected:
        found.append(f"{len(unexpected)} weights of the checkpoint are not in the model: {_grouped(unexpected)}")
    if mismatched:
        shapes = ", ".join(
            f"{key} ({', '.join(map(str, saved))} in the checkpoint, {', '.join(map(str, built))} in the model)"
            for key, saved, built in mismatched[:4]
        )
        more = f" and {len(mismatched) - 4} more" if len(mismatched) > 4 else ""
        found.append(f"{len(mismatched)} weights have another shape in the checkpoint: {shapes}{more}")
    refused = f"{name + ': ' if name else ''}refused to load {where} as {cls}: {'; '.join(found)}."
    if not declared:
        return (
            f"{refused} Family {family!r} is not in the table of weights outside the hidden states "
            "(OUTSIDE_HIDDEN_STATES in shape_of_learning/extraction/families.py), so every weight of the model must "
            "come from the checkpoint and every weight of the checkpoint must be the model's. Declare the family there "
            "with those of these weights that are heads, poolers or modules the class does not use; any other is a "
            "checkpoint whose config.json and weights disagree"
        )
    return (
        f"{refused} These weights lie inside the hidden states measured: a missing one would be drawn at random, one "
        "the model lacks silently left out. The checkpoint's config.json and its weights disagree (a config edited "
        "without its weights, a conversion that dropped or added a layer). Nothing was extracted: pick another "
        "revision of the model (its entry's `revision`), or report the mismatch upstream, to the repository's owners"
    )


def _grouped(keys: list[str], shown: int = 4) -> str:
    """Weight names grouped by their prefix up to the first index (``gpt_neox.layers.2.*``), or else up to the module
    that holds them (``cls.predictions.*``), and counted: the first `shown` groups and how many more."""
    groups = Counter(_group(key) for key in keys)
    ordered = sorted(groups, key=_natural)
    named = [
        next(key for key in keys if _group(key) == group)
        if groups[group] == 1
        else f"{group}.* ({groups[group]} weights)"
        for group in ordered[:shown]
    ]
    if len(ordered) > shown:
        left = sum(groups[group] for group in ordered[shown:])
        named.append(f"and {len(ordered) - shown} more groups ({left} weights)")
    return ", ".join(named)


def _group(key: str) -> str:
    parts = key.split(".")
    index = next((i for i, part in enumerate(parts) if part.isdigit()), None)
    return ".".join(parts[: index + 1] if index is not None else parts[: max(1, min(2, len(parts) - 1))])


def _natural(group: str) -> list:
    """A sort key putting layers.2 before layers.10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", group)]


def _from_pretrained(architecture, location: str, name: str, **kwargs):
    """The model in eval mode and transformers' loading info (the weights the checkpoint lacked, initialised at
    random, and those it held beyond the model's)."""
    try:
        model, info = network.retry(
            lambda: architecture.from_pretrained(location, **kwargs), what=f"{name}: loading the weights of {location}"
        )
        model.config.use_cache = False  # a decoder would keep every layer's keys and values for a generation never run
        return model.eval(), info
    except pickle.UnpicklingError as error:
        culprit = next((line.strip() for line in str(error).splitlines() if "Unsupported global" in line), "")
        raise ValueError(
            f"{name}: refused to load the PyTorch weights of {location}: the pickle holds objects other than tensors "
            f"(code that would run on load; {culprit or 'torch says which in the log'}), which "
            "torch.load(weights_only=True) does not execute. Nothing was run. Use safetensors weights "
            "(`weights: safetensors`, or a revision that has them); the pipeline never loads pickles with "
            "weights_only=False"
        ) from error
