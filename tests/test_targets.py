"""What a user can ask for and what a run says it could not make: named targets, the models each deliverable needs,
the targets a model that cannot be had drops, and the lines a run ends with. The real runs: tests/test_workflow.py."""

import os
import time
from pathlib import Path

import pytest

from shape_of_learning import paths
from shape_of_learning.experiment.config import load_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.experiment.outcome import drop_unavailable, failed_jobs, missing

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def paper():
    return plan(load_config(REPO / "config.yaml"))


def test_the_paper_s_figures_have_the_targets_the_config_names_and_each_needs_only_its_models(paper):
    targets = paper.named_targets()
    assert {
        "figure1",
        "figure2",
        "figure3",
        "figure4",
        "figure5",
        "godey",
        "rajaee_pilehvar",
        "tables",
        "loss_across_checkpoints",
        "claims",
    } == set(targets)
    assert targets["figure3"] == [
        "results/figures/profile_pythia-2.8b_anisotropy.png",
        "results/figures/profile_pythia-2.8b_anisotropy.pdf",
    ]
    deliverables = {d.name: d for d in paper.deliverables()}
    assert deliverables["profile_pythia-2.8b_anisotropy"].models == ("pythia-2.8b",)
    # the analysis needs each fine-tuned run's base as well as the run
    assert {"bert-base-uncased", "bert-base-uncased-stsb-seed0", "roberta-base"} <= set(
        deliverables["rajaee_pilehvar"].models
    )
    assert paper.needs(["roberta-base-stsb-seed2"]) == ("roberta-base", "roberta-base-stsb-seed2")
    assert set(paper.targets()) == {path for outputs in targets.values() for path in outputs}


def test_a_model_that_cannot_be_had_drops_exactly_what_needs_it(paper, capsys):
    drop_unavailable(paper, {"roberta-base": FileNotFoundError("its folder is gone")})
    targets = paper.named_targets()
    assert targets["rajaee_pilehvar"] == [] and targets["tables"] == [] and targets["godey"] == []
    assert targets["figure1"] == [] and targets["figure3"] and targets["figure5"]  # roberta-base is in Figure 1
    assert "results/figures/id_across_checkpoints.png" in paper.targets()
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "model 'roberta-base' cannot be had: its folder is gone; with --keep-going, the run leaves out "
        "anisotropy_by_layer, profile_by_modality, rajaee_pilehvar, tables"
    ]


def write_log(path: Path, *lines: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


def test_a_run_ends_naming_each_failed_job_and_each_missing_deliverable_with_what_blocked_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiment = plan(load_config(REPO / "presets/demo.yaml"))
    old = write_log(tmp_path / paths.log("pin_checkpoint", "demo-bert/step0"), "job failed: an earlier run's")
    os.utime(old, (time.time() - 100, time.time() - 100))
    started = time.time() - 10
    write_log(
        tmp_path / paths.log("train_model", "demo-pythia"), "Traceback ...", "ValueError: no", "job failed: no corpus"
    )
    write_log(tmp_path / paths.log("train_model", "demo-bert"), "trained")  # succeeded
    assert failed_jobs(started) == [(paths.log("train_model", "demo-pythia"), "no corpus")]
    figure = tmp_path / "results/figures/profile_demo-bert_anisotropy.png"  # made, its PDF too; none of the others
    figure.parent.mkdir(parents=True)
    figure.write_bytes(b"png")
    figure.with_suffix(".pdf").write_bytes(b"pdf")
    lines = missing(experiment, {str(figure.relative_to(tmp_path))}, {"loss_across_checkpoints"}, started)
    assert lines == [
        "failed: no corpus (log: logs/train_model/demo-pythia.log)",
        "not made: loss_across_checkpoints (results/figures/loss_demo-pythia.png): demo-pythia: no corpus "
        "(log: logs/train_model/demo-pythia.log)",
        "not made: loss_across_checkpoints (results/figures/loss_demo-bert.png): a job it needs failed or did not run "
        "(see above)",
    ]
    assert missing(experiment, {str(figure.relative_to(tmp_path))}, set(), started) == lines[:1]  # it was made
    figure.with_suffix(".pdf").unlink()
    assert missing(experiment, {str(figure.relative_to(tmp_path))}, set(), started)[1:] == [
        "not made: figure3 (results/figures/profile_demo-bert_anisotropy.png): a job it needs "
        "failed or did not run (see above)"
    ]
    # a figure left by an earlier run is not made by this one when one of its models failed here
    lines = missing(experiment, set(), {"godey"}, started)
    assert lines[1:] == [
        "not made: godey (results/figures/profile_by_modality.png): demo-pythia: no corpus "
        "(log: logs/train_model/demo-pythia.log)"
    ]
