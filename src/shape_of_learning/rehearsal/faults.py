"""The rehearsal's upstream breaks (issue 58): three fault twins, a run of the workflow on them, and its judgement.

    python -m shape_of_learning.rehearsal --faults-only      # this phase alone (make rehearsal runs it last)

Each break is one way an upstream repository or a cache goes wrong, served by the local Hub beside the twins under
the owner OWNER, copies of two twins made again on every run (`publish`):

- block-missing: a Pythia twin whose config.json says one block more than its weights hold (its entry says the
  config's depth, so the preflight agrees). It must end in the extraction's failure naming the missing keys, with no
  manifest, shards or metrics made from the partial model;
- shard-missing: a Falcon twin (safetensors in 2 shards) without its last shard, its index kept. It must end in the
  pin's failure naming the shard: no lock written, no weight file downloaded, nothing extracted;
- blob-deleted: a Pythia twin whose weight file's blob is deleted from the cache as soon as its download job has
  written its receipt, before its extraction (`DeleteOnReceipt`). The run must fail in the extraction naming the
  receipt; a second run must recover by itself: download the file again and extract the checkpoint.

The phase writes its preset (`preset`: presets/rehearsal.yaml's settings, these models only, no figures), results root
and Hugging Face cache into one folder, emptied first, and runs Snakemake twice: every scenario's manifest with
--keep-going (each must fail as stated), then blob-deleted's alone (it must succeed). Each scenario's verdict is judged
from its job's log (the `job failed:` line, `logs.failure_message`) and the files it made or not.
"""

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

import yaml

from shape_of_learning import REPOSITORY, RESULTS_VARIABLE
from shape_of_learning.experiment import results_root
from shape_of_learning.logs import failure_message
from shape_of_learning.rehearsal import structure
from shape_of_learning.rehearsal.local_hub import LocalHub, add_branch

OWNER = "rehearsal-faults"
FOLDER = "faults"  # in the rehearsal's folder: the phase's preset, results root and cache
RESULTS = "results-faults"  # the phase's results root, in FOLDER
HF_HOME = "hf-home"
BRANCH = "main"  # each fault twin's one branch: its model's one checkpoint
PYTHIA = "EleutherAI/pythia-70m"  # gpt_neox, one model.safetensors (and its .bin)
FALCON = "tiiuae/falcon-7b"  # safetensors in 2 shards with their index
SHARD_INDEX = "model.safetensors.index.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin")
# Settings of presets/rehearsal.yaml the phase leaves out: its figures and analyses name the rehearsal's models
LEFT_OUT = ("models", "figures", "rajaee_pilehvar", "claims")
FIGURE_SETTINGS = ("flagged", "layer_average")  # figures' keys that are settings, not figures


@dataclass(frozen=True)
class Scenario:
    model: str  # its model in the phase's preset
    source: str  # the twin it is made from
    broken: str  # what is broken, as printed
    expected: str  # how it must end, as printed

    @property
    def repo(self) -> str:
        return f"{OWNER}/{self.model}"


BLOB_DELETED = Scenario(
    "blob-deleted",
    PYTHIA,
    "its weight file's blob deleted from the cache between download and extraction",
    "the extraction fails naming the receipt; a second run downloads again and extracts",
)
BLOCK_MISSING = Scenario(
    "block-missing",
    PYTHIA,
    "config.json says one block more than its weights hold",
    "the extraction fails naming the missing keys; nothing made from it",
)
SHARD_MISSING = Scenario(
    "shard-missing",
    FALCON,
    "its index lists a shard the Hub does not serve",
    "the pin fails naming the shard; no lock, nothing downloaded or extracted",
)
# In the preset's order: the models need the same deliverables, so their downloads share a lane, where the third
# waits for the first one's metrics (Experiment.download_gates); the first is the one whose download must run
SCENARIOS = (BLOB_DELETED, BLOCK_MISSING, SHARD_MISSING)


def source_branch(hub: Path, repo: str) -> Path:
    """The folder of a twin's last branch in the hub folder, the one a fault twin copies."""
    return Path(hub) / repo / "revisions" / structure.table()[repo].revisions[-1]


def fault_branch(hub: Path, scenario: Scenario) -> Path:
    return Path(hub) / scenario.repo / "revisions" / BRANCH


def missing_shards(branch: Path) -> list[str]:
    """The shards a branch's safetensors index lists that the branch does not hold."""
    index = json.loads((Path(branch) / SHARD_INDEX).read_text())
    return sorted(name for name in set(index["weight_map"].values()) if not (Path(branch) / name).is_file())


def missing_block(branch: Path) -> str:
    """What names the keys of the block a block-missing twin's weights lack: "layers.N." for its config's last."""
    return f"layers.{json.loads((Path(branch) / 'config.json').read_text())['num_hidden_layers'] - 1}."


def publish(hub: Path) -> list[str]:
    """The fault twins, into the hub folder `hub` that holds the twins of PYTHIA and FALCON; returns their
    repositories. A source that no longer has the layout a break needs is refused by name."""
    shutil.rmtree(Path(hub) / OWNER, ignore_errors=True)
    pythia = source_branch(hub, PYTHIA)
    files = {path.name: path for path in sorted(pythia.iterdir()) if path.is_file()}
    config = json.loads(files["config.json"].read_text())
    if "model.safetensors" not in files or "num_hidden_layers" not in config:
        raise ValueError(f"{pythia}: a block-missing twin needs one model.safetensors and num_hidden_layers")
    deeper = config | {"num_hidden_layers": config["num_hidden_layers"] + 1}
    add_branch(hub, BLOCK_MISSING.repo, BRANCH, files | {"config.json": json.dumps(deeper, indent=2).encode()})
    add_branch(hub, BLOB_DELETED.repo, BRANCH, files)
    falcon = source_branch(hub, FALCON)
    shards = sorted(set(json.loads((falcon / SHARD_INDEX).read_text())["weight_map"].values()))
    if len(shards) < 2:
        raise ValueError(f"{falcon}: a shard-missing twin needs a checkpoint in 2 shards or more, not {shards}")
    kept = {path.name: path for path in sorted(falcon.iterdir()) if path.is_file() and path.name != shards[-1]}
    add_branch(hub, SHARD_MISSING.repo, BRANCH, kept)
    return [scenario.repo for scenario in SCENARIOS]


def preset(rehearsal: dict, hub: Path, root: str) -> dict:
    """The phase's config: presets/rehearsal.yaml's settings (corpus, windows, extraction, ...), the fault twins as
    its models at their config.json's depth, no figures or analyses, and the results root `root`."""
    config = {key: copy.deepcopy(value) for key, value in rehearsal.items() if key not in LEFT_OUT}
    config["figures"] = {key: value for key, value in rehearsal["figures"].items() if key in FIGURE_SETTINGS}
    config["models"] = {
        scenario.model: {
            "hub_id": scenario.repo,
            "kind": "decoder",
            "layers": json.loads((fault_branch(hub, scenario) / "config.json").read_text())["num_hidden_layers"],
        }
        for scenario in SCENARIOS
    }
    config[results_root.KEY] = root
    return config


def paths_at(root: str):
    """shape_of_learning.paths as a run with the results root `root` has it: a module of its own, the one imported
    here keeping its root."""
    spec = importlib.util.find_spec("shape_of_learning.paths")
    module = importlib.util.module_from_spec(spec)
    saved = os.environ.get(RESULTS_VARIABLE)
    os.environ[RESULTS_VARIABLE] = root
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            os.environ.pop(RESULTS_VARIABLE)
        else:
            os.environ[RESULTS_VARIABLE] = saved
    return module


def cache_dir(hf_home: Path, repo: str) -> Path:
    """A repository's folder in the Hugging Face cache under `hf_home` (models.hf_cache's layout)."""
    return Path(hf_home) / "hub" / ("models--" + repo.replace("/", "--"))


def cached_weights(hf_home: Path, repo: str) -> list[Path]:
    """The weight files a repository's snapshots hold in the cache, and any partial download of it."""
    folder = cache_dir(hf_home, repo)
    return sorted(
        path
        for path in folder.rglob("*")
        if (path.parent.parent.name == "snapshots" and path.suffix in WEIGHT_SUFFIXES) or path.suffix == ".incomplete"
    )


class DeleteOnReceipt(threading.Thread):
    """Deletes the blobs of a checkpoint's weight files (its lock's) from the cache as soon as its download job has
    written its receipt: between the download and the extraction, which starts a new process after the download's
    has ended. Polls every `interval` seconds until `stop()`; `deleted` lists the blobs deleted."""

    def __init__(self, receipt: Path, lock: Path, hf_home: Path, interval: float = 0.005):
        super().__init__(name="delete-on-receipt", daemon=True)
        self.receipt, self.lock, self.hf_home, self.interval = Path(receipt), Path(lock), Path(hf_home), interval
        self.deleted: list[Path] = []
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            if self.receipt.is_file():
                lock = json.loads(self.lock.read_text())
                snapshot = cache_dir(self.hf_home, lock["location"]) / "snapshots" / lock["commit_sha"]
                for name in lock["weights"]:
                    blob = (snapshot / name).resolve()
                    if blob.is_file():
                        blob.unlink()
                        self.deleted.append(blob)
                return
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


@dataclass
class Verdict:
    """How a scenario ended: what was seen (one line), and each way it differs from what was expected."""

    scenario: Scenario
    seen: str
    failures: list[str] = field(default_factory=list)
    log: Path | None = None  # the log to show where it failed


def refused(scenario: Scenario, log: Path, expected: tuple[str, ...], made: list[Path]) -> Verdict:
    """A scenario that must end in its job's failure (`log`'s `job failed:` line) with every text of `expected` in
    the message, and none of `made` existing."""
    log = Path(log)
    message = failure_message(log)
    verdict = Verdict(scenario, f"{log.name}: job failed: {message}" if message else f"{log}: no failure", log=log)
    if message is None:
        state = "ends without a `job failed:` line" if log.is_file() else "does not exist: the job never ran"
        verdict.failures.append(f"its job did not fail as expected: {log} {state}")
    elif missing := [text for text in expected if text not in message]:
        verdict.failures.append(f"its job failed without naming {missing}: {message}")
    verdict.failures += [f"{path} was made from the partial model" for path in map(Path, made) if path.exists()]
    return verdict


def recovered(scenario: Scenario, code: int, log: Path, manifest: Path, downloads: tuple[int, int]) -> Verdict:
    """A scenario whose second run must succeed (`code` 0, its `manifest` made), fetching the weight file again:
    `downloads` counts its downloads before and after that run; its extraction's `log` is shown where it failed."""
    verdict = Verdict(scenario, f"second run exited {code}, {downloads[1] - downloads[0]} download(s)", log=Path(log))
    if code:
        verdict.failures.append(f"the second run exited {code}: {failure_message(log) or 'see its output'}")
    if not Path(manifest).is_file():
        verdict.failures.append(f"the second run made no {manifest}")
    if downloads[1] <= downloads[0]:
        verdict.failures.append("the second run did not download the deleted weight file again")
    return verdict


def merged(first: Verdict, second: Verdict) -> Verdict:
    log = first.log if first.failures else second.log
    return Verdict(first.scenario, f"{first.seen}; then {second.seen}", first.failures + second.failures, log)


def tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not Path(path).is_file():
        return f"({path}: no log)"
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def report(verdicts: list[Verdict], outputs: str = "") -> int:
    """Print each scenario's verdict, and the tail of its log where it failed, then where Snakemake's `outputs` are
    if any failed; the number that failed."""
    for verdict in verdicts:
        name = verdict.scenario.model
        if not verdict.failures:
            print(f"rehearsal faults: {name} ended as expected: {verdict.seen}", flush=True)
            continue
        for failure in verdict.failures:
            print(
                f"rehearsal faults: {name} ({verdict.scenario.broken}) did not end as expected: {failure}",
                file=sys.stderr,
            )
        print(
            f"rehearsal faults: {name}: expected: {verdict.scenario.expected}; the tail of {verdict.log}:\n"
            f"{tail(verdict.log)}",
            file=sys.stderr,
        )
    failed = sum(bool(verdict.failures) for verdict in verdicts)
    if failed and outputs:
        print(f"rehearsal faults: Snakemake's output: {outputs}", file=sys.stderr)
    return failed


def downloads(hub: LocalHub, repo: str, names) -> int:
    """The local Hub's answers with a weight file's bytes (GET, 200 or 206) for `repo`'s files `names`."""
    patterns = [f"/{repo}/resolve/*/{name}" for name in names]
    return sum(
        1
        for method, path, _, status in list(hub.requests)
        if method == "GET" and status in (200, 206) and any(fnmatch(path, pattern) for pattern in patterns)
    )


class Layout:
    """Where the phase's runs write: the paths of a run with the results root `root` (`paths_at`), in the working
    directory `base`."""

    def __init__(self, base: Path, root: str):
        self.base, self.root, self.paths = Path(base), root, paths_at(root)

    def target(self, scenario: Scenario) -> str:
        """A scenario's manifest as Snakemake's target (relative to the working directory)."""
        return self.paths.manifest(scenario.model, BRANCH)

    def manifest(self, scenario: Scenario) -> Path:
        return self.base / self.target(scenario)

    def lock(self, scenario: Scenario) -> Path:
        return self.base / self.paths.lock(scenario.model, BRANCH)

    def receipt(self, scenario: Scenario) -> str:
        """The download receipt's path as the jobs name it (relative to the working directory)."""
        return self.paths.weights_receipt(scenario.model, BRANCH)

    def log(self, rule: str, scenario: Scenario) -> Path:
        return self.base / self.paths.log(rule, f"{scenario.model}/{BRANCH}")

    def made(self, scenario: Scenario) -> list[Path]:
        """What an extraction makes of a checkpoint: its manifest, its shards, its metrics' folder."""
        metrics = os.path.dirname(self.paths.layer_metrics(scenario.model, BRANCH))
        return [self.manifest(scenario), self.base / self.paths.shards(scenario.model, BRANCH), self.base / metrics]


def judge_first_run(layout: Layout, hub: Path, hf_home: Path, deleted: list[Path]) -> list[Verdict]:
    """Each scenario's verdict after the first run (blob-deleted's first half), from its job's log and the files the
    run made in `layout` and the cache `hf_home`; `hub` the hub folder of the fault twins, `deleted` the blobs
    `DeleteOnReceipt` deleted."""
    blob = refused(
        BLOB_DELETED,
        layout.log("extract_hidden_states", BLOB_DELETED),
        ("not in the Hugging Face cache", layout.receipt(BLOB_DELETED)),
        layout.made(BLOB_DELETED),
    )
    if not deleted:
        blob.failures.insert(0, f"no blob was deleted: its receipt {layout.receipt(BLOB_DELETED)} never appeared")
    block = refused(
        BLOCK_MISSING,
        layout.log("extract_hidden_states", BLOCK_MISSING),
        ("missing from the checkpoint", missing_block(fault_branch(hub, BLOCK_MISSING))),
        layout.made(BLOCK_MISSING),
    )
    shards = tuple(missing_shards(fault_branch(hub, SHARD_MISSING)))
    shard = refused(
        SHARD_MISSING,
        layout.log("pin_checkpoint", SHARD_MISSING),
        shards or ("(a shard missing from the twin)",),
        [layout.lock(SHARD_MISSING), layout.base / layout.receipt(SHARD_MISSING), *layout.made(SHARD_MISSING)]
        + cached_weights(hf_home, SHARD_MISSING.repo),
    )
    return [blob, block, shard]


def rehearse(folder: Path, hub: LocalHub, env: dict, cores: int, rehearsal: dict) -> list[Verdict]:
    """The phase (module docstring) in `folder` (emptied first), its jobs reaching `hub` with `env` (HF_HOME made
    `folder`/hf-home), with presets/rehearsal.yaml's settings `rehearsal`: each scenario's verdict."""
    folder = Path(folder).resolve()
    hf_home = folder / HF_HOME
    env = env | {"HF_HOME": str(hf_home)}
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    layout = Layout(REPOSITORY, os.path.relpath(folder / RESULTS, REPOSITORY))
    config_file = folder / "faults.yaml"
    config_file.write_text(yaml.safe_dump(preset(rehearsal, hub.root, layout.root), sort_keys=False, width=120))

    def snakemake(run: int, scenarios, *options) -> int:
        command = [sys.executable, "-m", "snakemake", "--configfile", str(config_file), "--cores", str(cores)]
        output = folder / f"snakemake-{run}.log"
        with output.open("w") as stream:
            code = subprocess.run(
                [*command, *options, *map(layout.target, scenarios)],
                check=False,
                cwd=REPOSITORY,
                env=env,
                stdout=stream,
                stderr=subprocess.STDOUT,
            ).returncode
        print(
            f"rehearsal faults: snakemake run {run} ({', '.join(s.model for s in scenarios)}) exited {code}: {output}",
            flush=True,
        )
        return code

    deleter = DeleteOnReceipt(layout.base / layout.receipt(BLOB_DELETED), layout.lock(BLOB_DELETED), hf_home)
    deleter.start()
    try:
        snakemake(1, SCENARIOS, "--keep-going")
    finally:
        deleter.stop()
    blob, *others = judge_first_run(layout, hub.root, hf_home, deleter.deleted)
    lock = layout.lock(BLOB_DELETED)
    pinned = json.loads(lock.read_text())["weights"] if lock.is_file() else {}
    before = downloads(hub, BLOB_DELETED.repo, pinned)
    code = snakemake(2, [BLOB_DELETED])
    log, after = layout.log("extract_hidden_states", BLOB_DELETED), downloads(hub, BLOB_DELETED.repo, pinned)
    return [merged(blob, recovered(BLOB_DELETED, code, log, layout.manifest(BLOB_DELETED), (before, after))), *others]


def summary(verdicts: list[Verdict]) -> str:
    """The summary line's words for the phase."""
    met = sum(not verdict.failures for verdict in verdicts)
    return f"{met} of {len(verdicts)} upstream breaks ended as expected ({', '.join(s.model for s in SCENARIOS)})"


def run_phase(folder: Path, hub: LocalHub, env: dict, cores: int, rehearsal: dict) -> tuple[int, str]:
    """`rehearse`, reported and timed: (the number of scenarios that did not end as expected, the summary)."""
    start = time.monotonic()
    print(f"rehearsal faults: {len(SCENARIOS)} upstream breaks on the local Hub; snakemake in {folder}", flush=True)
    verdicts = rehearse(folder, hub, env, cores, rehearsal)
    failed = report(verdicts, f"{Path(folder).resolve()}/snakemake-{{1,2}}.log")
    return failed, f"{summary(verdicts)} in {time.monotonic() - start:.0f} s"
