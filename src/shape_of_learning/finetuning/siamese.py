"""Siamese fine-tuning of Reimers & Gurevych (2019, Sentence-BERT), as Rajaee & Pilehvar (2021) fine-tune on STS-B.

Both sentences go through the same encoder; each is mean-pooled over its tokens (attention mask, special tokens
included, as Sentence-BERT pools); the loss is the MSE between the cosine of the two vectors and the gold score
scaled to [0, 1] (sentence-transformers' ``CosineSimilarityLoss``). AdamW, linear warm-up over the first 10% of the
steps then linear decay (Sentence-BERT's schedule). The paper: batch 32, learning rate 7e-5, 3 epochs.

A loop of our own rather than sentence-transformers: its trainer needs the `datasets` package on top of the pinned
transformers, and the loop is these few lines. The result is a plain `save_pretrained` directory (weights and
tokenizer) that extraction loads like any other model.
"""

import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

logger = logging.getLogger(__name__)


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token vectors of each row over its attended positions: (batch, length, D) -> (batch, D)."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


def cosine_loss(model, tokenizer, text1: list[str], text2: list[str], labels: torch.Tensor, max_length: int):
    """MSE between cos(pool(text1), pool(text2)) and `labels` in [0, 1]."""
    vectors = []
    for texts in (text1, text2):
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        batch = batch.to(model.device)
        vectors.append(mean_pool(model(**batch).last_hidden_state, batch["attention_mask"]))
    cosine = torch.nn.functional.cosine_similarity(*vectors)
    return torch.nn.functional.mse_loss(cosine, labels.to(cosine.device))


def finetune(location: str, pairs: pd.DataFrame, out_dir: Path, *, scale: float, revision: str | None = None,
             batch_size: int = 32, learning_rate: float = 7e-5, epochs: int = 3, max_steps: int | None = None,
             seed: int = 0, max_length: int = 128, warmup_fraction: float = 0.1, device: str = "auto") -> dict:
    """Fine-tune the encoder at `location` on `pairs` (text1, text2, score) and save it to `out_dir`.

    Labels are score / `scale` (5 for STS-B). Runs `epochs` passes over the shuffled pairs, or stops after
    `max_steps` updates when given (the demo's few CPU steps). Deterministic for a `seed` on one machine and thread
    count. Writes ``out_dir/finetuning.json`` with the settings and the loss of every step; returns that record.
    """
    if not (pairs["score"].between(0, scale)).all():
        raise ValueError(f"scores must lie in [0, scale={scale}] to become labels in [0, 1]; got "
                         f"[{pairs['score'].min()}, {pairs['score'].max()}]: set the dataset's `scale`")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(location, revision=revision)
    model = AutoModel.from_pretrained(location, revision=revision, use_safetensors=True).to(device).train()
    batches_per_epoch = -(-len(pairs) // batch_size)
    total = min(epochs * batches_per_epoch, max_steps or epochs * batches_per_epoch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, int(warmup_fraction * total), total)
    labels = torch.tensor(pairs["score"].to_numpy() / scale, dtype=torch.float32)
    losses = []
    with tqdm(total=total, desc=f"fine-tune {location}", unit="step") as progress:
        while len(losses) < total:
            order = torch.randperm(len(pairs), generator=generator)
            for start in range(0, len(pairs), batch_size):
                rows = order[start:start + batch_size]
                loss = cosine_loss(model, tokenizer, pairs["text1"].iloc[rows].tolist(),
                                   pairs["text2"].iloc[rows].tolist(), labels[rows], max_length)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                progress.update()
                progress.set_postfix(loss=f"{losses[-1]:.4f}")
                if len(losses) == total:
                    break
    logger.info("fine-tuned %s for %d steps: loss %.4f -> %.4f", location, total, losses[0], losses[-1])
    record = dict(base=location, revision=revision, pairs=len(pairs), scale=scale, batch_size=batch_size,
                  learning_rate=learning_rate, epochs=epochs, max_steps=max_steps, steps=total, seed=seed,
                  max_length=max_length, losses=losses)
    tmp = Path(out_dir).with_name(f".{Path(out_dir).name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "finetuning.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return record
