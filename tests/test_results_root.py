"""The results root (the config's `results`): every path under it in every process, and the record of which config
wrote it (experiment.results_root), without Snakemake. The real runs are in tests/test_guarantees.py."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shape_of_learning import RESULTS_VARIABLE, paths
from shape_of_learning.experiment import results_root
from shape_of_learning.experiment.config import ConfigError, load_config, shards_scratch, validate_config

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "presets" / "tiny.yaml"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}


def python(*args, env: dict = ENV) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True)


def overlay(tmp_path: Path, folder: str) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump({"results": folder}))
    return path


# --- every path under the root, in any process ---------------------------------------------------------------------


def test_paths_and_the_constants_computed_from_them_lie_under_the_exported_root():
    show = (
        "from shape_of_learning import paths; "
        "print(paths.SUMMARY, paths.REPORT, paths.log('tabulate_metrics'), paths.lock('m', 'c'), "
        "paths.RAJAEE_PILEHVAR_TABLES[0], paths.RAJAEE_PILEHVAR_REPORT, paths.RAJAEE_PILEHVAR_FIGURES[2][1], "
        "paths.WRITTEN_BY)"
    )
    assert python("-c", show, env={**ENV, RESULTS_VARIABLE: "runs/demo"}).stdout.split() == [
        "runs/demo/tables/summary.parquet",
        "runs/demo/report.html",
        "runs/demo/logs/tabulate_metrics.log",
        "runs/demo/lock/m/c.json",
        "runs/demo/tables/rajaee_pilehvar_table1.csv",
        "runs/demo/tables/rajaee_pilehvar_tables.html",
        "runs/demo/figures/rajaee_pilehvar_figure2.pdf",
        "runs/demo/.written-by.json",
    ]
    default = {key: value for key, value in ENV.items() if key != RESULTS_VARIABLE}
    assert python("-c", show, env=default).stdout.split() == [
        "results/tables/summary.parquet",
        "results/report.html",
        "logs/tabulate_metrics.log",
        "results/lock/m/c.json",
        "results/tables/rajaee_pilehvar_table1.csv",
        "results/tables/rajaee_pilehvar_tables.html",
        "results/figures/rajaee_pilehvar_figure2.pdf",
        "results/.written-by.json",
    ]


def test_export_sets_the_config_s_root_and_clears_a_stale_one(monkeypatch):
    monkeypatch.setenv(RESULTS_VARIABLE, "left-in-the-shell")
    results_root.export({"corpus": {}})  # no `results`: paths' default, whatever the shell holds
    assert RESULTS_VARIABLE not in os.environ
    monkeypatch.setattr(paths, "RESULTS", "elsewhere")  # as if this process had imported paths under that root
    results_root.export({"results": "elsewhere"})
    assert os.environ[RESULTS_VARIABLE] == "elsewhere"


def test_export_refuses_a_root_that_paths_was_imported_without(monkeypatch):
    monkeypatch.delenv(RESULTS_VARIABLE, raising=False)
    with pytest.raises(RuntimeError, match=r"imported \(results root results/\) before the config's root"):
        results_root.export({"results": "elsewhere"})  # paths is imported in this process, under the default root
    assert RESULTS_VARIABLE not in os.environ


@pytest.mark.parametrize("folder", ["/srv/results", "../results", "results/../x", ".", "results/", ""])
def test_a_results_folder_outside_the_working_directory_is_rejected_naming_it(folder):
    config = load_config(TINY)
    with pytest.raises(
        ConfigError,
        match=rf"config.results: {re.escape(repr(folder))} is not a folder inside the "
        r"working directory; give a relative path",
    ):
        validate_config({**config, "results": folder})


# --- a checkpoint's shards on a node's own scratch (the config's `scratch`) --------------------------------------


def test_shards_on_scratch_lie_in_a_folder_named_by_the_results_root_s_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the working directory: where Snakemake plans and its jobs run
    assert paths.shards("m", "c") == "results/embeddings/m/c"
    assert paths.shards("m", "c", scratch="/scratch") == f"/scratch{tmp_path}/results/embeddings/m/c"
    assert paths.shards(scratch="/") == f"{tmp_path}/results/embeddings/{{model}}/{{checkpoint}}"


def test_scratch_expands_variables_and_is_ignored_where_shards_are_kept(monkeypatch):
    monkeypatch.setenv("NODE_DISK", "/local/disk")
    config = validate_config(load_config(TINY))  # keeps its shards (extraction.keep_embeddings)
    assert shards_scratch({**config, "scratch": "$NODE_DISK/me/"}) is None
    config["extraction"]["keep_embeddings"] = False
    assert shards_scratch({**config, "scratch": "$NODE_DISK/me/"}) == "/local/disk/me"
    assert shards_scratch({**config, "scratch": "${NODE_DISK}"}) == "/local/disk"
    assert shards_scratch(config) is None  # no `scratch`: the results folder


@pytest.mark.parametrize(
    "folder, message",
    [
        ("scratch", r"config.scratch: 'scratch' is not an absolute path; give the node-local folder's absolute path"),
        ("$NO_SUCH_DISK/x", r"config.scratch: '\$NO_SUCH_DISK/x' names NO_SUCH_DISK, not set in this environment"),
    ],
)
def test_a_scratch_that_is_no_node_folder_is_rejected_naming_it(folder, message):
    config = load_config(TINY)
    config["extraction"]["keep_embeddings"] = False
    with pytest.raises(ConfigError, match=message):
        validate_config({**config, "scratch": folder})


# --- the CLI reads the config's root -------------------------------------------------------------------------------


def test_the_path_command_gives_the_config_s_report(tmp_path):
    demo = str(REPO / "presets" / "demo.yaml")
    assert python("-m", "shape_of_learning", "path", "REPORT", demo).stdout == "results/report.html\n"
    assert (
        python("-m", "shape_of_learning", "path", "REPORT", demo, str(overlay(tmp_path, "results-demo"))).stdout
        == "results-demo/report.html\n"
    )
    wrong = python("-m", "shape_of_learning", "path", "REPROT", demo)
    assert wrong.returncode != 0
    assert "no path 'REPROT'; paths: CHECKPOINTS_TABLE, CLAIMS_REPORT, CLAIMS_TABLE, LOGS" in wrong.stderr


def test_verify_looks_for_the_run_under_the_config_s_root(tmp_path):
    done = python(
        "-m",
        "shape_of_learning",
        "verify",
        str(TINY),
        str(overlay(tmp_path, "elsewhere")),
        "--directory",
        str(tmp_path),
    )
    assert done.returncode == 1
    assert f"missing or empty {tmp_path}/elsewhere/tables/summary.csv" in done.stderr
    assert "/results/" not in done.stderr


# --- which config wrote the root -----------------------------------------------------------------------------------


def test_a_config_is_named_by_its_base_file_relative_to_the_workflow():
    assert results_root.config_name([REPO / "presets/demo.yaml", REPO / "presets/ci.yaml"], REPO) == "presets/demo.yaml"
    assert results_root.config_name([REPO / "presets" / ".." / "config.yaml"], REPO) == "config.yaml"
    assert results_root.config_name([Path("/srv/my.yaml")], REPO) == "/srv/my.yaml"  # outside the workflow: absolute


def test_the_first_run_claims_a_root_and_the_same_config_passes_again(tmp_path):
    marker = tmp_path / "results" / ".written-by.json"
    results_root.check(marker, "presets/demo.yaml")  # no record: nothing to refuse
    results_root.claim(marker, "presets/demo.yaml")
    written = json.loads(marker.read_text())
    assert written["config"] == "presets/demo.yaml" and re.fullmatch(
        r"\d{4}-\d\d-\d\dT[\d:]{8}[+-][\d:]{5}", written["since"]
    )
    results_root.check(marker, "presets/demo.yaml")
    results_root.claim(marker, "presets/demo.yaml")
    assert json.loads(marker.read_text()) == written  # claimed once: the time of the first run stays
    assert [path.name for path in marker.parent.iterdir()] == [".written-by.json"]  # no temporary file left


def test_another_config_is_refused_naming_both_and_the_ways_out(tmp_path):
    marker = tmp_path / "results" / ".written-by.json"
    results_root.claim(marker, "presets/demo.yaml")
    (marker.parent / "tables").mkdir()
    before = {path: path.read_bytes() for path in marker.parent.rglob("*") if path.is_file()}
    with pytest.raises(results_root.ForeignRootError) as refused:
        results_root.check(marker, "config.yaml")
    message = str(refused.value)
    assert message.startswith(f"{tmp_path}/results/ holds the results of presets/demo.yaml (since ")
    assert "not of config.yaml, which this run reads" in message
    assert (
        f"--config results={tmp_path}/results-config, or `results: {tmp_path}/results-config` in config.yaml" in message
    )
    assert f"delete {tmp_path}/results/ to start over" in message
    assert f"delete {marker} to adopt {tmp_path}/results/ for config.yaml" in message
    assert {path: path.read_bytes() for path in marker.parent.rglob("*") if path.is_file()} == before


def test_a_root_from_before_the_record_is_adopted(tmp_path):
    marker = tmp_path / "results" / ".written-by.json"
    (marker.parent / "tables").mkdir(parents=True)
    (marker.parent / "tables" / "summary.csv").write_text("model\n")
    results_root.check(marker, "config.yaml")
    results_root.claim(marker, "config.yaml")
    assert json.loads(marker.read_text())["config"] == "config.yaml"


@pytest.mark.parametrize("content", ['{"conf', "[]", '{"since": "today"}', '{"config": 3}'])
def test_an_unreadable_record_is_named_with_the_fix(tmp_path, content):
    marker = tmp_path / ".written-by.json"
    marker.write_text(content)
    refused = rf"{re.escape(str(marker))} does not say which config wrote {re.escape(str(tmp_path))}/: delete it"
    with pytest.raises(results_root.ForeignRootError, match=refused):
        results_root.check(marker, "config.yaml")
    assert marker.read_text() == content


def test_a_root_holding_an_output_under_a_retired_name_is_refused_with_the_fix_in_one_line(tmp_path, monkeypatch):
    marker = tmp_path / "results" / ".written-by.json"
    results_root.claim(marker, "config.yaml")
    monkeypatch.setattr(results_root, "RETIRED", {"figures/old_kind*.png": "delete results/figures/old_kind*"})
    results_root.check(marker, "config.yaml")  # nothing under the old name
    (marker.parent / "figures").mkdir()
    (marker.parent / "figures" / "old_kind_avg_cosine.png").write_bytes(b"")
    with pytest.raises(results_root.RetiredOutputError) as refused:
        results_root.check(marker, "config.yaml")
    assert str(refused.value) == (
        f"{marker.parent}/figures/old_kind_avg_cosine.png was written by an earlier version "
        "under a name it no longer has: delete results/figures/old_kind*"
    )
    marker.unlink()  # a root without a record is refused too
    with pytest.raises(results_root.RetiredOutputError):
        results_root.check(marker, "config.yaml")
