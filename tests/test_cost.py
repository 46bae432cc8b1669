"""The cost model (shape_of_learning.cost.device_time): a two-model run costed by hand with a round calibration, the
model facts behind a fresh clone's offline estimate, locks and local folders refining it, the wall time on N
devices, and the paper's dry run printing it."""

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from huggingface_hub import constants
from safetensors.numpy import save_file

from shape_of_learning.__main__ import main
from shape_of_learning.cost import device_time as cost
from shape_of_learning.cost import disk, model_sizes
from shape_of_learning.cost.calibration import CALIBRATIONS, Calibration, write_rate
from shape_of_learning.cost.model_sizes import ModelSize
from shape_of_learning.experiment.config import ConfigError, load_config, validate_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.models import facts

from hf_cache import add_revision
from workflow_runs import run_snakemake

import shipped

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"

# 2 x 1000 FLOPs a token at 1000 tokens/s: 2e6 FLOP/s; writes: 100 bytes a token in 1/500 - 1/1000 s: 1e5 bytes/s;
# a metrics batch of 4096 vectors: 1 s at width 100, 2 s at 300 (1.5 s at 200); a worker's start-up, 64 s, is 1 s a
# job on a workstation (64 jobs a worker), all of it each checkpoint's on a cluster
ROUND = Calibration(
    device="GPU",
    measured="by hand",
    forward_parameters=1000,
    bare_tokens_per_s={"float32": 1000},
    write_bytes_per_s=write_rate(100, (1000, 500)),
    load_bytes_per_s=1e6,
    worker_startup_s=64,
    extraction_job_s=9,
    metrics_job_s=4,
    metrics_batch_s={100: 1.0, 300: 2.0},
)
TABLE = {
    "org/a": ModelSize(parameters=3000, forward_parameters=2000, weight_bytes=4_000_000, hidden_size=200),
    "org/b": ModelSize(parameters=1000, forward_parameters=500, weight_bytes=1_000_000, hidden_size=100),
}


def two_models(**cost_settings) -> dict:
    """a: a decoder of 3 blocks, two checkpoints; b: an encoder of 1 block, one checkpoint and (Godey et al.'s
    figure) a random-init baseline. 2 x 2048 tokens a layer, float16 shards, 2 layers a metrics job."""
    return validate_config(
        {
            "corpus": {"name": "c"},
            "extraction": {"dtype": "float32"},
            "metrics": {"batch_size": 2048, "batches": 2, "layers_per_job": 2},
            "cost": {"calibration": "cpu", "download_mb_per_s": 2, **cost_settings},
            "figures": {"profile_by_modality": {"models": ["b"]}},
            "models": {
                "a": {"hub_id": "org/a", "kind": "decoder", "layers": 3, "checkpoints": ["step1", "step2"]},
                "b": {"hub_id": "org/b", "kind": "encoder", "layers": 1},
            },
        }
    )


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """An empty working directory and HF cache, the round calibration (as `cpu`) and the two models' table rows."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(CALIBRATIONS, "cpu", ROUND)  # a name the schema allows
    monkeypatch.setattr(model_sizes, "table", lambda: TABLE)
    return tmp_path


def estimate(config: dict, devices: int | None = None, cluster: bool = False) -> cost.Cost:
    experiment = plan(config)
    found = disk.volumes(
        experiment.checkpoints, experiment.models, experiment.tokens_per_layer, config["extraction"]["store_dtype"]
    )
    return cost.estimate(experiment, found, config, devices, cluster)


def test_two_models_cost_what_the_hand_computation_says(offline):
    a, b = estimate(two_models()).models
    tokens = 4096
    # a: 2 checkpoints of 4e6 bytes at 2e6 bytes/s and 1e6 bytes/s; 4 states of width 200; 2 metrics jobs each
    assert a.terms["downloading"].known == pytest.approx(2 * 4e6 / 2e6)
    assert a.terms["loading"].known == pytest.approx(2 * 4e6 / 1e6)
    assert a.terms["forward"].known == pytest.approx(2 * tokens * 2 * 2000 / 2e6)
    assert a.terms["writes"].known == pytest.approx(2 * tokens * 4 * 200 * 2 / 1e5)
    assert a.terms["metrics"].known == pytest.approx(2 * 4 * 2 * 1.5 * (2048 / 4096) ** 2)
    assert a.terms["start-up"].known == pytest.approx(2 * (9 + 1 + 2 * (4 + 1)))
    assert (a.extractions, a.metrics_jobs) == (2, 4)
    # b: its checkpoint and its baseline, which downloads and loads nothing; 2 states of width 100, one job each
    assert (b.extractions, b.metrics_jobs) == (2, 2)
    assert (b.terms["downloading"].known, b.terms["loading"].known) == pytest.approx((0.5, 1.0))
    assert b.terms["forward"].known == pytest.approx(2 * tokens * 2 * 500 / 2e6)
    assert b.terms["metrics"].known == pytest.approx(2 * 2 * 2 * 1.0 / 4)
    assert b.terms["start-up"].known == pytest.approx(2 * (9 + 1 + 4 + 1))
    # device time: every term but the download, which jobs of its own fetch beside the device's work
    assert a.total.known + b.total.known == pytest.approx(201.456 + 69.864)
    assert not (a.total.unknown or b.total.unknown)
    # GPU memory of a's extraction: float32 weights and one batch (8 x 512 tokens) of 4 kept states + 4 working
    assert a.gpu_memory == 4 * (3000 + 8 * 512 * 200 * (4 + 4))


def test_an_extraction_requests_its_model_its_shards_and_its_process_of_host_memory(offline):
    """The rule's mem_mb, a cluster's --mem: the model in its forward dtype (1.2x, what loading it peaks at), all of a
    checkpoint's shards at most, the process; a model whose size is known nowhere yet (one the pipeline trains)
    requests the process alone."""
    config = two_models()
    shards = 4096 * 4 * 200 * 2  # a: 4096 tokens a layer, 4 states of width 200, float16
    assert (
        cost.host_memory(TABLE["org/a"], config["models"]["a"], "float32", 4096, "float16")
        == cost.HOST_BASE_BYTES + 1.2 * 4 * 3000 + shards
    )
    assert (
        cost.host_memory(TABLE["org/a"], config["models"]["a"], "bfloat16", 4096, "float16")
        == cost.HOST_BASE_BYTES + 1.2 * 2 * 3000 + shards
    )
    assert cost.extraction_mem_mb("a", plan(config), config) == 4007  # 4e9 + 14,400 + 6,553,600 bytes, rounded up
    config["models"]["c"] = {**config["models"]["b"], "hub_id": "org/unlisted"}
    assert cost.extraction_mem_mb("c", plan(validate_config(config)), config) == cost.HOST_BASE_BYTES // 10**6


# the device seconds of each checkpoint's job: a's two, b's checkpoint, b's baseline (which loads nothing)
A_JOB, B_JOB, BASELINE_JOB = 201.456 / 2, (69.864 + 1) / 2, (69.864 - 1) / 2


def test_wall_time_on_n_devices_is_the_jobs_scheduled_behind_their_downloads(offline):
    """The downloads over the one link, lane by lane: a's first (2 s), b's (0.5 s), a's second (2 s); the baseline
    downloads nothing and starts at once. One device never rests; on two, b's and a's second job queue behind the
    baseline while a's first runs; on four, a's second job starts as its download ends."""
    run = estimate(two_models(gpus=2))
    assert run.total.known == pytest.approx(2 * A_JOB + B_JOB + BASELINE_JOB)
    assert run.wall(1).known == pytest.approx(run.total.known)
    assert run.wall(2).known == pytest.approx(BASELINE_JOB + B_JOB + A_JOB)
    assert run.wall(4).known == pytest.approx(2 + 0.5 + 2 + A_JOB)
    assert "wall time on 2 GPUs" in cost.summary(run, two_models(gpus=2))
    assert estimate(two_models(), devices=4).devices == 4


def test_each_download_of_a_lane_waits_for_the_job_two_places_before_it_with_eviction(offline):
    """a with four checkpoints on any number of devices: its third download starts when its first job ends, its
    fourth when its second's does (at 4.5 + A_JOB s, the link free since); without eviction they follow at once."""
    config = two_models()
    config["models"]["a"]["checkpoints"] = ["step1", "step2", "step3", "step4"]
    kept = estimate(validate_config(config))
    assert kept.wall(64).known == pytest.approx(4 * 2 + 0.5 + A_JOB)
    evicting = estimate(validate_config({**config, "extraction": {**config["extraction"], "evict_weights": True}}))
    assert evicting.wall(64).known == pytest.approx((2 + 0.5 + 2 + A_JOB) + 2 + A_JOB)


def test_a_cluster_job_asks_for_its_predicted_time_three_times_over_the_extraction_never_less_than_the_floor(
    offline, monkeypatch
):
    """a's extraction: loading 4 s, forward 8.192 s, writes 65.536 s, its 9 s and its group job's worker's start-up,
    64 s: 150.7 s, three times over: 8 min; a metrics job of 2 layers at 0.75 s each and its 4 s: 1 min, the floor not
    added again (its checkpoint's group job asks for the sum). A model of unknown size gets the floor for each job."""
    config = two_models()
    monkeypatch.setattr(cost, "RUNTIME_FLOOR_MIN", 1)
    assert cost.runtime_min("a", plan(config), config, "extraction") == 8
    assert cost.runtime_min("a", plan(config), config, "metrics") == 1
    monkeypatch.setattr(cost, "RUNTIME_FLOOR_MIN", 15)
    assert cost.runtime_min("a", plan(config), config, "extraction") == 15
    assert cost.runtime_min("a", plan(config), config, "metrics") == 1
    config["models"]["c"] = {**config["models"]["b"], "hub_id": "org/unlisted"}
    for job in ("extraction", "metrics"):
        assert cost.runtime_min("c", plan(validate_config(config)), config, job) == 15


def test_a_cluster_job_asks_its_node_for_the_disk_of_its_checkpoint_s_shards(offline, monkeypatch):
    """a's shards: 4096 tokens x 4 states x width 200 x 2 bytes = 6.5536 MB, 1.25 times over: 9 MB once the default
    floor is lowered; a model of unknown size gets the default."""
    config = two_models()
    monkeypatch.setattr(cost, "SCRATCH_DEFAULT_MB", 1)
    assert cost.scratch_mb("a", plan(config), config) == 9
    monkeypatch.setattr(cost, "SCRATCH_DEFAULT_MB", 4000)
    assert cost.scratch_mb("a", plan(config), config) == 4000
    config["models"]["c"] = {**config["models"]["b"], "hub_id": "org/unlisted"}
    monkeypatch.setattr(cost, "SCRATCH_DEFAULT_MB", 1)
    assert cost.scratch_mb("c", plan(validate_config(config)), config) == 1


def test_only_a_model_larger_than_the_ordinary_cards_asks_for_the_larger_ones(offline):
    """a's extraction in float32: 3000 parameters and 8 x 512 tokens x width 200 x (4 states + 4) = 6.5566e6 values,
    26.2 MB: above 0.02 GB, below 0.03 GB; nothing asked where no constraint is configured, or the size is unknown."""
    config = two_models()
    assert cost.large_gpu_constraint("a", plan(config), config) is None
    for gb, expected in ((0.03, None), (0.02, "gpu80")):
        config["large_gpu"] = {"gb": gb, "constraint": "gpu80"}
        assert cost.large_gpu_constraint("a", plan(config), config) == expected
    config["models"]["c"] = {**config["models"]["b"], "hub_id": "org/unlisted"}
    assert cost.large_gpu_constraint("c", plan(validate_config(config)), config) is None


def test_wall_time_is_never_below_the_download_over_the_configured_link(offline):
    """The download jobs fetch every checkpoint over one link while the devices work: at 0.01 MB/s, a's 8 MB and b's
    1 MB take 900 s, longer than any packing of the 271 s of device time; then a's second checkpoint's job runs."""
    run = estimate(two_models(gpus=2, download_mb_per_s=0.01))
    assert run.terms["downloading"].known == pytest.approx(9e6 / 1e4)
    assert run.total.known == pytest.approx(201.456 + 69.864)  # the device time does not include it
    assert run.wall(1).known == run.wall(64).known == pytest.approx(900 + A_JOB)


def test_on_a_cluster_each_checkpoint_s_job_waits_its_submission_before_it_asks_for_a_device(offline):
    """4 submissions (a's 2 checkpoints, b's and its baseline) at 100 s each: every job startable 100 s after its
    download, the devices free meanwhile: the workstation's schedule 100 s later, each job with a worker's start-up of
    its own (64 s, where a workstation's jobs pay 1 s each: a's 3 jobs 61 s more, b's 2 jobs 62 s). A workstation
    waits none."""
    total = 201.456 + 69.864 + 2 * 61 + 2 * 62
    run = estimate(two_models(gpus=2, submission_s=100), cluster=True)
    assert run.submissions == 4 and run.total.known == pytest.approx(total)
    assert run.wall(1).known == pytest.approx(100 + total)
    # the baseline and a's first job take the devices; b's follows the baseline, a's second a's first, which ends last
    assert run.wall(2).known == pytest.approx(2 + 100 + 2 * (A_JOB + 61))
    assert run.wall(64).known == pytest.approx(2 + 0.5 + 2 + 100 + A_JOB + 61)
    assert "on a cluster: 4 submissions, each 2 min before its job starts" in cost.summary(run, two_models())
    workstation = estimate(two_models(gpus=2, submission_s=100))
    assert workstation.wall(2).known == pytest.approx(BASELINE_JOB + B_JOB + A_JOB)
    assert "submissions" not in cost.summary(workstation, two_models())


def test_one_metrics_job_per_checkpoint_pays_each_start_up_once(offline):
    grouped, single = (
        estimate(validate_config({**two_models(), "metrics": {**two_models()["metrics"], "layers_per_job": per_job}}))
        for per_job in (1, "checkpoint")
    )
    assert [m.metrics_jobs for m in grouped.models] == [2 * 4, 2 * 2]
    assert [m.metrics_jobs for m in single.models] == [2, 2]
    assert grouped.terms["start-up"].known - single.terms["start-up"].known == pytest.approx((8 + 4 - 4) * (4 + 1))
    assert grouped.terms["metrics"] == single.terms["metrics"]


def test_locks_and_local_folders_refine_the_table_and_what_none_knows_stays_unknown(offline):
    lock = Path("results/lock/a/step1.json")
    lock.parent.mkdir(parents=True)
    lock.write_text(
        json.dumps(
            {
                "model": "a",
                "checkpoint": "step1",
                "commit_sha": "c" * 40,
                "source": "hub",
                "weights": {"model.safetensors": "1" * 64},
                "weight_bytes": {"model.safetensors": 2_000_000},
            }
        )
    )
    a = estimate(two_models()).models[0]
    assert a.download == disk.Bytes(2_000_000 + 4_000_000) and a.terms["downloading"].known == pytest.approx(3.0)
    # step2's weights in the HF cache already: their size is the files', and nothing is downloaded
    add_revision(offline / "cache", "org/a", "step2", {"model.safetensors": b"w" * 500_000})
    a = estimate(two_models()).models[0]
    assert a.download == disk.Bytes(2_000_000 + 500_000) and a.terms["downloading"].known == pytest.approx(1.0)
    assert a.terms["loading"].known == pytest.approx(2.5)
    # a model in no table, lock or cache: its download, loading and forward pass are unknown, not guessed
    config = two_models()
    config["models"]["c"] = {**config["models"]["b"], "hub_id": "org/unlisted"}
    c = estimate(validate_config(config)).models[-1]
    assert c.download == disk.Bytes(0, 1) and str(c.terms["forward"]) == "unknown"
    assert c.terms["start-up"].known == 10 + 5 and str(c.total).startswith("≥ ")
    # a local folder: parameters from its safetensors headers, less vocab_size x hidden size; bytes on disk; width
    folder = offline / "saved"
    folder.mkdir()
    save_file(
        {"embed.weight": np.zeros((10, 4), np.float32), "block.weight": np.zeros((4, 4), np.float32)},
        str(folder / "model.safetensors"),
    )
    (folder / "config.json").write_text(json.dumps({"vocab_size": 10, "hidden_size": 4}))
    assert model_sizes.local(folder) == ModelSize(56, 56 - 40, (folder / "model.safetensors").stat().st_size, 4)
    assert model_sizes.local(offline / "not-trained-yet") is None


def test_the_committed_sizes_are_what_the_rows_config_fields_give():
    """Every row's sizes rebuilt from its published config.json fields (models/facts.json, each with its source) on
    the meta device: T5, ByT5, Pythia, GPT-2, BERT and the rest (`python -m shape_of_learning.models.facts check`)."""
    assert facts.differing(facts.table()) == []


@pytest.mark.slow  # builds every row's model on the meta device: 5 s of `make check`'s budget
def test_a_config_field_that_changes_a_count_is_named_and_written_by_the_check(tmp_path, monkeypatch, capsys):
    rows = copy.deepcopy(facts.table())
    committed = rows["EleutherAI/pythia-70m"]["sizes"]
    rows["EleutherAI/pythia-70m"]["config"]["hidden_size"] = 1024
    monkeypatch.setenv(facts.TABLE_VARIABLE, str(tmp_path / "facts.json"))
    facts.write(rows)
    assert facts.main(["check"]) == 1
    assert "the sizes of EleutherAI/pythia-70m differ from their config fields" in capsys.readouterr().err
    assert facts.main(["check", "--write"]) == 0 and facts.main(["check"]) == 0
    wider = facts.table()["EleutherAI/pythia-70m"]["sizes"]
    assert wider["parameters"] > committed["parameters"] and (wider["hidden_size"], committed["hidden_size"]) == (
        1024,
        512,
    )


def test_t5_and_albert_counts_by_hand():
    """T5's encoder: its 12 blocks and final norm, the tied embedding left out once; ALBERT's one layer counted at
    each of its 12 uses, beside its 128-to-768 mapping and embedding norm."""
    table, rows = model_sizes.table(), facts.table()
    t5 = rows["google-t5/t5-base"]["config"]
    d, ff = t5["d_model"], t5["d_ff"]
    assert table["google-t5/t5-base"].forward_parameters == 12 * (4 * d * d + 2 * d * ff + 2 * d) + d
    albert = rows["albert/albert-base-v2"]["config"]
    h, ff, e = albert["hidden_size"], albert["intermediate_size"], albert["embedding_size"]
    layer = 4 * (h * h + h) + 2 * h + (h * ff + ff) + (ff * h + h) + 2 * h
    assert table["albert/albert-base-v2"].forward_parameters == 12 * layer + (e * h + h) + 2 * e


def test_the_committed_sizes_price_every_shipped_hub_model_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    config = load_config(REPO / "config.yaml")  # with any model a user added: the shipped ones are checked
    rows = facts.table()
    hub = {entry["hub_id"] for name, entry in config["models"].items() if "hub_id" in entry and name in shipped.MODELS}
    assert hub <= set(rows), hub - set(rows)
    for hub_id, row in rows.items():  # bytes as parameters x bytes of the dtype, within the buffers a note names
        if "sizes" in row:
            itemsize = {"float32": 4, "float16": 2, "bfloat16": 2}[row["weights_dtype"]]
            assert 0.95 < row["sizes"]["weight_bytes"] / (row["sizes"]["parameters"] * itemsize) < 1.2, hub_id
            assert row["weights_source"].startswith("https://huggingface.co/"), hub_id
    run = estimate(config)
    models = [m for m in run.models if m.model.split("-seed")[0] in shipped.MODELS]
    assert models and not any(m.total.unknown for m in models)  # every term known on a fresh clone, offline
    # the paper's download: each hub checkpoint at its model's row (its own repository's, for TinyLlama's)
    downloads = sum(
        rows[entry["hub_id"]]["sizes"]["weight_bytes"] * len(plan(config).checkpoints[name])
        for name, entry in plan(config).models.items()
        if "hub_id" in entry and name in shipped.MODELS
    )
    assert sum(m.download.known for m in models) == downloads


def test_the_cost_command_and_the_config_settings(tmp_path, capsys):
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["cost", str(path), "--gpus", "3", "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all-MiniLM-L6-v2" in out and "core-hours on one core" in out and "wall time on 3 cores" in out
    with pytest.raises(SystemExit):
        main(["cost", str(path), "--gpus", "0"])
    assert "give at least 1 device" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="cost.calibration: 'a100' is not allowed; allowed: h200, cpu"):
        validate_config({**config, "cost": {"calibration": "a100"}})
    with pytest.raises(ConfigError, match="metrics.layers_per_job"):
        validate_config({**config, "metrics": {**config["metrics"], "layers_per_job": "all"}})


def test_the_calibrations_rates_come_from_their_measurements():
    h200 = CALIBRATIONS["h200"]
    assert h200.flops("bfloat16") == 2 * 302_311_424 * 196_642 and h200.flops("float16") == h200.flops("bfloat16")
    assert ROUND.write_bytes_per_s == pytest.approx(1e5) and ROUND.flops("bfloat16") == ROUND.flops("float32") == 2e6
    # docs/benchmarks.md's H200 extraction: bf16 22,440 and fp32 18,526 tokens/s against 196,642 and 59,377 bare
    per_token = [1 / 22_440 - 1 / 196_642, 1 / 18_526 - 1 / 59_377]
    assert h200.write_bytes_per_s == pytest.approx(np.mean([25 * 1024 * 2 / t for t in per_token]))
    assert 1.2e9 < h200.write_bytes_per_s < 1.5e9
    assert ROUND.metrics_layer_s(200, 4096, 5) == pytest.approx(5 * 1.5)
    assert ROUND.metrics_layer_s(10, 4096, 1) == pytest.approx(1.0)  # never below the fastest measured batch


@pytest.mark.slow
def test_the_paper_dry_run_prints_the_cost_offline_on_a_fresh_clone(tmp_path):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    dry = subprocess.run(
        [SNAKEMAKE, "--snakefile", REPO / "Snakefile", "--directory", tmp_path, "-n", "--quiet", "rules"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "pythia-2.8b " in dry.stderr and "GPU-hours on one GPU: " in dry.stderr
    [unchecked] = [line for line in dry.stderr.splitlines() if "not checked here" in line]  # a fresh clone knows none
    assert "their pin jobs check them on the Hub" in unchecked and "bloom-3b-intermediate" in unchecked
    lines = dry.stderr[dry.stderr.index("Cost of ") :].splitlines()
    assert "unknown" not in "\n".join(lines) and "≥" not in "\n".join(lines)
    assert len(lines) == 4 and "wall time on 1 GPU (cost.gpus" in lines[3]  # the summary comes last
    # one figure asked for: the cost of its extractions only, and a wall time no shorter than their download
    figure3 = subprocess.run(
        [SNAKEMAKE, "--snakefile", REPO / "Snakefile", "--directory", tmp_path, "-n", "figure3"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    pythia = len(plan(load_config(REPO / "config.yaml")).checkpoints["pythia-2.8b"])
    summary = figure3.stderr[figure3.stderr.index("Cost of ") :].splitlines()
    assert summary[0].startswith(f"Cost of {pythia} extractions and {pythia} metrics jobs") and len(summary) == 4
    download = re.search(r"download: [\d.]+ GB, (\d+) min at 100 MB/s", summary[1]).group(1)
    wall = re.search(r"wall time on 1 GPU \(cost.gpus, or --gpus N\): (\d+) min$", summary[3]).group(1)
    assert int(wall) >= int(download)


@pytest.mark.slow
def test_a_cluster_run_requests_each_checkpoint_the_memory_time_disk_and_gpu_of_its_model(tmp_path):
    """Through profiles/slurm, an extraction's --mem follows its model (`cost.extraction_mem_mb`): a 13B model's float32
    weights alone are 52 GB, more than any flat request for every extraction should be; so do its --time, its --tmp
    and its GPU type, and a failed or preempted job runs again (the profile's retries, requeue)."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    assert profile["retries"] >= 1 and profile["slurm-requeue"] is True
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    dry = subprocess.run(  # the larger cards' feature given as a user gives it, scratch repeated (docs/cluster.md)
        [SNAKEMAKE, "--profile", "profiles/slurm", "--directory", tmp_path, "-n", "--config", "scratch=/tmp"]
        + ["large_gpu={constraint: a100_80gb}", "scratch_request=True"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    requested = {}
    for job in (dry.stdout + dry.stderr).split("rule extract_hidden_states:")[1:]:
        model = re.search(r"wildcards: model=([^,\s]+)", job).group(1)
        requested[model] = int(re.search(r"resources: .*\bmem_mb=(\d+)", job).group(1))
    sizes = model_sizes.table()
    assert requested["llama-2-13b"] * 10**6 > 4 * sizes["meta-llama/Llama-2-13b-hf"].parameters
    assert requested["pythia-2.8b"] * 10**6 > 4 * sizes["EleutherAI/pythia-2.8b"].parameters
    assert requested["pythia-70m"] < requested["pythia-2.8b"] < requested["llama-2-13b"]
    # its time limit: the cost model's, not a flat one (at least cost.device_time.RUNTIME_FLOOR_MIN)
    limits = {
        int(re.search(r"resources: .*\bruntime=(\d+)", job).group(1))
        for job in (dry.stdout + dry.stderr).split("rule extract_hidden_states:")[1:]
    }
    assert limits and min(limits) >= cost.RUNTIME_FLOOR_MIN and 120 not in limits
    # its node's disk: its shards' on the node's scratch, the same request for its metrics (one group job)
    config, listing = load_config(REPO / "config.yaml"), dry.stdout + dry.stderr
    for rule in ("extract_hidden_states", "measure_layers"):
        tmp = {}
        for job in listing.split(f"rule {rule}:")[1:]:
            model = re.search(r"wildcards: model=([^,\s]+)", job).group(1)
            tmp[model] = int(re.search(r"resources: .*\bslurm_extra=--tmp=(\d+)M", job).group(1))
        assert tmp["llama-2-13b"] == cost.scratch_mb("llama-2-13b", plan(config), config) > 10_000
        assert tmp["pythia-70m"] == cost.SCRATCH_DEFAULT_MB < tmp["pythia-2.8b"] < tmp["llama-2-13b"]
    # without scratch_request (the profile's default), no --tmp: SLURM refuses one where the nodes' TmpDisk is unset
    plain = subprocess.run(
        [SNAKEMAKE, "--profile", "profiles/slurm", "--directory", tmp_path, "-n", "--config", "scratch=/tmp"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0 and "rule extract_hidden_states:" in plain.stdout + plain.stderr
    assert "--tmp=" not in plain.stdout + plain.stderr
    # the 80 GB cards for the 13B models, and for them only
    for rule in ("extract_hidden_states", "measure_layers"):
        large = {
            re.search(r"wildcards: model=([^,\s]+)", job).group(1)
            for job in listing.split(f"rule {rule}:")[1:]
            if "constraint=a100_80gb," in re.search(r"resources: .*", job).group(0)  # its own, the chunk's first
        }
        assert large == {"opt-13b", "llama-2-13b"}


@pytest.mark.slow
def test_a_cluster_run_whose_command_line_config_drops_the_scratch_is_refused_before_anything_is_written(tmp_path):
    """A --config on the command line replaces profiles/slurm's `config:`, its scratch with it: the run stops while
    Snakemake plans, naming the fix, and writes nothing (no SLURM daemon needed: nothing is submitted); its dry run
    refuses it the same way."""
    for dry in ([], ["-n"]):
        done = run_snakemake(
            tmp_path,
            "--profile",
            REPO / "profiles/slurm",
            "--configfile",
            REPO / "presets/demo.yaml",
            "--config",
            "results=results-elsewhere",
            *dry,
        )
        said = done.stdout + done.stderr
        assert done.returncode != 0, (dry, said[-3000:])
        assert "config.scratch is not set" in said and "add scratch=/tmp" in said
        assert not (tmp_path / "results-elsewhere").exists()
