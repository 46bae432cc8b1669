"""The model facts' one command (models/facts.py): a row written from a config.json, read from a local folder, a cached
snapshot or the Hub (here a local one, through huggingface_hub), into a copy of the table; and the model it adds to
a copy of config.yaml priced by the dry run and rehearsed by a twin of its own.

The fixture tests/data/pythia-6.9b-deduped/ holds the files of EleutherAI/pythia-6.9b-deduped a row reads, without
its weights: its config.json (32 layers of width 4096, 32 heads, a vocabulary of 50432), its tokenizer_config.json
and a safetensors index naming its two shards.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from huggingface_hub import constants

from shape_of_learning.extraction.families import depth
from shape_of_learning.models import facts
from shape_of_learning.rehearsal import preset, structure, twins
from shape_of_learning.rehearsal.local_hub import LocalHub, add_branch

from hf_cache import add_revision, fresh_client, point_at
from workflow_runs import OFFLINE, run_snakemake

import shipped

FIXTURE = Path(__file__).parent / "data" / "pythia-6.9b-deduped"
HUB_ID, MODEL = "EleutherAI/pythia-6.9b-deduped", "pythia-6.9b-deduped"
ENTRY = {  # README's example entry
    "hub_id": HUB_ID,
    "kind": "decoder",
    "layers": 32,
    "checkpoints": {"schedule": {"last": 143000, "every": 10000, "log_until": 512}, "revision": "step{step}"},
}
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
# the Pythia paper's counts for 6.9B: every parameter, and those outside the two embedding tables
PARAMETERS, FORWARD_PARAMETERS = 6_857_302_016, 6_444_163_072


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user's copy of config.yaml with the new entry, and a copy of the model facts that the command writes into
    (SHAPE_OF_LEARNING_MODEL_FACTS): the repository's own table is left as it is."""
    paper = shipped.config()
    paper["models"][MODEL] = ENTRY
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(paper, sort_keys=False))
    shutil.copyfile(facts.TABLE, tmp_path / "facts.json")
    monkeypatch.setenv(facts.TABLE_VARIABLE, str(tmp_path / "facts.json"))
    return tmp_path


def add(user: Path, *args: str) -> int:
    return facts.main(["add", HUB_ID, "--configfile", str(user / "config.yaml"), *args])


def assert_pythia_row(row: dict) -> None:
    assert (row["role"], row["architecture"], row["preprocessor"]) == (
        "model",
        "GPTNeoXForCausalLM",
        "GPTNeoXTokenizer",
    )
    assert row["sizes"]["parameters"] == PARAMETERS and row["sizes"]["forward_parameters"] == FORWARD_PARAMETERS
    assert (row["sizes"]["hidden_size"], row["weights_dtype"], row["weight_files"]) == (4096, "float16", SHARDS)
    assert (row["revision_naming"], row["revisions"]) == (["step{N}"], ["step0", "step30000", "step143000"])
    assert row["config"]["model_type"] == "gpt_neox" and not {"architectures", "torch_dtype"} & set(row["config"])


def test_a_row_from_a_local_folder_goes_into_the_table_it_is_pointed_at(user):
    committed = facts.TABLE.read_bytes()
    assert add(user, "--from", str(FIXTURE)) == 0
    row = facts.table()[HUB_ID]
    assert_pythia_row(row)
    assert (row["layout_checked"], row["weights_checked"], row["gated"]) == ("no", "no", False)
    assert row["sizes"]["weight_bytes"] == 2 * PARAMETERS  # float16, the files not read
    assert facts.TABLE.read_bytes() == committed


def test_a_row_from_a_cached_snapshot_offline(user, monkeypatch):
    files = {name: (FIXTURE / name).read_bytes() for name in os.listdir(FIXTURE)}
    commit = add_revision(user / "cache", HUB_ID, "step143000", files)
    fresh_client(monkeypatch, user / "cache")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert add(user) == 0
    row = facts.table()[HUB_ID]
    assert_pythia_row(row)
    assert row["config_source"].startswith("the cache's snapshot") and row["config_source"].endswith(commit)


def test_a_row_from_the_hub_reads_its_file_tree(user, monkeypatch):
    files = {name: (FIXTURE / name).read_bytes() for name in os.listdir(FIXTURE)}
    files |= {SHARDS[0]: b"w" * 300, SHARDS[1]: b"w" * 200, "pytorch_model.bin": b"w" * 600, "tokenizer.json": b"{}"}
    files["tokenizer_config.json"] = json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}).encode()
    add_branch(user / "hub", HUB_ID, "step143000", files)
    fresh_client(monkeypatch, user / "cache")
    with LocalHub(user / "hub") as hub:
        point_at(hub.endpoint, monkeypatch)
        assert add(user) == 0
    row = facts.table()[HUB_ID]
    assert row["weight_files"] == [*SHARDS, "pytorch_model.bin"] and row["preprocessor_files"] == [
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert (row["layout_checked"], row["weights_checked"], row["sizes"]["weight_bytes"]) == ("files", "files", 500)
    assert row["preprocessor"] == "PreTrainedTokenizerFast"  # its tokenizer_config.json's, read on the Hub
    assert row["config_source"].startswith(f"{hub.endpoint}/{HUB_ID}/blob/")


def test_a_model_whose_tokenizer_lives_in_another_repository_takes_that_repositorys_class(user, capsys):
    config = yaml.safe_load((user / "config.yaml").read_text())
    config["models"]["tiny-bloom"] = {"hub_id": "acme/tiny-bloom", "kind": "decoder", "layers": 2}
    (user / "bloom").mkdir()
    (user / "bloom/config.json").write_text(
        json.dumps({"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_layer": 2, "n_head": 4})
    )
    (user / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    arguments = ["add", "acme/tiny-bloom", "--configfile", str(user / "config.yaml"), "--from", str(user / "bloom")]
    assert facts.main(arguments) == 2  # neither a tokenizer_config.json nor one transformers names for Bloom
    assert "transformers knows no preprocessor of model_type 'bloom'" in capsys.readouterr().err
    config["models"]["tiny-bloom"]["tokenizer"] = "bigscience/bloom-560m"  # as Bloom's intermediate series
    (user / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert facts.main(arguments) == 0
    row = facts.table()["acme/tiny-bloom"]
    assert (row["preprocessor"], row["preprocessor_repo"]) == ("BloomTokenizerFast", "bigscience/bloom-560m")


def test_bad_inputs_are_refused_naming_the_fix(user, tmp_path, capsys):
    assert facts.main(["add", "acme/unknown", "--configfile", str(user / "config.yaml")]) == 2
    assert "acme/unknown: no model of" in capsys.readouterr().err  # ... names it; add its entry under `models:` first
    assert add(user, "--from", str(tmp_path / "nowhere")) == 2
    assert "no config.json there; give a config.json or the folder holding one" in capsys.readouterr().err
    for change, message in [
        ({"architectures": None}, "no `architectures`: which class its checkpoint holds is not known"),
        ({"model_type": "mamba9"}, "model_type 'mamba9' is not one transformers"),
        ({"architectures": ["GPTNeoXForTelepathy"]}, "GPTNeoXForTelepathy: transformers"),
    ]:
        published = json.loads((FIXTURE / "config.json").read_text()) | change
        (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in published.items() if v is not None}))
        assert add(user, "--from", str(tmp_path / "config.json")) == 2
        assert message in capsys.readouterr().err
    assert facts.main(["add", HUB_ID, "--configfile", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: cannot be read" in capsys.readouterr().err
    assert HUB_ID not in facts.table()


def cost_row(output: str) -> str:
    """The dry run's cost table row of the added model."""
    return next(line for line in output.splitlines() if re.match(rf"{re.escape(MODEL)}\s+\d", line))


@pytest.mark.slow
def test_a_model_added_by_its_entry_and_the_one_command_is_priced_and_rehearsed(user):
    """README's steps for a model: its entry in (a copy of) config.yaml, then the one command; before the command the
    dry run names it with the command and prices it unknown, after it prices it, and the rehearsal's preset has a
    twin of it (sharded safetensors: a way of loading no other model of config.yaml has)."""
    env = OFFLINE | {facts.TABLE_VARIABLE: str(user / "facts.json"), "HF_HUB_CACHE": str(user / "empty-cache")}
    dry = ("-n", "--quiet", "rules", "--configfile", user / "config.yaml")
    before = run_snakemake(user, *dry, env=env, check=True)
    said = before.stdout + before.stderr
    command = f"python -m shape_of_learning.models.facts add {HUB_ID} --configfile {user / 'config.yaml'}"
    assert f"{MODEL}: no row in the model facts" in said and f"`{command}` adds it" in said
    assert "unknown" in cost_row(said)
    added = subprocess.run(
        [sys.executable, "-m", *command.split()[2:], "--from", str(FIXTURE)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    after = run_snakemake(user, *dry, env=env, check=True)
    said = after.stdout + after.stderr
    assert "no row in the model facts" not in said
    priced = cost_row(said)
    assert "unknown" not in priced and re.search(r"\b\d+\.\d GB\b", priced), priced
    config = yaml.safe_load((user / "config.yaml").read_text())
    twin = preset.rehearsal_config(config)["models"][MODEL]
    row, pythia = structure.table()[HUB_ID], structure.table()["EleutherAI/pythia-1b"]
    assert (row.loaded_as, row.features) == (pythia.loaded_as, pythia.features)  # loaded as Pythia's sizes are
    assert twin["checkpoints"] == list(row.revisions)
    assert twin["layers"] == depth(structure.transformers_config(row, **twins.tiny(row)))
    twins.publish(user / "hub", [row])
    branch = user / "hub" / HUB_ID / "revisions" / row.revisions[0]
    assert {path.name for path in branch.iterdir()} >= {*SHARDS, "model.safetensors.index.json", "config.json"}
