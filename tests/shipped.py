"""The models config.yaml ships, pinned: the tests check the committed model facts (models/facts.json) and the
rehearsal against these models, not against a user's own additions to config.yaml. A model added there without its
row is the supported path (the dry run names the command that adds its row), and fails no test."""

import yaml

from shape_of_learning import DEFAULT_CONFIG, REPOSITORY

MODELS = (
    "bert-base-uncased",
    "roberta-base",
    "albert-base-v2",
    "gpt2",
    "opt-125m",
    "opt-350m",
    "opt-1.3b",
    "opt-2.7b",
    "opt-6.7b",
    "opt-13b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-7b-chat",
    "gpt-j-6b",
    "falcon-7b",
    "falcon-7b-instruct",
    "bert-base-uncased-stsb",
    "roberta-base-stsb",
    "pythia-70m",
    "pythia-160m",
    "pythia-410m",
    "pythia-1b",
    "pythia-1.4b",
    "pythia-2.8b",
    "pythia-70m-deduped",
    "pythia-160m-deduped",
    "pythia-410m-deduped",
    "pythia-1b-deduped",
    "pythia-1.4b-deduped",
    "pythia-2.8b-deduped",
    "bloom-560m-intermediate",
    "bloom-1b1-intermediate",
    "bloom-1b7-intermediate",
    "bloom-3b-intermediate",
    "tinyllama-1.1b",
    "olmo-1b",
    "t5-base",
    "canine-s",
    "canine-c",
    "byt5-small",
    "byt5-base",
    "wav2vec2-base",
    "hubert-base",
    "whisper-base",
    "vit-base",
    "deit-base",
    "beit-base",
    "cvt-13",
    "segformer-b0",
    "resnet-50",
    "efficientnet-b0",
    "convnext-tiny",
)


def config() -> dict:
    """config.yaml with the shipped models only: a model a user added there left out (a figure's name of it is left
    to the reader, as the rehearsal's preset leaves out names of models it does not keep)."""
    paper = yaml.safe_load((REPOSITORY / DEFAULT_CONFIG).read_text())
    if absent := [model for model in MODELS if model not in paper["models"]]:
        raise AssertionError(
            f"config.yaml has no entry for the shipped models {absent}: the tests check the model facts against "
            "them; restore their entries"
        )
    paper["models"] = {model: entry for model, entry in paper["models"].items() if model in MODELS}
    return paper


def models() -> dict[str, dict]:
    """The shipped models' entries, as config.yaml gives them."""
    return config()["models"]
