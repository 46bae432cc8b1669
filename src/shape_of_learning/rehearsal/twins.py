"""Tiny twins of the configured models, built from the model facts as the rehearsal reads them (`structure`): for each
row the same class and features at 2 layers and a small width, random weights of a fixed seed, its tokenizer, image
processor or feature extractor, published into a hub folder (`local_hub`) on the branches the real series names, in its
weight formats (`.bin`-only, sharded). The same table and code give the same bytes on every machine.

    python -m shape_of_learning.rehearsal.twins HUB_FOLDER      # every row of the model facts

Tokenizers are trained here on `TRAINING_TEXT` (tiny vocabularies of the real kind: byte-level BPE, WordPiece,
unigram); CANINE's and ByT5's need no vocabulary. Each branch of a series holds other random weights (its own seed),
so no two checkpoints of a twin are the same model.
"""

import argparse
import hashlib
import io
import json
import tempfile
from pathlib import Path

import torch

from shape_of_learning.extraction.families import model_class
from shape_of_learning.rehearsal import structure
from shape_of_learning.rehearsal.local_hub import add_branch

TRAINING_TEXT = (
    "The shape of learning: anisotropy and intrinsic dimensions in transformer-based models. "
    "Each checkpoint of a series is measured on the same windows of text, images and speech. "
    "Layers in the middle of a decoder are the most anisotropic; encoders are more uniform. "
    "Numbers 0123456789 and punctuation (, . ; : ! ? - ' \") appear too."
)
WIDTH, LAYERS, HEADS, FFN = 32, 2, 4, 64
IMAGE_SIZE = 32
# the tokenizers with a vocabulary of their own (the twin's vocab_size is theirs), by the table's class name
BYTE_LEVEL_BPE = {
    "GPT2Tokenizer": "GPT2Tokenizer",
    "RobertaTokenizer": "RobertaTokenizer",
    "GPTNeoXTokenizerFast": "GPTNeoXTokenizer",
    "LlamaTokenizer": "LlamaTokenizer",
    "GPTNeoXTokenizer": "GPTNeoXTokenizer",  # as a repository's tokenizer_config.json names it (`facts add`)
}
SERIALISED_BPE = ("BloomTokenizerFast", "PreTrainedTokenizerFast")  # saved as tokenizer.json alone, as theirs are
UNIGRAM = ("AlbertTokenizer", "T5Tokenizer")
SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
TOKENIZERS = (*BYTE_LEVEL_BPE, *SERIALISED_BPE, *UNIGRAM, "BertTokenizer")


TEXT = {"num_hidden_layers": LAYERS, "hidden_size": WIDTH, "num_attention_heads": HEADS, "intermediate_size": FFN}
TINY = {  # by model_type; any other family: TEXT
    "gpt2": {"n_layer": LAYERS, "n_embd": WIDTH, "n_head": HEADS},
    "gptj": {"n_layer": LAYERS, "n_embd": WIDTH, "n_head": HEADS, "rotary_dim": 4},
    "bloom": {"n_layer": LAYERS, "hidden_size": WIDTH, "n_head": HEADS},
    "opt": {
        "num_hidden_layers": LAYERS,
        "hidden_size": WIDTH,
        "num_attention_heads": HEADS,
        "ffn_dim": FFN,
    },
    "llama": TEXT,
    "albert": TEXT | {"embedding_size": WIDTH // 2},
    "t5": {
        "num_layers": LAYERS,
        "num_decoder_layers": LAYERS,
        "d_model": WIDTH,
        "d_ff": FFN,
        "num_heads": HEADS,
        "d_kv": WIDTH // HEADS,
    },
    "whisper": {
        "encoder_layers": LAYERS,
        "decoder_layers": LAYERS,
        "d_model": WIDTH,
        "encoder_ffn_dim": FFN,
        "decoder_ffn_dim": FFN,
        "encoder_attention_heads": HEADS,
        "decoder_attention_heads": HEADS,
    },
    "wav2vec2": TEXT | {"conv_dim": (WIDTH,) * 7, "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4},
    "vit": TEXT | {"image_size": IMAGE_SIZE, "patch_size": 8},
    "beit": TEXT | {"image_size": IMAGE_SIZE, "patch_size": 8},
    "cvt": {
        "depth": [1, 2, 3],  # transformers indexes stage i's drop paths by i: depth[i] > i
        "embed_dim": [16, 32, 48],
        "num_heads": [1, 2, 3],
    },
    "segformer": {
        "depths": [1, 1, 1, 1],
        "hidden_sizes": [8, 16, 24, 32],
        "num_attention_heads": [1, 2, 2, 4],
        "decoder_hidden_size": WIDTH,
    },
    "resnet": {"depths": [1, 1], "hidden_sizes": [16, 32], "embedding_size": 8},
    "convnext": {"depths": [1, 1], "hidden_sizes": [16, 32], "num_stages": 2},
    "efficientnet": {
        "num_block_repeats": [1, 1],
        "in_channels": [32, 16],
        "out_channels": [16, 24],
        "kernel_sizes": [3, 3],
        "strides": [1, 2],
        "expand_ratios": [1, 6],
        "image_size": IMAGE_SIZE,
    },
}
TINY["hubert"] = TINY["wav2vec2"]


def tiny(row: structure.Structure) -> dict:
    """A twin's size overrides: 2 layers (2 blocks, stages or MBConv blocks), width 32, keeping every structural key
    the row states (OPT-350m's narrower embedding, TinyLlama's grouped-query attention, Falcon's multi-query)."""
    if row.model_type == "opt":
        narrower = row.config.get("word_embed_proj_dim", WIDTH) < row.config.get("hidden_size", WIDTH)
        return TINY["opt"] | {"word_embed_proj_dim": WIDTH // 2 if narrower else WIDTH}
    sizes = TINY.get(row.model_type, TEXT)
    if "num_key_value_heads" in row.config:  # fewer key/value heads than heads where the row has fewer
        grouped = row.config["num_key_value_heads"] < row.config.get("num_attention_heads", HEADS)
        sizes = sizes | {"num_key_value_heads": 2 if grouped else HEADS}
    return sizes


def build(row: structure.Structure, seed: int):
    """The twin's model with random weights of `seed`, as the extraction loads it (its class), or with its own
    language-model head where the extraction loads the encoder alone (T5, Whisper: their published checkpoints hold
    both halves)."""
    from transformers import T5ForConditionalGeneration, WhisperForConditionalGeneration

    config = structure.transformers_config(row, **tiny(row), **_vocabulary(row))
    whole = {"t5": T5ForConditionalGeneration, "whisper": WhisperForConditionalGeneration}.get(row.model_type)
    torch.manual_seed(seed)
    if whole is not None:
        return whole(config)
    architecture, _, _ = model_class(config, *row.kind)
    return architecture.from_config(config)


def _vocabulary(row: structure.Structure) -> dict:
    """The twin tokenizer's vocab_size, and the published special-token ids (GPT-2's 50256) that fall outside it
    moved to its last token; nothing for a model without a tokenizer of its own vocabulary."""
    if row.preprocessor not in TOKENIZERS:
        return {}
    size = len(preprocessor(row))
    published = structure.transformers_config(row)
    moved = {
        name: size - 1
        for name in SPECIAL_IDS
        if isinstance(getattr(published, name, None), int) and getattr(published, name) >= size
    }
    return {"vocab_size": size} | moved


def preprocessor(row: structure.Structure):
    """The twin's tokenizer, image processor or feature extractor: the row's kind, tiny."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    kind = row.preprocessor
    if kind in BYTE_LEVEL_BPE or kind in SERIALISED_BPE:
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.train_from_iterator(
            [TRAINING_TEXT],
            trainers.BpeTrainer(
                vocab_size=320,
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                special_tokens=["<|endoftext|>"],
                show_progress=False,
            ),
        )
        if kind in SERIALISED_BPE:
            return transformers.PreTrainedTokenizerFast(
                tokenizer_object=bpe, eos_token="<|endoftext|>", unk_token="<|endoftext|>"
            )
        merges = [tuple(merge) for merge in json.loads(bpe.to_str())["model"]["merges"]]
        return getattr(transformers, BYTE_LEVEL_BPE[kind])(vocab=bpe.get_vocab(), merges=merges)
    characters = sorted(set(TRAINING_TEXT.lower() if kind == "BertTokenizer" else TRAINING_TEXT) - {" "})
    if kind == "BertTokenizer":
        pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters, *(f"##{c}" for c in characters)]
        return transformers.BertTokenizer(vocab={piece: index for index, piece in enumerate(pieces)})
    if kind in UNIGRAM:
        specials = (
            ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"] if kind == "AlbertTokenizer" else ["<pad>", "</s>", "<unk>"]
        )
        pieces = [*((piece, 0.0) for piece in specials), ("▁", -1.0), *((c, -2.0) for c in characters)]
        return getattr(transformers, kind)(vocab=pieces)
    if kind in ("CanineTokenizer", "ByT5Tokenizer", "Wav2Vec2FeatureExtractor"):
        return getattr(transformers, kind)()
    if kind == "WhisperFeatureExtractor":
        return transformers.WhisperFeatureExtractor(feature_size=80)
    square = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    sizes = {
        "ViTImageProcessor": {"size": square},
        "BeitImageProcessor": {"size": square, "crop_size": square},
        "DeiTImageProcessor": {"size": {"height": 36, "width": 36}, "crop_size": square},
        "ConvNextImageProcessor": {"size": {"shortest_edge": IMAGE_SIZE}},
        "SegformerImageProcessor": {"size": square},
        "EfficientNetImageProcessor": {"size": square},
    }
    if kind not in sizes:
        raise ValueError(f"{row.hub_id}: no twin for preprocessor {kind!r}: add it to rehearsal/twins.py")
    return getattr(transformers, kind)(**sizes[kind])


def weight_files(state: dict[str, torch.Tensor], names: tuple[str, ...]) -> dict[str, bytes]:
    """A state dict as the row's weight files: every format it names (`.safetensors`, `.bin`), cut into as many
    shards as it names of each, with the index transformers reads for shards."""
    from safetensors.torch import save

    tensors = {key: tensor.detach().contiguous().clone() for key, tensor in state.items()}  # no shared storage
    files = {}
    for suffix, index_name in (
        (".safetensors", "model.safetensors.index.json"),
        (".bin", "pytorch_model.bin.index.json"),
    ):
        shards = [name for name in names if name.endswith(suffix)]
        keys = sorted(tensors)
        for number, shard in enumerate(shards):
            part = {key: tensors[key] for key in keys[number :: len(shards)]}
            if suffix == ".bin":
                buffer = io.BytesIO()
                torch.save(part, buffer)
                files[shard] = buffer.getvalue()
            else:
                files[shard] = save(part, metadata={"format": "pt"})
        if len(shards) > 1:
            weight_map = {key: shards[index % len(shards)] for index, key in enumerate(keys)}
            total = sum(tensor.numel() * tensor.element_size() for tensor in tensors.values())
            files[index_name] = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()
    return files


def branch_files(row: structure.Structure, revision: str) -> dict[str, bytes]:
    """One branch of the twin's repository: config.json, weights of the branch's own seed, and the preprocessor's
    files where the real repository holds them (Bloom's intermediate branches do not; a tokenizer repository holds
    its tokenizer and config only)."""
    seed = int(hashlib.sha256(f"{row.hub_id}@{revision}".encode()).hexdigest()[:8], 16)
    files = {}
    with tempfile.TemporaryDirectory() as folder:
        model = build(row, seed)
        model.config.save_pretrained(folder)
        if row.preprocessor_repo == row.hub_id:
            preprocessor(row).save_pretrained(folder)
        files |= {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir()) if path.is_file()}
    if row.role != "tokenizer":
        files |= weight_files(model.state_dict(), row.weight_files)
    return files


def publish(root: Path, rows: list[structure.Structure] | None = None) -> list[str]:
    """Every row's twin (or those of `rows`) on each of its revisions, into the hub folder `root`; returns the
    repositories written."""
    rows = list(structure.table().values()) if rows is None else rows
    for row in rows:
        for revision in row.revisions:
            add_branch(root, row.hub_id, revision, branch_files(row, revision))
        if row.gated:
            (Path(root) / row.hub_id / "gated").touch()
    return [row.hub_id for row in rows]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shape_of_learning.rehearsal.twins", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("root", type=Path, help="the hub folder to write: <owner>/<name>/revisions/<branch>/")
    args = parser.parse_args(argv)
    print(f"{len(publish(args.root))} twin repositories in {args.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
