"""The paper's run checked before it starts (experiment.preflight): local data that is missing is named with where to
get it and how to run without it, a dry run says so and plans the whole run, a real run refuses before anything is
written; a wrong `layers:` fails the dry run naming the right value; `verify` refuses another config's folder;
modalities can be left out; downloads wait in lanes."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from shape_of_learning.__main__ import main
from shape_of_learning.experiment.config import load_config, validate_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.experiment.preflight import config_depth, layer_problems, missing_data
from workflow_runs import run_snakemake

REPO = Path(__file__).resolve().parents[1]
IMAGENET = "data/imagenet/ILSVRC2012_img_val.tar"
GUARD = Path(__file__).parent / "network_guard"  # a sitecustomize: connections other than loopback fail


@pytest.fixture
def paper(tmp_path, monkeypatch):
    """The paper's config, in an empty working directory: neither corpus is there."""
    monkeypatch.chdir(tmp_path)
    return load_config(REPO / "config.yaml")


def image_models(config: dict) -> tuple[str, ...]:
    return tuple(name for name, entry in config["models"].items() if entry["modality"] == "image")


def test_each_missing_corpus_is_named_with_where_to_get_it_and_how_to_run_without_it(paper):
    found = {data.key: data for data in missing_data(paper, plan(paper))}
    assert sorted(found) == ["audio_corpus.local_path", "image_corpus.local_path"]
    image = found["image_corpus.local_path"]
    assert image.line == (
        f"image_corpus.local_path: {IMAGENET} does not exist: the image corpus imagenet-val from "
        "https://image-net.org/download-images.php. Fix: point image_corpus.local_path at your copy "
        "(a folder or a .zip/.tar archive), or leave out the image and audio models: "
        "--config modalities=[text]"
    )
    assert image.models == image_models(paper) and "resnet-50" in image.models


def test_with_the_clips_there_only_the_images_are_missing_and_the_fix_keeps_the_audio(paper, tmp_path):
    (tmp_path / "data/common_voice_en/clips").mkdir(parents=True)
    [image] = missing_data(paper, plan(paper))
    assert image.key == "image_corpus.local_path" and image.line.endswith(
        "or leave out the image models: --config modalities=[text,audio]"
    )
    without_images = validate_config({**paper, "modalities": ["text", "audio"]})
    assert missing_data(without_images, plan(without_images)) == []  # the fix it names works


def test_a_corpus_already_sampled_needs_its_source_no_more(paper, tmp_path):
    for name, modality in (("imagenet-val", "image"), ("common-voice-en", "audio")):
        sampled = tmp_path / "results/corpus" / name / f"{modality}.parquet"
        sampled.parent.mkdir(parents=True)
        sampled.write_bytes(b"sampled")
    assert missing_data(paper, plan(paper)) == []


def test_a_missing_enwik8_copy_names_the_url_to_fall_back_on(paper, tmp_path):
    config = validate_config(
        {**paper, "corpus": {**paper["corpus"], "local_path": "enwik8.zip"}, "modalities": ["text"]}
    )
    [corpus] = missing_data(config, plan(config))
    assert corpus.line.startswith("corpus.local_path: enwik8.zip does not exist: the text corpus enwik8. Fix: ")
    assert corpus.line.endswith("or set it to null to download http://mattmahoney.net/dc/enwik8.zip (corpus.url)")


def test_leaving_a_modality_out_drops_its_models_from_the_plan_and_the_figures(paper):
    experiment = plan(validate_config({**paper, "modalities": ["text"]}))
    assert {entry["modality"] for entry in experiment.models.values()} == {"text"}
    godey = experiment.figure("profile_by_modality")
    assert "bert-base-uncased" in godey.models and "vit-base" not in godey.models and "whisper-base" not in godey.models
    assert not [model for model in experiment.baselines if model in image_models(paper)]
    assert {"figure1", "figure4", "godey", "claims"} <= set(experiment.named_targets())


def test_a_model_s_layers_are_checked_against_its_config_json():
    demo = load_config(REPO / "presets/demo.yaml")
    assert layer_problems(plan(demo)) == []
    demo["models"]["all-MiniLM-L6-v2"]["layers"] = 12
    [problem] = layer_problems(plan(demo))
    assert problem.startswith("model 'all-MiniLM-L6-v2': layers: 12 in the config, but its config.json (")
    assert problem.endswith("gives a depth of 6; set `layers: 6`")


@pytest.mark.parametrize(
    "values, depth",
    [
        ({"model_type": "gpt2", "n_layer": 12}, 12),  # GPT-2 stores its block count as n_layer
        ({"model_type": "t5", "num_layers": 12, "num_decoder_layers": 12}, 12),
        ({"model_type": "canine", "num_hidden_layers": 12}, 16),  # the families' own depths (families.depth)
        ({"model_type": "resnet", "depths": [3, 4, 6, 3]}, 4),
        ({"model_type": "bert"}, None),  # left to BertConfig's default: not read here
        ({"model_type": "odd", "n_layer": 4, "num_layers": 6}, None),  # two counts: ambiguous
    ],
)
def test_a_config_json_gives_the_depth_extraction_will_find_or_nothing(tmp_path, values, depth):
    file = tmp_path / "config.json"
    file.write_text(json.dumps(values))
    assert config_depth(file) == depth


def test_a_hub_model_is_checked_at_its_pinned_commit_or_offline_at_its_cached_branch(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from hf_cache import add_revision

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    commit = add_revision(
        tmp_path / "cache", "acme/gpt", "main", {"config.json": b'{"model_type": "gpt2", "n_layer": 6}'}
    )
    config = validate_config(
        {
            "corpus": {"name": "c", "gensim_sample": True},
            "figures": {},
            "models": {"gpt": {"hub_id": "acme/gpt", "kind": "decoder", "layers": 12}},
        }
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # the pin job would pin from the cache: its ref holds
    [problem] = layer_problems(plan(config))
    assert problem.endswith("gives a depth of 6; set `layers: 6`")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the branch may have moved since the cache saw it
    assert layer_problems(plan(config)) == []
    lock = tmp_path / "results/lock/gpt/main.json"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"commit_sha": commit}))
    [problem] = layer_problems(plan(config))  # the pinned commit is what the run loads
    assert (
        f"config.json ({tmp_path / 'cache'}/models--acme--gpt/snapshots/{commit}/config.json, at the commit " in problem
    )
    assert "results/lock/gpt/main.json pins) gives a depth of 6; set `layers: 6`. If upstream has fixed" in problem
    assert problem.endswith("renew its locks: `python -m shape_of_learning renew CONFIG --model gpt`")


def test_the_dry_run_says_how_each_model_s_branches_were_checked_offline(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from hf_cache import add_revision
    from shape_of_learning.models.revisions import branch_check_lines, branch_checks

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    (tmp_path / "saved/main").mkdir(parents=True)
    hub = {"kind": "decoder", "layers": 2, "checkpoints": ["step1", "step2"]}
    config = validate_config(
        {
            "corpus": {"name": "c", "gensim_sample": True},
            "figures": {},
            "models": {
                "pinned": {"hub_id": "acme/pinned", **hub},
                "recorded": {"hub_id": "acme/recorded", **hub},
                "cached": {"hub_id": "acme/cached", **hub},
                "unknown": {"hub_id": "acme/unknown", **hub},
                "local": {"path": "saved", "kind": "decoder", "layers": 2},
            },
        }
    )
    for model, checkpoint, refs in (("pinned", "step1", None), ("pinned", "step2", None), ("recorded", "step1", ["x"])):
        lock = tmp_path / f"results/lock/{model}/{checkpoint}.json"
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(json.dumps({"location": f"acme/{model}", "repository_refs": refs}))
    add_revision(tmp_path / "cache", "acme/cached", "step1", {"config.json": b"{}"})
    experiment = plan(config)
    online = branch_checks(experiment.checkpoints, experiment.models)
    assert online == {
        "pinned": "pinned",
        "recorded": "lock refs",
        "cached": "not checked",  # online, the cache's refs are not what the pin job reads
        "unknown": "not checked",
        "local": "directories",
    }
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert branch_checks(experiment.checkpoints, experiment.models)["cached"] == "cache"
    assert branch_check_lines(online) == [
        "Branches of 1 model pinned already (each has a lock): pinned",
        "Branches of 1 model checked against the refs an earlier pin read on the Hub (a branch published since is not "
        "known): recorded",
        "Branches of 1 model checked: their checkpoint directories exist: local",
        "Branches of 2 models not checked here: nothing is known offline, their pin jobs check them on the Hub: "
        "cached, unknown",
    ]


def test_downloads_wait_in_lanes_of_models_the_same_deliverables_need(paper):
    experiment = plan(paper)
    lanes = {ckpt.model: index for index, lane in enumerate(experiment.download_lanes()) for ckpt in lane}
    assert lanes["opt-13b"] == lanes["llama-2-13b"] == lanes["falcon-7b"]  # Figure 1's alone: one lane
    assert lanes["pythia-2.8b"] != lanes["pythia-1.4b"] != lanes["opt-13b"]  # each its own figures
    assert "bert-base-uncased-stsb-seed0" not in lanes  # trained here: nothing to download
    series = [ckpt.name for ckpt in experiment.checkpoints["pythia-2.8b"]]
    gates = experiment.download_gates(lambda ckpt: True)
    assert gates[("pythia-2.8b", series[2])].name == series[0] and ("pythia-2.8b", series[1]) not in gates
    done = set(series[:2])  # extracted already: no download waits for them, and they wait for none
    gates = experiment.download_gates(lambda ckpt: ckpt.model != "pythia-2.8b" or ckpt.name not in done)
    assert ("pythia-2.8b", series[3]) not in gates and gates[("pythia-2.8b", series[4])].name == series[2]


def test_rajaee_pilehvar_s_jobs_keep_the_weights_of_the_last_checkpoints_they_load(paper):
    experiment = plan(paper)
    last = experiment.last_checkpoint("bert-base-uncased").name
    assert experiment.read_after_extraction("bert-base-uncased", last) == [
        *(f"finetune_model bert-base-uncased-stsb-seed{seed}" for seed in (0, 1, 2)),
        "measure_isotropy_settings stsb/dev/bert-base-uncased",
    ]
    assert experiment.kept_weights() == {("bert-base-uncased", last), ("roberta-base", last)}
    series = experiment.checkpoints["pythia-160m"]
    assert not any(experiment.read_after_extraction("pythia-160m", ckpt.name) for ckpt in series)


def test_verify_refuses_a_folder_another_config_wrote(tmp_path, capsys):
    marker = tmp_path / "results/.written-by.json"
    marker.parent.mkdir()
    marker.write_text(json.dumps({"config": "presets/demo.yaml", "since": "2026-01-01T00:00:00+00:00"}))
    assert main(["verify", str(REPO / "config.yaml"), "--directory", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(
        f"{tmp_path}/results/ holds the results of presets/demo.yaml, not of "
        "config.yaml: verify it with `python -m shape_of_learning verify "
        "presets/demo.yaml`"
    )
    marker.write_text(json.dumps({"config": "config.yaml"}))
    assert main(["verify", str(REPO / "config.yaml"), "--directory", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "run incomplete"  # its own folder: checked, and incomplete


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_snakemake(workdir, *args, env=env)


@pytest.mark.slow
def test_without_the_imagenet_archive_a_dry_run_says_so_once_and_a_real_run_refuses_writing_nothing(tmp_path):
    (tmp_path / "data/common_voice_en/clips").mkdir(parents=True)
    dry = snakemake(tmp_path, "-n", "--quiet", "rules")
    assert dry.returncode == 0, dry.stderr[-3000:]
    said = [line for line in dry.stderr.splitlines() if "local_path" in line]
    assert len(said) == 1 and said[0].startswith(f"image_corpus.local_path: {IMAGENET} does not exist")
    assert "--config modalities=[text,audio]" in said[0] and "sample_media" in dry.stdout  # the whole run planned
    figure3_dry = snakemake(tmp_path, "figure3", "-n", "--quiet", "rules")
    assert figure3_dry.returncode == 0 and "local_path" not in figure3_dry.stderr  # it needs no image
    real = snakemake(tmp_path, "--cores", "1")
    assert real.returncode != 0 and f"image_corpus.local_path: {IMAGENET} does not exist" in real.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()  # the marker neither
    # a target that needs no image starts (its first job, enwik8's download, then meets no network)
    guarded = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(GUARD), os.environ.get("PYTHONPATH", "")]),
        "NETWORK_GUARD_LOG": str(tmp_path / "connections.jsonl"),
    }
    figure3 = snakemake(tmp_path, "figure3", "--cores", "1", "--until", "obtain_corpus", env=guarded)
    assert (tmp_path / "results/.written-by.json").is_file() and (tmp_path / "logs/obtain_corpus.log").is_file()
    assert "the run leaves out profile_by_modality, tables" in figure3.stderr  # said, not refused


@pytest.mark.slow
def test_a_wrong_layers_fails_the_demo_s_dry_run_naming_the_right_value(tmp_path):
    demo = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    demo["models"]["all-MiniLM-L6-v2"]["layers"] = 12
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(demo))
    dry = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "demo.yaml"))
    said = dry.stdout + dry.stderr  # Snakemake reports an error of the Snakefile's parse on stdout
    assert dry.returncode != 0 and "model 'all-MiniLM-L6-v2': layers: 12 in the config" in said
    assert "set `layers: 6`" in said
