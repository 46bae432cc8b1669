"""The real Snakemake DAG: schema validation, fan-out, adding a model, and an end-to-end run of the CI preset."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from shape_of_learning.experiment.config import load_config, validate_config
from shape_of_learning.experiment.dag import layers_in_group, plan
from shape_of_learning.experiment.verify import problems
from shape_of_learning.models.schedules import log_then_linear

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # Snakemake processes on the real DAG: `make check` dry-runs it itself
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def snakemake(*args, workdir: Path, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def planned_jobs(workdir: Path, *configfiles: Path) -> dict[str, int]:
    """Jobs per rule in a dry run (`snakemake -n --quiet rules`)."""
    out = snakemake("-n", "--quiet", "rules", "--configfile", *map(str, configfiles), workdir=workdir).stdout
    counts = {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)\s*$", out, flags=re.MULTILINE)}
    assert counts.pop("total") == sum(counts.values())
    return counts


def write_config(config: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# The fan-out the DAG must have, computed from the config's own quantities (models x checkpoints x layer groups),
# not by the planning code: a checkpoint is pinned and extracted once, its layer groups are measured once each.
def checkpoints_of(entry: dict) -> int:
    """How many checkpoints a model entry names, as the model schema describes them (schedules: the steps of
    log_then_linear, which test_schedules checks against the published Pythia list)."""
    spec = entry["train"]["steps"] if "train" in entry else entry.get("checkpoints")
    if spec is None or "finetune" in entry:
        return 1
    if isinstance(spec, list):
        return len(spec)
    return len(log_then_linear(**spec.get("schedule", spec)))


def has_step0(entry: dict) -> bool:
    """Whether a model entry names a step-0 checkpoint: a schedule starting at 0, a `step0` revision, or `step: 0`."""
    spec = entry["train"]["steps"] if "train" in entry else entry.get("checkpoints")
    if isinstance(spec, dict):
        return 0 in log_then_linear(**spec.get("schedule", spec))
    return any(item == "step0" or isinstance(item, dict) and item.get("step") == 0 for item in spec or [])


def expected_jobs(config: dict) -> dict[str, int]:
    models, figures, per_job = config["models"], config["figures"], config["metrics"]["layers_per_job"]
    seeds = len(config["finetuning"]["seeds"]) if "finetuning" in config else 0
    runs = {name: seeds if "finetune" in entry else 1 for name, entry in models.items()}  # a model per seed's run
    checkpoints = {name: checkpoints_of(entry) * runs[name] for name, entry in models.items()}
    # the modality figure's models without a step-0 checkpoint are measured once more, at random initialisation
    baselines = [name for name in figures.get("by_modality", {}).get("models", []) if not has_step0(models[name])]
    measured = checkpoints | {name: checkpoints[name] + 1 for name in baselines}
    jobs = {"pin_checkpoint": sum(checkpoints.values()), "pin_random_init": len(baselines),
            "extract_hidden_states": sum(measured.values()),
            "measure_layers": sum(count * math.ceil((models[name]["layers"] + 1) / per_job)
                                  for name, count in measured.items()),
            "assess_checkpoints": sum(runs.values()),  # one health table per model (per seed's run)
            "train_model": sum("train" in entry for entry in models.values()),
            "sample_media": sum(f"{modality}_corpus" in config for modality in ("image", "audio")),
            # one figure per kind, per item of a list (profile_across_checkpoints), per model of id_estimators and of
            # loss_across_checkpoints
            "plot_figure": sum(len(entry) if isinstance(entry, list) else
                               len(entry["models"]) if kind in ("id_estimators", "loss_across_checkpoints") else 1
                               for kind, entry in figures.items() if kind not in ("flagged", "layer_average"))}
    if "finetuning" in config:  # each dataset obtained once; each seed's run of each fine-tuned model; per split,
        section = config["finetuning"]  # each pair's pre-trained model and runs, and each model measured alone
        jobs |= {"obtain_rated_pairs": len(section["datasets"]),
                 "finetune_model": sum(runs[name] for name, entry in models.items() if "finetune" in entry),
                 "measure_isotropy_settings": len(section["evaluate"]) * (
                     len(section["pairs"]) * (1 + seeds) + len(section.get("sentence_tuned", [])))}
    return jobs


def assert_fan_out(config: dict, jobs: dict[str, int]) -> None:
    expected = expected_jobs(config)
    assert {rule: jobs.get(rule, 0) for rule in expected} == expected
    once = {rule: count for rule, count in jobs.items() if rule not in expected}
    assert set(once.values()) == {1}, once  # the corpus, the tables, the Rajaee & Pilehvar tables and figures, all


def test_dry_run_fans_out_one_extraction_per_checkpoint_and_one_metrics_job_per_layer_group(tmp_path):
    assert_fan_out(yaml.safe_load((REPO / "presets/demo.yaml").read_text()),
                   planned_jobs(tmp_path, REPO / "presets/demo.yaml"))


@pytest.mark.parametrize("layers_per_job", [1, 2])
def test_layers_per_job_batches_consecutive_layers_into_one_metrics_job(tmp_path, layers_per_job):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    config["metrics"]["layers_per_job"] = layers_per_job
    assert_fan_out(config, planned_jobs(tmp_path, write_config(config, tmp_path / "config.yaml")))
    groups = plan(validate_config(config)).layer_groups("all-MiniLM-L6-v2")
    assert groups == [str(i) for i in range(7)] if layers_per_job == 1 else ["0-1", "2-3", "4-5", "6"]
    assert [list(layers_in_group(g)) for g in ("0-2", "6")] == [[0, 1, 2], [6]]


def test_adding_a_model_entry_adds_exactly_its_jobs(tmp_path):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    before = planned_jobs(tmp_path, write_config(config, tmp_path / "before.yaml"))
    config["models"]["pythia-70m"] = {
        "hub_id": "EleutherAI/pythia-70m",
        "kind": "decoder",
        "layers": 6,
        "checkpoints": {"schedule": {"last": 143000, "every": 50000, "log_until": 4}, "revision": "step{step}"},
    }
    after = planned_jobs(tmp_path, write_config(config, tmp_path / "after.yaml"))
    checkpoints = len([0, 1, 2, 4, 50000, 100000, 143000])
    added = {rule: after[rule] - before.get(rule, 0) for rule in after}
    assert added["pin_checkpoint"] == added["extract_hidden_states"] == checkpoints
    assert added["measure_layers"] == checkpoints  # layers 0-6 in one job (the demo's layers_per_job: 8)
    assert added["all"] + added["tabulate_metrics"] == 0 and added["assess_checkpoints"] == 1
    assert sum(added.values()) == added["pin_checkpoint"] * 2 + added["measure_layers"] + 1


def test_paper_config_plans_every_figure_offline(tmp_path):
    jobs = planned_jobs(tmp_path, REPO / "config.yaml")
    assert_fan_out(yaml.safe_load((REPO / "config.yaml").read_text()), jobs)
    experiment = plan(load_config(REPO / "config.yaml"))
    # only branches that exist upstream (the published lists, written out here independently of the schedule code)
    published = {"pythia": {f"step{s}" for s in [0, *(2**i for i in range(10)), *range(1000, 143001, 1000)]},
                 "bloom-560m": {f"global_step{s}" for s in [1000, 10000, *range(100000, 600001, 100000)]},
                 "bloom-1b1": {f"global_step{s}" for s in [1000, 10000, *range(100000, 600001, 100000)]},
                 "bloom-1b7": {f"global_step{s}" for s in [1000, 10000, *range(50000, 300001, 50000)]},
                 "bloom-3b": {f"global_step{s}" for s in [1000, 10000, *range(50000, 300001, 50000)]}}
    for model, ckpts in experiment.checkpoints.items():
        family = next((f for f in published if model.startswith(f)), None)
        if family:
            assert {c.revision for c in ckpts} <= published[family], model
    early = {f"step{s}" for s in range(1000, 10001, 1000)}  # where Figure 4's intrinsic dimension rises
    assert early <= {c.revision for c in experiment.checkpoints["pythia-1.4b"]}
    assert experiment.models["pythia-2.8b"]["weights"] == "pytorch"  # its safetensors are main's (pythia#205)


def test_each_model_reads_the_corpus_of_its_modality(tmp_path):
    out = snakemake("-n", "--configfile", str(REPO / "config.yaml"), "--forcerun", "extract_hidden_states",
                    "results/manifests/canine-s/main.json", "results/manifests/resnet-50/main.json",
                    "results/manifests/whisper-base/main.json", workdir=tmp_path).stdout
    jobs = {re.search(r"output: .*results/manifests/([\w.-]+)/", job).group(1): job
            for job in out.split("rule extract_hidden_states:")[1:]}
    assert "results/corpus/enwik8/windows.parquet" in jobs["canine-s"]
    assert "results/corpus/imagenet-val/image.parquet" in jobs["resnet-50"]
    assert "results/corpus/common-voice-en/audio.parquet" in jobs["whisper-base"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["metrics"].update(batch_size=10), "10 is less than the minimum of 128"),
        (lambda c: c["models"]["demo-bert"].update(kind="decoder-only"), "decoder-only"),
        (lambda c: c["figures"]["id_estimators"].update(models=["no-such-model"]), "no-such-model"),
        (lambda c: c["models"]["demo-bert"].update(modality="audio"), "has no `audio_corpus`"),
        (lambda c: c["models"]["demo-bert"].update(modality="video"), "video"),
        (lambda c: c["finetuning"].update(evaluate=["wordsim353/test"]),
         "'wordsim353/test' is not a configured dataset split"),
        (lambda c: c["models"]["demo-bert-simlex"]["finetune"].update(learning_rate=0), "learning_rate"),
        (lambda c: c["finetuning"].update(kmeans="lloyd"), "'lloyd' is not allowed; allowed: reference, sklearn"),
        (lambda c: c["finetuning"].update(sentence_tuned=["no-such-model"]), "no-such-model"),
    ],
)
def test_a_bad_config_fails_before_any_job_with_a_message_naming_the_problem(tmp_path, edit, message):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    edit(config)
    # a real run, not a dry one: had the config been accepted, its first jobs would leave results/ and logs/ behind
    result = snakemake("--cores", "1", "--configfile", str(write_config(config, tmp_path / "bad.yaml")),
                       workdir=tmp_path, check=False)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_end_to_end_ci_preset_produces_every_figure_and_a_complete_table(tmp_path):
    configfiles = [str(REPO / "presets/demo.yaml"), str(REPO / "presets/ci.yaml")]  # ci.yaml overlays the demo
    snakemake("--cores", "2", "--configfile", *configfiles, workdir=tmp_path)
    config = load_config(*configfiles)
    assert problems(config, tmp_path) == []  # Tables 1-2 of Rajaee & Pilehvar included
    # one log per job that ran, where every job's log is named after its rule
    expected = expected_jobs(config)
    for rule in ("extract_hidden_states", "measure_layers"):
        assert len(list((tmp_path / "logs" / rule).rglob("*.log"))) == expected[rule], rule
    snakemake("--cores", "1", "--configfile", *configfiles, "--report", "results/report.html", workdir=tmp_path)
    report = (tmp_path / "results/report.html").read_text(errors="replace")
    assert "anisotropy_by_layer.png" in report and "by_modality.png" in report
    assert "rajaee_pilehvar_figure1.png" in report and "rajaee_pilehvar_tables.html" in report
    summary = pd.read_parquet(tmp_path / "results/tables/summary.parquet")
    cosine = summary[(summary["metric"] == "avg_cosine") & (summary["step"] == 40)].groupby("model")["mean"]
    assert set(cosine.groups) >= {"demo-vit", "demo-resnet"}  # the digit-trained ViT and CNN, measured end to end
    baselines = summary[summary["random_init"]]  # MiniLM's alone: the demo's trained models have a step0
    assert set(zip(baselines["model"], baselines["checkpoint"])) == {("all-MiniLM-L6-v2", "random-init")}
    assert json.loads((tmp_path / "results/manifests/all-MiniLM-L6-v2/random-init.json").read_text())["init_seed"] == 0
    manifest = json.loads((tmp_path / "results/manifests/demo-resnet/step40.json").read_text())
    assert manifest["modality"] == "image" and manifest["layers"] == 3 and manifest["tokens_per_layer"] == 1024
    assert set(summary["dtype"]) == {"float32"}  # on CPU, extraction.dtype auto runs float32
    table1 = pd.read_csv(tmp_path / "results/tables/rajaee_pilehvar_table1.csv")
    assert set(table1["dtype"]) == {"float32"} and set(table1["dropped_pairs"]) == {9}  # WordSim-353 less SimLex-999
    assert table1.groupby("model")["seeds"].first().to_dict() == {"demo-bert": 2, "demo-bert-simlex": 2,
                                                                   "all-MiniLM-L6-v2": 2}
