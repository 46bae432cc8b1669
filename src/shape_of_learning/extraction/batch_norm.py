"""Batch-norm statistics of a network that never saw data, estimated on the items it is measured on.

A batch-norm layer in eval mode normalises with its running statistics. A network that was never trained in train
mode (a random-init baseline, a step-0 checkpoint) still holds the defaults, mean exactly 0 and variance exactly 1,
so every batch norm is the identity (up to its affine scale) and the "floor" measured is not the architecture's: a
random ResNet's stages keep the stem's offset. Such layers get their statistics from the items the extraction reads,
as Precise BN does (Wu & Johnson 2021, "Rethinking 'Batch' in BatchNorm", section 3): one pass over them with those
layers in train mode and cumulative averaging (``momentum=None``: every batch's mean and unbiased variance weigh the
same), then eval mode. Unlike `torch.optim.swa_utils.update_bn` only the default layers switch to train mode:
dropout and drop-path stay off (EfficientNet's blocks have dropout), and layers with real statistics keep them.
A trained checkpoint's layers hold statistics of their own and run as published. `num_batches_tracked` is not read:
published checkpoints often lack it.
"""

import logging
import math

import torch
from torch.nn.modules.batchnorm import _BatchNorm

logger = logging.getLogger(__name__)


def batch_norms(model: torch.nn.Module) -> list[_BatchNorm]:
    """The model's batch-norm layers that track running statistics (BatchNorm1d/2d/3d, SyncBatchNorm)."""
    return [module for module in model.modules() if isinstance(module, _BatchNorm) and module.track_running_stats]


def at_defaults(norm: _BatchNorm) -> bool:
    """Whether a layer holds the statistics it was built with: mean exactly 0 and variance exactly 1 everywhere."""
    return bool((norm.running_mean == 0).all() and (norm.running_var == 1).all())


def estimate_statistics(model: torch.nn.Module, batches, norms: list[_BatchNorm]) -> int:
    """Replace the running statistics of `norms` (layers of `model`) by their cumulative average over `batches` (the
    forward pass's keyword arguments, on the model's device), the rest of the model in eval mode; returns the number
    of batches. The model is left in eval mode with each layer's momentum as it was."""
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # cumulative average: running = mean over the batches so far
        norm.train()
    count = 0
    try:
        with torch.inference_mode():
            for inputs in batches:
                model(**inputs)
                count += 1
    finally:
        for norm, momentum in zip(norms, momenta):
            norm.momentum = momentum
            norm.eval()
    if count == 0:
        raise ValueError("no batch to estimate batch-norm statistics on")
    return count


def estimation_chunks(items: int, batch_size: int) -> list[tuple[int, int]]:
    """(start, size) of ceil(items / batch_size) consecutive chunks of nearly equal size: each batch weighs the same
    in the cumulative average, so equal sizes make it the average over items, and no chunk is a lone item (a train-mode
    batch norm needs two values per channel, and a CNN's last stage may be 1x1)."""
    chunks = math.ceil(items / batch_size)
    bounds = [round(i * items / chunks) for i in range(chunks + 1)]
    return [(start, end - start) for start, end in zip(bounds, bounds[1:])]
