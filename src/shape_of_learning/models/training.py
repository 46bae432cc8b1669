"""Train the demo's own small models and save Pythia-like checkpoints: byte-level transformers on the text corpus,
a vision transformer and a CNN on the image corpus (scikit-learn's digits in the demo).

Four architectures, all from Hugging Face so the extractor loads them like any Hub model:
- ``"gpt_neox"``: a Pythia-architecture decoder (`GPTNeoXForCausalLM`), causal-LM objective;
- ``"bert"``: a BERT encoder (`BertForMaskedLM`), masked-LM objective (BERT's 15% masking, 80/10/10);
- ``"vit"``: a ViT (`ViTForImageClassification`), `num_layers` blocks on `patch_size` patches, classification;
- ``"resnet"``: a ResNet of basic blocks (`ResNetForImageClassification`), `num_layers` stages of one block each,
  channels doubling per stage up to `d_model`, classification.
Images are resized to `image_size` and normalised by a saved `ViTImageProcessor`, which extraction loads as well.

Tokens are bytes: token id = number of special tokens + byte value, so the whole corpus is turned into ids with one
`frombuffer` and every text is encodable. The saved tokenizer (a `tokenizers` byte-level BPE without merges) maps text
to exactly these ids and adds the special tokens the extractor must exclude via ``return_special_tokens_mask=True``:
the decoder gets a leading ``<|endoftext|>`` (BOS, as Pythia's EOS doubles as BOS), the encoder ``[CLS] ... [SEP]``.
Training windows carry the same special tokens, so training and extraction inputs look alike.
"""

import dataclasses
import json
import logging
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from tqdm.auto import tqdm
from transformers import (
    BertConfig,
    BertForMaskedLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    PreTrainedTokenizerFast,
    ResNetConfig,
    ResNetForImageClassification,
    ViTConfig,
    ViTForImageClassification,
    ViTImageProcessor,
)

from shape_of_learning.models import ARCHITECTURES

logger = logging.getLogger(__name__)

# Special tokens take the first ids; bytes follow. Pythia's names for the decoder, BERT's for the encoder.
DECODER_SPECIAL_TOKENS = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|padding|>"}
ENCODER_SPECIAL_TOKENS = {"pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """Defaults sized for ~30-60 s of training per model on a 2-core CPU (a few hundred steps)."""

    num_layers: int = 4
    d_model: int = 128
    num_heads: int = 4
    seq_len: int = 128  # tokens per window, special tokens included; also the model's max_position_embeddings
    batch_size: int = 32
    lr: float = 1e-3  # AdamW peak learning rate
    weight_decay: float = 0.1  # AdamW, on weight matrices and embeddings only
    warmup_fraction: float = 0.1  # linear warmup over this fraction of the steps, then cosine decay
    min_lr_fraction: float = 0.1  # the cosine decays to lr * min_lr_fraction
    grad_clip: float = 1.0
    dropout: float = 0.0  # Pythia trains without dropout
    mask_probability: float = 0.15  # BERT only: fraction of bytes chosen for prediction
    # gpt-neox's and Megatron-DeepSpeed's warmup gives the first update learning rate 0, so Pythia's step1 is its
    # step0 (EleutherAI/gpt-neox#1373, pythia#83): True reproduces that, for tests of such series
    zero_first_update: bool = False
    image_size: int = 32  # images only: side after resizing (digits are 8 x 8)
    patch_size: int = 4  # ViT only: (image_size / patch_size)^2 patches
    log_every: int = 10

    def __post_init__(self):
        positive = (
            "num_layers",
            "d_model",
            "num_heads",
            "seq_len",
            "batch_size",
            "lr",
            "log_every",
            "image_size",
            "patch_size",
        )
        if bad := [f"{name}={getattr(self, name)}" for name in positive if getattr(self, name) <= 0]:
            raise ValueError(f"hyperparameters must be positive: {', '.join(bad)}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        fractions = ("warmup_fraction", "min_lr_fraction", "dropout", "mask_probability")
        if bad := [f"{name}={getattr(self, name)}" for name in fractions if not 0 <= getattr(self, name) <= 1]:
            raise ValueError(f"hyperparameters must lie in [0, 1]: {', '.join(bad)}")
        if self.seq_len < 3:
            raise ValueError(f"seq_len={self.seq_len} leaves no room for text next to the special tokens; use >= 3")


def byte_tokenizer(arch: str, seq_len: int) -> PreTrainedTokenizerFast:
    """Byte-level tokenizer whose ids are ``len(special tokens) + byte``, with the architecture's special tokens
    around every text (`TextArchitecture`)."""
    facts = ARCHITECTURE_FACTS[arch]
    specials = list(dict.fromkeys(facts.special_tokens.values()))
    # GPT-2's printable stand-in character for each byte, the alphabet of the ByteLevel pre-tokenizer
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    unprintable = iter(range(256, 512))
    vocab = {token: i for i, token in enumerate(specials)}
    vocab |= {chr(b if b in printable else next(unprintable)): len(specials) + b for b in range(256)}
    tokenizer = Tokenizer(models.BPE(vocab, merges=[]))  # no merges: one token per byte
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(specials)
    added = dict.fromkeys(token for side in facts.around() for token in side)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=facts.single, pair=facts.pair, special_tokens=[(token, vocab[token]) for token in added]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=seq_len, **facts.special_tokens)


def image_processor(hp: Hyperparameters) -> ViTImageProcessor:
    """Resize to image_size x image_size and scale pixels to [-1, 1]; saved with every image checkpoint."""
    return ViTImageProcessor(
        size={"height": hp.image_size, "width": hp.image_size}, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )


def _vit(hp: Hyperparameters, num_labels: int) -> ViTForImageClassification:
    if hp.image_size % hp.patch_size:
        raise ValueError(f"image_size={hp.image_size} must be divisible by patch_size={hp.patch_size}")
    return ViTForImageClassification(
        ViTConfig(
            image_size=hp.image_size,
            patch_size=hp.patch_size,
            hidden_size=hp.d_model,
            num_hidden_layers=hp.num_layers,
            num_attention_heads=hp.num_heads,
            intermediate_size=4 * hp.d_model,
            num_labels=num_labels,
            hidden_dropout_prob=hp.dropout,
            attention_probs_dropout_prob=hp.dropout,
        )
    )


def _resnet(hp: Hyperparameters, num_labels: int) -> ResNetForImageClassification:
    widths = [max(1, hp.d_model >> (hp.num_layers - 1 - stage)) for stage in range(hp.num_layers)]
    return ResNetForImageClassification(
        ResNetConfig(
            embedding_size=widths[0],
            hidden_sizes=widths,
            depths=[1] * hp.num_layers,
            layer_type="basic",
            num_labels=num_labels,
        )
    )


def load_images(corpus: Path, hp: Hyperparameters) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel values and labels of a sampled image corpus (see `shape_of_learning.corpus.media`)."""
    from shape_of_learning.corpus.media import decode_image, read_media

    if Path(corpus).suffix != ".parquet":
        raise ValueError(
            f"{corpus} is not a sampled image corpus; an image model needs `modality: image` in its "
            "config entry and an `image_corpus` in the config"
        )
    items = read_media(corpus)
    if (items["label"] < 0).any():
        raise ValueError(
            f"{corpus} has images without a label; training needs a labelled corpus such as "
            "image_corpus: {sklearn_digits: true}"
        )
    pixels = image_processor(hp)([decode_image(data) for data in items["data"]], return_tensors="pt")["pixel_values"]
    return pixels, torch.tensor(items["label"].to_numpy())


def _text_shape(hp: Hyperparameters, tokenizer: PreTrainedTokenizerFast) -> dict:
    """The sizes every text model shares, in the names of Hugging Face's configs."""
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=hp.d_model,
        num_hidden_layers=hp.num_layers,
        num_attention_heads=hp.num_heads,
        intermediate_size=4 * hp.d_model,
        max_position_embeddings=hp.seq_len,
        pad_token_id=tokenizer.pad_token_id,
    )


def _pythia(hp: Hyperparameters, tokenizer: PreTrainedTokenizerFast) -> GPTNeoXForCausalLM:
    """Pythia's layout: parallel residual, rotary on 25% of head dims, untied embeddings (GPTNeoXConfig's defaults)."""
    config = GPTNeoXConfig(
        **_text_shape(hp, tokenizer),
        hidden_dropout=hp.dropout,
        attention_dropout=hp.dropout,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return GPTNeoXForCausalLM(config)


def _bert(hp: Hyperparameters, tokenizer: PreTrainedTokenizerFast) -> BertForMaskedLM:
    config = BertConfig(
        **_text_shape(hp, tokenizer), hidden_dropout_prob=hp.dropout, attention_probs_dropout_prob=hp.dropout
    )
    return BertForMaskedLM(config)


def _next_token_labels(input_ids: torch.Tensor, tokenizer, hp: Hyperparameters, generator) -> dict[str, torch.Tensor]:
    return {"input_ids": input_ids, "labels": input_ids}  # the model shifts labels by one itself


def _masked_labels(input_ids: torch.Tensor, tokenizer, hp: Hyperparameters, generator) -> dict[str, torch.Tensor]:
    """BERT masking: choose mask_probability of the bytes (never the first and last token, CLS/SEP); of those 80% ->
    [MASK], 10% -> a random byte, 10% unchanged; the loss is on the chosen positions only."""
    chosen = torch.rand(input_ids.shape, generator=generator) < hp.mask_probability
    chosen[:, [0, -1]] = False
    labels = torch.where(chosen, input_ids, -100)
    action = torch.rand(input_ids.shape, generator=generator)
    num_specials = len(tokenizer) - 256
    random_bytes = torch.randint(num_specials, len(tokenizer), input_ids.shape, generator=generator)
    input_ids = torch.where(chosen & (action < 0.8), tokenizer.mask_token_id, input_ids)
    input_ids = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_bytes, input_ids)
    return {"input_ids": input_ids, "labels": labels}


@dataclasses.dataclass(frozen=True)
class TextArchitecture:
    """A byte-level text model: its special tokens (the first ids, by their tokenizer names), the tokens around one
    text (`single`) and a pair of texts (`pair`), as tokenizers' TemplateProcessing writes them ($A, $B: the texts),
    the training windows wrapped alike; how a fresh model is built, (hp, tokenizer) -> model (seed the global RNG
    first for a reproducible initialisation); and its objective,
    (windows' ids, tokenizer, hp, generator) -> the model's inputs with their labels."""

    special_tokens: dict[str, str]
    single: str
    pair: str
    build: Callable[..., torch.nn.Module]
    objective: Callable[..., dict[str, torch.Tensor]]

    def around(self) -> tuple[list[str], list[str]]:
        """The special tokens before and after one text."""
        before, after = self.single.split("$A")
        return before.split(), after.split()


@dataclasses.dataclass(frozen=True)
class ImageArchitecture:
    """An image classifier: how a fresh one is built, (hp, number of labels) -> model (seed the global RNG first)."""

    build: Callable[..., torch.nn.Module]


_BOS = DECODER_SPECIAL_TOKENS["bos_token"]
# One row of facts per architecture `train` trains (the names: `models.ARCHITECTURES`, which the config's schema reads)
ARCHITECTURE_FACTS = {
    "gpt_neox": TextArchitecture(
        DECODER_SPECIAL_TOKENS, f"{_BOS} $A", f"{_BOS} $A {_BOS} $B:1", _pythia, _next_token_labels
    ),
    "bert": TextArchitecture(
        ENCODER_SPECIAL_TOKENS, "[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1", _bert, _masked_labels
    ),
    "vit": ImageArchitecture(_vit),
    "resnet": ImageArchitecture(_resnet),
}


def sample_batch(arch, corpus_ids, tokenizer, hp, generator) -> dict[str, torch.Tensor]:
    """Random windows of the corpus wrapped in the tokenizer's special tokens, with the objective's labels."""
    facts = ARCHITECTURE_FACTS[arch]
    before, after = ([tokenizer.convert_tokens_to_ids(token) for token in side] for side in facts.around())
    text_len = hp.seq_len - len(before) - len(after)
    starts = torch.randint(len(corpus_ids) - text_len + 1, (hp.batch_size,), generator=generator)
    text = torch.stack([corpus_ids[s : s + text_len] for s in starts.tolist()])
    column = lambda token_id: torch.full((hp.batch_size, 1), token_id)  # noqa: E731
    input_ids = torch.cat([*map(column, before), text, *map(column, after)], dim=1)
    return facts.objective(input_ids, tokenizer, hp, generator)


def learning_rate(step: int, total_steps: int, hp: Hyperparameters) -> float:
    """Linear warmup to hp.lr, then cosine decay to hp.lr * hp.min_lr_fraction at total_steps (`step` counts from 0).

    Warmup gives update `step` the rate hp.lr * (step + 1) / warmup, or with `zero_first_update` gpt-neox's
    hp.lr * step / warmup, whose first update (step 0) changes nothing."""
    warmup = math.ceil(hp.warmup_fraction * total_steps)
    if step < warmup:
        return hp.lr * (step + (0 if hp.zero_first_update else 1)) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return hp.lr * (hp.min_lr_fraction + (1 - hp.min_lr_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


def save_checkpoint(model, tokenizer, out_dir: Path, metadata: dict) -> None:
    """Write model, tokenizer and training metadata to a temporary sibling, then rename it into place."""
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "training.json").write_text(json.dumps(metadata, indent=2) + "\n")
    if out_dir.exists():
        logger.warning("replacing existing checkpoint %s", out_dir)
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)


def train(
    arch: str,
    corpus: Path,
    out_root: Path,
    save_steps: list[int],
    *,
    seed: int = 0,
    threads: int | None = None,
    **hyperparameters,
) -> list[Path]:
    """Train a small `arch` model on `corpus` and save ``out_root/step{N}/`` for N in save_steps.

    Runs max(save_steps) AdamW updates on random windows of the UTF-8 text `corpus` (byte-level text models) or on
    random batches of a labelled sampled image corpus (vit, resnet; `corpus.media`); step 0 is the initialisation,
    before any update. Each checkpoint dir holds model.safetensors, config.json, the tokenizer or image processor and
    training.json (arch, step,
    seed, hyperparameters, the loss of the last batch). Deterministic for a `seed` on a given machine and thread count.
    Any field of `Hyperparameters` can be overridden by keyword, e.g. ``train(..., num_layers=2, lr=3e-4)``.
    `threads` sets torch's intra-op threads for this process (default: torch's choice, all cores); pass the cores
    actually granted, since oversubscribed cores slow CPU training by up to 10x.
    Returns the checkpoint dirs in save_steps order (sorted, deduplicated).
    """
    hp = _hyperparameters(arch, hyperparameters)
    if not save_steps or not all(isinstance(step, int) and step >= 0 for step in save_steps):
        raise ValueError(f"save_steps must be a non-empty list of integers >= 0, got {save_steps}")
    save_steps = sorted(set(save_steps))
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model, tokenizer, batch, size = _model_and_batches(arch, corpus, hp, generator)
    optimizer = _optimizer(model, hp)
    total_steps = save_steps[-1]
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    logger.info(
        "training %s (%.2fM parameters) for %d steps on %s (%s)",
        arch,
        model.num_parameters() / 1e6,
        total_steps,
        corpus,
        size,
    )

    def save(step: int, loss: float | None) -> None:
        metadata = {"arch": arch, "step": step, "seed": seed, "loss": loss, "corpus": str(corpus)}
        metadata["hyperparameters"] = dataclasses.asdict(hp)
        save_checkpoint(model, tokenizer, out_root / f"step{step}", metadata)

    _updates(arch, model, optimizer, batch, hp, total_steps, set(save_steps), save)
    return [out_root / f"step{step}" for step in save_steps]


def _hyperparameters(arch: str, hyperparameters: dict) -> Hyperparameters:
    """The hyperparameters given by keyword, refused where the architecture or a name is unknown."""
    if arch not in ARCHITECTURES:  # outside the workflow, whose schema refuses it first
        raise ValueError(f"unknown arch {arch!r}; choose one of {ARCHITECTURES}")
    valid = [field.name for field in dataclasses.fields(Hyperparameters)]
    if unknown := sorted(set(hyperparameters) - set(valid)):
        raise TypeError(f"unknown hyperparameter(s) {unknown}; valid ones are {valid}")
    return Hyperparameters(**hyperparameters)


def _updates(
    arch: str,
    model,
    optimizer: torch.optim.AdamW,
    batch: Callable[[], dict],
    hp: Hyperparameters,
    total_steps: int,
    save_set: set[int],
    save: Callable[[int, float | None], None],
) -> None:
    """`total_steps` AdamW updates on batches drawn by `batch`, on the learning-rate schedule (`learning_rate`); the
    model saved at each step of `save_set` (step 0: before any update, with no loss)."""
    loss = None
    if 0 in save_set:
        save(0, loss)
    model.train()
    progress = tqdm(range(1, total_steps + 1), desc=f"train {arch}", unit="step")
    for step in progress:
        lr = learning_rate(step - 1, total_steps, hp)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = model(**batch()).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp.grad_clip)
        optimizer.step()
        loss = loss.item()
        progress.set_postfix(loss=f"{loss:.3f}")
        if step % hp.log_every == 0 or step == total_steps:
            logger.info("%s step %d/%d: loss %.4f, lr %.2e", arch, step, total_steps, loss, lr)
        if step in save_set:
            save(step, loss)


def _model_and_batches(arch: str, corpus: Path, hp: Hyperparameters, generator: torch.Generator):
    """A fresh `arch` model, its tokenizer or image processor, a function drawing one training batch, and the
    corpus's size in words."""
    facts = ARCHITECTURE_FACTS[arch]
    if isinstance(facts, ImageArchitecture):
        pixels, labels = load_images(corpus, hp)
        model = facts.build(hp, int(labels.max()) + 1)

        def batch():
            rows = torch.randint(len(labels), (hp.batch_size,), generator=generator)
            return {"pixel_values": pixels[rows], "labels": labels[rows]}

        return model, image_processor(hp), batch, f"{len(labels)} images"
    corpus_ids, tokenizer = _byte_corpus(corpus, arch, hp)
    model = facts.build(hp, tokenizer)
    return (
        model,
        tokenizer,
        lambda: sample_batch(arch, corpus_ids, tokenizer, hp, generator),
        f"{len(corpus_ids)} bytes",
    )


def _optimizer(model, hp: Hyperparameters) -> torch.optim.AdamW:
    """AdamW that, as nanoGPT's, decays matrices and embeddings, not biases and LayerNorm gains."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        [
            {"params": [p for p in parameters if p.dim() >= 2]},
            {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=hp.lr,
        weight_decay=hp.weight_decay,
        betas=(0.9, 0.95),
    )


def _byte_corpus(corpus_text: Path, arch: str, hp: Hyperparameters) -> tuple[torch.Tensor, PreTrainedTokenizerFast]:
    """The UTF-8 text as byte-token ids, and the byte tokenizer that maps text to the same ids."""
    corpus_bytes = Path(corpus_text).read_bytes()
    try:
        corpus_bytes.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{corpus_text} is not UTF-8 text ({error}); clean the corpus first") from error
    tokenizer = byte_tokenizer(arch, hp.seq_len)
    corpus_ids = torch.frombuffer(bytearray(corpus_bytes), dtype=torch.uint8).long() + (len(tokenizer) - 256)
    needed = hp.seq_len + hp.batch_size  # enough bytes for batch_size distinct windows
    if len(corpus_ids) < needed:
        raise ValueError(
            f"{corpus_text} has {len(corpus_ids)} bytes, too little for a batch of {hp.batch_size} "
            f"windows of {hp.seq_len} tokens (needs >= {needed}); use more text or smaller "
            "batch_size/seq_len"
        )
    return corpus_ids, tokenizer
