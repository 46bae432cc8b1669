"""The real Snakemake DAG: schema validation, fan-out, adding a model, and an end-to-end run of the CI preset."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from shape_of_learning.experiment import layers_in_group, load_config, plan, validate_config
from shape_of_learning.finetuning import plan as finetuning_plan
from shape_of_learning.verify import problems

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # Snakemake processes on the real DAG: `make check` dry-runs it itself
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def snakemake(*args, workdir: Path, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def planned_jobs(configfile: Path, workdir: Path) -> dict[str, int]:
    """Jobs per rule in a dry run (`snakemake -n --quiet rules`)."""
    out = snakemake("-n", "--quiet", "rules", "--configfile", str(configfile), workdir=workdir).stdout
    counts = {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)\s*$", out, flags=re.MULTILINE)}
    assert counts.pop("total") == sum(counts.values())
    return counts


def write_config(config: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_dry_run_fans_out_one_extraction_per_checkpoint_and_one_metrics_job_per_layer_group(tmp_path):
    config = load_config(REPO / "presets/demo.yaml")
    experiment = plan(config)
    jobs = planned_jobs(REPO / "presets/demo.yaml", tmp_path)
    checkpoints = sum(len(ckpts) for ckpts in experiment.checkpoints.values())
    assert checkpoints == 9 + 9 + 1 + 2 + 2 + 1  # demo-pythia, demo-bert, MiniLM, demo-vit, demo-resnet, MiniLM
    # fine-tuned on SimLex-999
    assert jobs["extract_hidden_states"] == checkpoints
    assert jobs["pin_checkpoint"] == checkpoints
    # layers_per_job 3: demo-pythia and demo-bert 9 checkpoints x (0-2, 3-4); MiniLM and MiniLM fine-tuned (0-2, 3-5,
    # 6); demo-vit 2 checkpoints x (0-2, 3-4); demo-resnet 2 x (0-2, 3)
    assert jobs["measure_layers"] == 9 * 2 * 2 + 3 * 2 + 2 * 2 + 2 * 2
    assert jobs["train_model"] == 4
    assert jobs["sample_media"] == 1
    # Figure 1, Figures 2-3 for demo-pythia and demo-bert, Figure 4, Figure 5 for demo-pythia, the modality figure
    assert jobs["plot_figure"] == 1 + 2 + 1 + 1 + 1
    # Rajaee & Pilehvar: SimLex-999, Lee and WordSim-353 read once; one fine-tuning; pre-trained and fine-tuned
    # MiniLM analysed on Lee and on WordSim-353
    assert (jobs["obtain_rated_pairs"], jobs["finetune_model"], jobs["measure_isotropy_settings"]) == (3, 1, 2 * 2)


def test_layers_per_job_batches_consecutive_layers_into_one_metrics_job(tmp_path):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    config["metrics"]["layers_per_job"] = 2
    jobs = planned_jobs(write_config(config, tmp_path / "batched.yaml"), tmp_path)
    # demo-pythia and demo-bert: 9 checkpoints x layers 0-1, 2-3, 4; MiniLM and MiniLM fine-tuned: 0-1, 2-3, 4-5, 6;
    # demo-vit (0-1, 2-3, 4) and demo-resnet (0-1, 2-3): 2 checkpoints each
    assert jobs["measure_layers"] == 9 * 3 * 2 + 4 * 2 + 2 * 3 + 2 * 2
    assert plan(validate_config(config)).layer_groups("all-MiniLM-L6-v2") == ["0-1", "2-3", "4-5", "6"]
    config["metrics"]["layers_per_job"] = 1
    jobs = planned_jobs(write_config(config, tmp_path / "per_layer.yaml"), tmp_path)
    assert jobs["measure_layers"] == 9 * 5 * 2 + 7 * 2 + 2 * 5 + 2 * 4  # one job per hidden state
    assert [list(layers_in_group(g)) for g in ("0-2", "6")] == [[0, 1, 2], [6]]


def test_adding_a_model_entry_adds_exactly_its_jobs(tmp_path):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    before = planned_jobs(write_config(config, tmp_path / "before.yaml"), tmp_path)
    config["models"]["pythia-70m"] = {
        "hub_id": "EleutherAI/pythia-70m",
        "kind": "decoder",
        "layers": 6,
        "checkpoints": {"schedule": {"last": 143000, "every": 50000, "log_until": 4}, "revision": "step{step}"},
    }
    after = planned_jobs(write_config(config, tmp_path / "after.yaml"), tmp_path)
    checkpoints = len([0, 1, 2, 4, 50000, 100000, 143000])
    added = {rule: after[rule] - before.get(rule, 0) for rule in after}
    assert added["pin_checkpoint"] == added["extract_hidden_states"] == checkpoints
    assert added["measure_layers"] == checkpoints * 3  # layers 0-2, 3-5, 6 (the demo's layers_per_job: 3)
    assert added["all"] + added["tabulate_metrics"] == 0
    assert sum(added.values()) == added["pin_checkpoint"] * 2 + added["measure_layers"]


def test_paper_config_plans_every_figure_offline(tmp_path):
    jobs = planned_jobs(REPO / "config.yaml", tmp_path)
    experiment = plan(load_config(REPO / "config.yaml"))
    # by hand from config.yaml: 11 Pythia models x 35 steps and pythia-2.8b's 18 (from step 7000), 4 Bloom series x 8,
    # TinyLlama 7, OLMo 2, and 33 models of one checkpoint (16 pre-trained, 2 fine-tuned, 15 of Godey et al.)
    assert jobs["pin_checkpoint"] == jobs["extract_hidden_states"] == 11 * 35 + 18 + 4 * 8 + 7 + 2 + 33
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
    # Figure 1, Figures 2-3 for bloom-3b-intermediate and pythia-2.8b, Figure 4, Figure 5 for pythia-1.4b, by modality
    assert jobs["plot_figure"] == 1 + 2 + 1 + 1 + 1
    assert jobs["sample_media"] == 2  # the image and the audio corpus
    # Rajaee & Pilehvar: STS-B obtained once, BERT and RoBERTa fine-tuned, each pre-trained and fine-tuned analysed
    assert (jobs["obtain_rated_pairs"], jobs["finetune_model"], jobs["measure_isotropy_settings"]) == (1, 2, 4)
    assert jobs["tabulate_rajaee_pilehvar"] == jobs["plot_rajaee_pilehvar_figure1"] == jobs["plot_rajaee_pilehvar_figure2"] == 1


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
        (lambda c: c["finetuning"].update(evaluate=["lee/test"]), "'lee/test' is not a configured dataset split"),
        (lambda c: c["models"]["all-MiniLM-L6-v2-simlex"]["finetune"].update(learning_rate=0), "learning_rate"),
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
    assert problems(config, tmp_path) == []
    assert finetuning_plan.problems(config, tmp_path) == []  # Tables 1-2 complete and finite
    # one log per job, by hand: extractions 6 + 6 (demo-pythia, demo-bert: steps 0, 1, 2, 4, 20, 40) + 2 (MiniLM,
    # fine-tuned) + 2 + 2 (demo-vit, demo-resnet: steps 0, 40); metrics jobs of 2 layers: 12 x 3 + 2 x 4 + 2 x 3 + 2 x 2
    assert len(list((tmp_path / "logs/extract").rglob("*.log"))) == 18
    assert len(list((tmp_path / "logs/metrics").rglob("*.log"))) == 54
    snakemake("--cores", "1", "--configfile", *configfiles, "--report", "results/report.html", workdir=tmp_path)
    report = (tmp_path / "results/report.html").read_text(errors="replace")
    assert "anisotropy_by_layer.png" in report and "by_modality.png" in report
    assert "rajaee_pilehvar_figure1.png" in report and "rajaee_pilehvar_tables.html" in report
    summary = pd.read_parquet(tmp_path / "results/tables/summary.parquet")
    cosine = summary[(summary["metric"] == "avg_cosine") & (summary["step"] == 40)].groupby("model")["mean"]
    assert set(cosine.groups) >= {"demo-vit", "demo-resnet"}  # the digit-trained ViT and CNN, measured end to end
    manifest = json.loads((tmp_path / "results/manifests/demo-resnet/step40.json").read_text())
    assert manifest["modality"] == "image" and manifest["layers"] == 3 and manifest["tokens_per_layer"] == 1024
