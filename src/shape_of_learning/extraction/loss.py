"""A checkpoint's loss on the corpus, from its own language-model head: what lets its geometry be read against its
performance (the paper, section 3.3) and a broken or misplaced checkpoint be caught (`shape_of_learning.health`).

Both losses average over about `tokens` tokens spread evenly over the extraction's windows (not its first windows,
which would be one or two articles), in nats:

- Decoders: the mean next-token cross-entropy of every k-th of the extraction's kept tokens (k = n_tokens // tokens),
  each predicted from its prefix in its window, in the extraction's own forward pass: the model's head projects only
  the positions that predict them (transformers' `logits_to_keep` mask), so the hidden states stay those of the pass
  and the cost is the head's on `tokens` positions (docs/checkpoint-health.md).
- Encoders: the masked-LM cross-entropy needs a pass of its own, since masking changes the hidden states that are
  measured: every k-th planned window (k such that about `tokens` are masked), whole windows until `tokens` are,
  `mask_probability` of their non-special tokens replaced by the mask token (chosen with `seed`; no 80/10/10 as in
  training), the loss averaged over the masked tokens.

Each record also carries the per-token losses' sum of squares (`sum_squares`), from which the health stage computes
the loss's standard error (`shape_of_learning.health.assess`); the per-token losses themselves (`per_token`) and a
digest of the tokens they predict (`targets`): every checkpoint of a model predicts the same tokens, so where the
digests agree the health stage takes the standard error of a difference of two losses from their paired per-token
differences, far smaller than two independent errors; and the head's number of classes (`vocab_size`): a uniform
guess over them scores ln(vocab_size), the bound a broken checkpoint's loss lies above.
"""

import hashlib

import numpy as np
import torch

from shape_of_learning.extraction.inputs import TextInputs


class NextTokenLoss:
    """Accumulates the next-token loss of every `stride`-th of the first `n_tokens` kept tokens, at most `budget` of
    them, over the batches of one pass."""

    def __init__(self, budget: int, n_tokens: int):
        self.budget, self.n_tokens, self.stride = budget, n_tokens, max(1, n_tokens // budget)
        self.losses, self.targets, self.count, self.seen, self.pending, self.classes = [], [], 0, 0, 0, None

    def positions(self, kept: torch.Tensor) -> torch.Tensor:
        """The (B, L) positions whose logits predict this batch's share of the loss's tokens: p - 1 for each chosen
        kept token p >= 1, in the row-major order the extraction stores them. Pass it as `logits_to_keep`."""
        rows, columns = kept.nonzero(as_tuple=True)
        index = self.seen + torch.arange(len(rows))
        chosen = (index < self.n_tokens) & (index % self.stride == 0) & (columns > 0)
        rows, columns = rows[chosen][: self.budget - self.count], columns[chosen][: self.budget - self.count]
        predicting = torch.zeros_like(kept)
        predicting[rows, columns - 1] = True
        self.pending = len(index)  # counted once the batch's logits arrive: a batch retried smaller asks again
        return predicting

    def add(self, logits: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor) -> None:
        """`logits` (n, vocabulary) at the n `positions` (row-major order), whose targets are the next input ids."""
        targets = input_ids[:, 1:][positions[:, :-1]]
        # kept on the device until the record: no GPU wait per batch
        self.losses.append(
            torch.nn.functional.cross_entropy(logits.float(), targets.to(logits.device), reduction="none")
        )
        self.targets.append(targets)
        self.count += len(targets)
        self.seen += self.pending
        self.classes = logits.shape[-1]

    def record(self) -> dict:
        return _record("next-token", self.losses, self.targets, self.classes, "no kept token has a prefix")


def masked_lm_loss(
    model,
    source: TextInputs,
    tokenizer,
    *,
    budget: int,
    mask_probability: float,
    seed: int,
    batch_size: int,
    device: torch.device,
) -> dict:
    """The masked-LM loss of an encoder with its head on windows spread over `source`'s (module docstring)."""
    if tokenizer.mask_token_id is None:
        return _record("masked-lm", [], [], None, "the tokenizer has no mask token")
    specials = torch.tensor(sorted(tokenizer.all_special_ids))
    windows = [torch.tensor(ids) for _, ids, _ in source.plan]
    candidates = [torch.isin(ids, specials, invert=True) for ids in windows]
    stride = max(1, int(mask_probability * sum(int(c.sum()) for c in candidates) / budget))
    rng = np.random.default_rng(seed)
    rows, masked_count = [], 0
    for ids, candidate in list(zip(windows, candidates))[::stride]:
        masked = candidate & torch.from_numpy(rng.random(len(ids)) < mask_probability)
        rows.append((ids, masked))
        masked_count += int(masked.sum())
        if masked_count >= budget:
            break
    losses, targets, classes = [], [], None
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        longest = max(len(ids) for ids, _ in chunk)
        input_ids = torch.full((len(chunk), longest), source.pad_id, dtype=torch.long)
        attention_mask, labels = torch.zeros_like(input_ids), torch.full_like(input_ids, -100)
        for row, (ids, masked) in enumerate(chunk):
            input_ids[row, : len(ids)] = torch.where(masked, tokenizer.mask_token_id, ids)
            attention_mask[row, : len(ids)] = 1
            labels[row, : len(ids)] = torch.where(masked, ids, -100)
        masked = labels != -100
        if not masked.any():
            continue
        with torch.inference_mode():
            logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
        losses.append(
            torch.nn.functional.cross_entropy(
                logits[masked.to(logits.device)].float(), labels[masked].to(logits.device), reduction="none"
            )
        )
        targets.append(labels[masked])
        classes = logits.shape[-1]
    return _record("masked-lm", losses, targets, classes, "no token was masked")


def _record(
    kind: str, losses: list[torch.Tensor], targets: list[torch.Tensor], classes: int | None, empty: str
) -> dict:
    """The manifest's loss record of the per-token `losses` of the `targets` they predict: their mean, count and sum
    of squares (summed in float64), the losses themselves (to 6 significant digits) and a digest of the targets, and
    the head's `classes`; without a token, `empty` says why."""
    if not losses or not sum(len(found) for found in losses):
        return {"kind": kind, "value": None, "tokens": 0, "sum_squares": None, "vocab_size": classes, "reason": empty}
    per_token = torch.cat(losses).double().cpu()
    predicted = torch.cat(targets).to(torch.int64).cpu().numpy()
    return {
        "kind": kind,
        "value": float(per_token.mean()),
        "tokens": len(per_token),
        "sum_squares": float(per_token.square().sum()),
        "vocab_size": classes,
        "reason": "",
        "per_token": [float(f"{value:.6g}") for value in per_token.tolist()],
        "targets": hashlib.sha256(predicted.tobytes()).hexdigest()[:16],
    }
