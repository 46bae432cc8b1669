"""Siamese fine-tuning of Reimers & Gurevych (2019, Sentence-BERT), as Rajaee & Pilehvar (2021) fine-tune on STS-B.

Both sentences go through the same encoder; each is mean-pooled over its own tokens; the loss is the MSE between the
cosine of the two vectors and the gold score scaled to [0, 1] (sentence-transformers' ``CosineSimilarityLoss``). The
optimisation is Sentence-BERT's fit loop (sentence-transformers' ``fit``, kept as ``old_fit`` since v3): batches of a
shuffled ``DataLoader``, AdamW with weight decay 0.01 on every parameter but biases and LayerNorm weights
(`NO_DECAY`), gradients clipped to norm 1 (`MAX_GRAD_NORM`), a linear warm-up over the first 10% of the steps
(rounded up, as its STS-B example does) then linear decay. The paper: batch 32, learning rate 7e-5, 3 epochs.

One difference from sentence-transformers, on purpose: the mean is over the tokens of the text, without the special
tokens the tokenizer adds ([CLS]/[SEP], <s>/</s>), which sentence-transformers' ``Pooling`` includes. That is the
sentence vector Rajaee & Pilehvar's notebook evaluates (`shape_of_learning.rajaee_pilehvar.analysis`), so fine-tuning
trains the vector that Tables 1-2 measure. ``tests/test_rajaee_pilehvar.py`` trains a tiny model both here and with
sentence-transformers' own ``old_fit`` (given this pooling) and finds the same losses and weights.

A loop of our own rather than sentence-transformers': its ``fit`` needs the `datasets` package on top of the pinned
transformers, and ``old_fit``, which does not, is marked for removal; the loop is these few lines. The result is a
plain `save_pretrained` directory (weights and tokenizer) that extraction loads like any other model.
"""

import json
import logging
import math
import shutil
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

from shape_of_learning import network

logger = logging.getLogger(__name__)

NO_DECAY = ("bias", "LayerNorm.bias", "LayerNorm.weight")  # sentence-transformers' fit: names exempt from decay
WEIGHT_DECAY = 0.01  # sentence-transformers' fit default
MAX_GRAD_NORM = 1.0  # sentence-transformers' fit default


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token vectors of each row over the positions where `mask` is 1: (batch, length, D) -> (batch, D);
    a row without any such position pools to the zero vector."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)


def sentence_vectors(model, tokenizer, texts: list[str], max_length: int) -> torch.Tensor:
    """Each text's mean token vector at the last layer, over its own tokens: padding and the special tokens the
    tokenizer adds are left out (the notebook's population, `shape_of_learning.rajaee_pilehvar.analysis`)."""
    batch = tokenizer(
        texts,
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
        return_special_tokens_mask=True,
    ).to(model.device)
    added = batch.pop("special_tokens_mask")  # 1 for the tokens the tokenizer adds, and padding; not [UNK]
    return mean_pool(model(**batch).last_hidden_state, batch["attention_mask"] * (1 - added))


def cosine_loss(model, tokenizer, text1: list[str], text2: list[str], labels: torch.Tensor, max_length: int):
    """MSE between cos(pool(text1), pool(text2)) and `labels` in [0, 1]."""
    cosine = torch.nn.functional.cosine_similarity(
        *(sentence_vectors(model, tokenizer, texts, max_length) for texts in (text1, text2))
    )
    return torch.nn.functional.mse_loss(cosine, labels.to(cosine.device))


def parameter_groups(model: torch.nn.Module, weight_decay: float = WEIGHT_DECAY) -> list[dict]:
    """AdamW's parameter groups as sentence-transformers' fit builds them: `weight_decay` for every parameter whose
    name contains none of `NO_DECAY`, none for biases and LayerNorm weights."""
    named = list(model.named_parameters())
    exempt = [any(part in name for part in NO_DECAY) for name, _ in named]
    return [
        {"params": [p for (_, p), no in zip(named, exempt) if not no], "weight_decay": weight_decay},
        {"params": [p for (_, p), no in zip(named, exempt) if no], "weight_decay": 0.0},
    ]


def finetune(
    location: str,
    pairs: pd.DataFrame,
    out_dir: Path,
    *,
    scale: float,
    revision: str | None = None,
    weights_format: str = "safetensors",
    batch_size: int = 32,
    learning_rate: float = 7e-5,
    epochs: int = 3,
    max_steps: int | None = None,
    seed: int = 0,
    max_length: int = 128,
    warmup_fraction: float = 0.1,
    device: str = "auto",
) -> dict:
    """Fine-tune the encoder at `location` on `pairs` (text1, text2, score) and save it to `out_dir`.

    Labels are score / `scale` (5 for STS-B). Runs `epochs` passes over the pairs, shuffled by a ``DataLoader`` whose
    generator is seeded with `seed`, or stops after `max_steps` updates when given (the demo's few CPU steps). The
    global torch seed is set to `seed` once the model is loaded, so dropout draws the same masks as
    sentence-transformers' fit started from the same seed. Deterministic for a `seed` on one machine and thread
    count. Writes ``out_dir/finetuning.json`` with the settings and the loss of every step; returns that record.
    """
    _check_scores(pairs, scale)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer, model = _load_encoder(location, revision, weights_format, device)
    torch.manual_seed(seed)
    batches = torch.utils.data.DataLoader(
        range(len(pairs)), batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    total = min(epochs * len(batches), max_steps or epochs * len(batches))
    optimizer = torch.optim.AdamW(parameter_groups(model), lr=learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(warmup_fraction * total), total)
    labels = torch.tensor(pairs["score"].to_numpy() / scale, dtype=torch.float32)
    with tqdm(total=total, desc=f"fine-tune {location}", unit="step") as progress:
        losses = _train(model, tokenizer, pairs, labels, batches, optimizer, schedule, total, max_length, progress)
    logger.info("fine-tuned %s for %d steps: loss %.4f -> %.4f", location, total, losses[0], losses[-1])
    record = dict(
        base=location,
        revision=revision,
        pairs=len(pairs),
        scale=scale,
        batch_size=batch_size,
        learning_rate=learning_rate,
        epochs=epochs,
        max_steps=max_steps,
        steps=total,
        seed=seed,
        max_length=max_length,
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=MAX_GRAD_NORM,
        losses=losses,
    )
    _save(model, tokenizer, record, Path(out_dir))
    return record


def _check_scores(pairs: pd.DataFrame, scale: float) -> None:
    if not (pairs["score"].between(0, scale)).all():
        raise ValueError(
            f"scores must lie in [0, scale={scale}] to become labels in [0, 1]; got "
            f"[{pairs['score'].min()}, {pairs['score'].max()}]: set the dataset's `scale`"
        )


def _load_encoder(location: str, revision: str | None, weights_format: str, device: str) -> tuple:
    """The tokenizer and the encoder at `location`, from the pinned weight format only (the files its download job
    fetched), the encoder on `device` in training mode."""
    tokenizer = network.retry(
        lambda: AutoTokenizer.from_pretrained(location, revision=revision), what=f"loading the tokenizer of {location}"
    )
    # float32 whatever the checkpoint was saved in, as Sentence-BERT trains (no mixed precision)
    model = network.retry(
        lambda: AutoModel.from_pretrained(
            location, revision=revision, use_safetensors=weights_format == "safetensors", dtype=torch.float32
        ),
        what=f"loading the weights of {location}",
    )
    return tokenizer, model.to(device).train()


def _train(
    model,
    tokenizer,
    pairs: pd.DataFrame,
    labels: torch.Tensor,
    batches,
    optimizer,
    schedule,
    total: int,
    max_length: int,
    progress,
) -> list[float]:
    """`total` updates over the shuffled `batches`, epoch after epoch; the loss of each."""
    losses = []
    while len(losses) < total:
        for rows in batches:
            loss = cosine_loss(
                model,
                tokenizer,
                pairs["text1"].iloc[rows].tolist(),
                pairs["text2"].iloc[rows].tolist(),
                labels[rows],
                max_length,
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
            optimizer.step()
            optimizer.zero_grad()
            schedule.step()
            losses.append(loss.item())
            progress.update()
            progress.set_postfix(loss=f"{losses[-1]:.4f}")
            if len(losses) == total:
                break
    return losses


def _save(model, tokenizer, record: dict, out_dir: Path) -> None:
    """The fine-tuned model, its tokenizer and `record` (finetuning.json) written to a temporary sibling of `out_dir`,
    then renamed into its place."""
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "finetuning.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
