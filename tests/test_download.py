"""Weights downloaded before any GPU job: a download job fetches a pinned checkpoint from the Hub (here the local Hub,
shape_of_learning.rehearsal.local_hub) into the Hugging Face cache, verified, resuming a download cut short and
surviving a server error; extraction then reads the cache offline and opens no connection at all."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
import yaml
from huggingface_hub import constants

from shape_of_learning import network, paths
from shape_of_learning.experiment.plan import layer_groups
from shape_of_learning.models import download, hf_cache
from shape_of_learning.models.checkpoints import Checkpoint
from shape_of_learning.models.pinning import pin
from shape_of_learning.models.training import byte_tokenizer
from shape_of_learning.rehearsal.local_hub import Fault, LocalHub, add_branch

from hf_cache import fresh_client, point_at

REPO = Path(__file__).resolve().parents[1]
GUARD = Path(__file__).parent / "network_guard"  # a sitecustomize: loopback connections only, each one logged
MIB = 2**20
BIG = os.urandom(25 * MIB)  # over two of huggingface_hub's 10 MiB download chunks
ENTRY = {"tokenizer": None, "weights": "auto"}


@pytest.fixture
def hub_folder(tmp_path) -> Path:
    root = tmp_path / "hub"
    add_branch(
        root,
        "acme/big",
        "main",
        {
            "config.json": b'{"model_type": "gpt2"}',
            "model.safetensors": BIG,
            "tokenizer.json": b"{}",
            "flax_model.msgpack": b"not fetched",
        },
    )
    add_branch(root, "acme/gated", "main", {"config.json": b"{}", "model.safetensors": b"weights"})
    (root / "acme/gated/gated").touch()
    return root


@pytest.fixture
def client(monkeypatch, tmp_path):
    """huggingface_hub with a cache of its own and no token, and retries without waiting."""
    fresh_client(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(network, "sleep", lambda seconds: None)
    return tmp_path / "cache"


def served(hub: LocalHub, name: str) -> list[tuple]:
    return [
        (method, byte_range, status) for method, path, byte_range, status in hub.requests if path.endswith(f"/{name}")
    ]


def test_a_download_cut_short_resumes_from_the_bytes_received_and_is_verified(hub_folder, client, monkeypatch):
    with LocalHub(hub_folder, faults=[Fault("*/model.safetensors", drop_after=15 * MIB)]) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        receipt = download.download(lock, ENTRY)
    gets = [(byte_range, status) for method, byte_range, status in served(hub, "model.safetensors") if method == "GET"]
    assert gets[0] == (None, 200) and len(gets) == 2  # cut after 15 MiB, then asked from where it broke off
    resumed_at = int(re.fullmatch(r"bytes=(\d+)-", gets[1][0])[1])
    assert 0 < resumed_at <= 15 * MIB and gets[1][1] == 206
    snapshot = client / "models--acme--big/snapshots" / lock["commit_sha"]
    assert (snapshot / "model.safetensors").read_bytes() == BIG
    assert sorted(receipt["files"]) == ["config.json", "model.safetensors", "tokenizer.json"]  # no other format's
    assert receipt["verified"] == {"model.safetensors": hashlib.sha256(BIG).hexdigest()}


def test_a_server_error_is_retried(hub_folder, client, monkeypatch):
    with LocalHub(hub_folder, faults=[Fault("*/resolve/*/model.safetensors", status=500)]) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        download.download(lock, ENTRY)
    assert [status for method, _, status in served(hub, "model.safetensors") if method == "GET"] == [500, 200]


def test_a_wrong_sha256_is_refused_and_nothing_of_it_stays_in_the_cache(hub_folder, client, monkeypatch):
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        recorded = hashlib.sha256(b"the bytes pinned").hexdigest()
        with pytest.raises(download.DigestMismatchError) as refused:
            download.download(lock | {"weights": {"model.safetensors": recorded}}, ENTRY)
    message = str(refused.value)
    assert (
        f"acme/big@{lock['commit_sha']}: model.safetensors has digest {hashlib.sha256(BIG).hexdigest()}, not the "
        f"{recorded} its lock records; deleted from the Hugging Face cache" in message
    )
    repository = client / "models--acme--big"
    left = sorted(path.name for path in repository.rglob("*") if path.is_file() or path.is_symlink())
    assert "model.safetensors" not in left and not any(name.endswith(".incomplete") for name in left)
    assert all(len(BIG) != path.stat().st_size for path in (repository / "blobs").iterdir())


def test_a_gated_repository_without_a_token_says_how_to_get_access(hub_folder, client, monkeypatch):
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("gated", "main", "hub", "acme/gated", "main", -1))  # its listing is public
        with pytest.raises(PermissionError, match=r"acme/gated is gated: accept its conditions .* \(HF_TOKEN="):
            download.download(lock, ENTRY)


def test_offline_it_verifies_what_the_cache_holds(hub_folder, client, monkeypatch):
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        download.download(lock, ENTRY)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    again = download.download(lock, ENTRY)  # the server is gone: the cache answers, verified
    assert again["verified"] == lock["weights"] and again["cached_before"] == ["model.safetensors"]
    assert hf_cache.evict_weights(lock, keep=again["cached_before"]) == []  # weights the cache held before stay


def test_weights_count_as_the_user_s_only_where_the_cache_held_them_before_the_pin(
    hub_folder, client, monkeypatch, tmp_path
):
    lock_file = tmp_path / "lock.json"
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        lock_file.write_text(json.dumps(lock))
        assert download.download(lock, ENTRY, str(lock_file))["cached_before"] == []
        # downloaded again over its own files (a rerun that extracts again before they were evicted): still the run's
        assert download.download(lock, ENTRY, str(lock_file))["cached_before"] == []
        os.utime(lock_file)  # pinned after the cache held them: the user's
        assert download.download(lock, ENTRY, str(lock_file))["cached_before"] == ["model.safetensors"]


def test_weights_this_download_fetched_are_evicted_after_extraction(hub_folder, client, monkeypatch):
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        receipt = download.download(lock, ENTRY)
    assert receipt["cached_before"] == []
    [blob] = hf_cache.evict_weights(lock, keep=receipt["cached_before"])
    assert blob.name == hashlib.sha256(BIG).hexdigest() and not blob.exists()


def test_a_receipt_stands_only_while_the_cache_holds_what_it_lists(hub_folder, client, monkeypatch, tmp_path):
    with LocalHub(hub_folder) as hub:
        point_at(hub.endpoint, monkeypatch)
        lock = pin(Checkpoint("big", "main", "hub", "acme/big", "main", -1))
        receipt_file = tmp_path / "receipt.json"
        receipt_file.write_text(json.dumps(download.download(lock, ENTRY)))
    assert download.missing_from_cache(str(tmp_path / "never-written.json")) == []  # before its download: nothing
    assert download.missing_from_cache(str(receipt_file)) == []
    download.check_receipt(str(receipt_file))
    snapshot = hf_cache.snapshot("acme/big", lock["commit_sha"])
    blob = (snapshot / "model.safetensors").resolve()
    blob.unlink()  # a cache cleanup between the download and the extraction
    assert download.missing_from_cache(str(receipt_file)) == ["acme/big/model.safetensors"]
    with pytest.raises(download.StaleReceiptError) as raised:
        download.check_receipt(str(receipt_file))
    assert str(receipt_file) in str(raised.value) and "Rerun snakemake: the download job runs again" in str(
        raised.value
    )
    blob.write_bytes(BIG[:1000])  # a truncated blob under the right name
    assert download.missing_from_cache(str(receipt_file)) == ["acme/big/model.safetensors"]
    blob.unlink()
    other = blob.with_name("0" * 64)
    other.write_bytes(BIG)
    (snapshot / "model.safetensors").unlink()
    (snapshot / "model.safetensors").symlink_to(other)  # the right size, another blob than the one verified
    assert download.missing_from_cache(str(receipt_file)) == ["acme/big/model.safetensors"]
    (snapshot / "tokenizer.json").unlink()
    assert download.missing_from_cache(str(receipt_file)) == ["acme/big/model.safetensors", "acme/big/tokenizer.json"]
    receipt_file.write_text("{trunc")
    assert download.missing_from_cache(str(receipt_file))[0].startswith(f"{receipt_file} (unreadable")


def test_only_hub_checkpoints_and_hub_tokenizers_need_a_download(tmp_path):
    hub, local = (Checkpoint("m", "main", source, "acme/m", None, -1) for source in ("hub", "local"))
    assert download.needed(hub, ENTRY) and not download.needed(local, ENTRY)
    assert download.needed(local, {"tokenizer": "acme/tokenizer"})
    assert not download.needed(local, {"tokenizer": str(tmp_path)})  # a local directory


# --- the workflow: download jobs, then extraction offline, with every connection but loopback refused ---

TINY, TOKENIZER = "acme/pythia-tiny", "acme/tokenizer"
ENCODER = "acme/bert-tiny"  # what Rajaee & Pilehvar fine-tune and measure
STEPS = ["step0", "step1", "step2", "step3"]


@pytest.fixture(scope="module")
def tiny_hub(tmp_path_factory) -> Path:
    """A GPT-NeoX series of four steps without tokenizer files, as Bloom's intermediate branches, and the repository
    of its tokenizer."""
    root, scratch = tmp_path_factory.mktemp("hub"), tmp_path_factory.mktemp("scratch")
    byte_tokenizer("gpt_neox", 128).save_pretrained(scratch / "tokenizer")
    config = transformers.GPTNeoXConfig(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    add_branch(
        root,
        TOKENIZER,
        "main",
        {path.name: path for path in (scratch / "tokenizer").iterdir()}
        | {"config.json": config.to_json_string().encode()},
    )
    for seed, step in enumerate(STEPS):
        torch.manual_seed(seed)
        transformers.GPTNeoXForCausalLM(config).save_pretrained(scratch / step)
        add_branch(root, TINY, step, {path.name: path for path in (scratch / step).iterdir()})
    encoder = transformers.BertConfig(
        vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    transformers.BertForMaskedLM(encoder).save_pretrained(scratch / "encoder")
    byte_tokenizer("bert", 64).save_pretrained(scratch / "encoder")
    add_branch(root, ENCODER, "main", {path.name: path for path in (scratch / "encoder").iterdir()})
    return root


def job_events(stderr: str) -> list[tuple[str, str, str]]:
    """("start" | "end", rule, checkpoint) in the order Snakemake's log tells them."""
    jobs, events = {}, []
    for block in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)|^Finished jobid: (\d+)", stderr, re.MULTILINE):
        if block[1]:
            jobid = re.search(r"jobid: (\d+)", block[2])[1]
            checkpoint = re.search(r"checkpoint=([\w.-]+)", block[2])
            jobs[jobid] = (block[1], checkpoint[1] if checkpoint else "")
            events.append(("start", *jobs[jobid]))
        else:
            events.append(("end", *jobs[block[3]]))
    return events


def tiny_workflow(tmp_path: Path, endpoint: str) -> tuple[list[str], dict[str, str]]:
    """The Snakemake command of a run of the tiny series in `tmp_path`, and its environment: the Hub at `endpoint`,
    a cache of its own, no token, every connection but loopback refused and logged."""
    config = {
        "corpus": {"name": "enwiki-sample", "gensim_sample": True},
        "windows": {"count": 48, "chars": 200, "seed": 0},
        "extraction": {"evict_weights": True},
        "metrics": {"names": ["anisotropy"], "batch_size": 128, "batches": 2, "layers_per_job": "checkpoint"},
        "figures": {"profile_across_checkpoints": [{"model": "tiny"}]},
        "models": {
            "tiny": {
                "hub_id": TINY,
                "tokenizer": TOKENIZER,
                "kind": "decoder",
                "layers": 2,
                "max_length": 64,
                "checkpoints": STEPS,
            }
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")
    }
    env |= {
        "HF_ENDPOINT": endpoint,
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
        "HF_TOKEN_PATH": str(tmp_path / "no-token"),
        "NETWORK_GUARD_LOG": str(tmp_path / "connections.jsonl"),
        "PYTHONPATH": os.pathsep.join([str(GUARD), env.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--cores",
        "2",
    ]
    return command, env


@pytest.mark.slow
def test_extraction_reads_what_the_download_jobs_fetched_and_opens_no_connection(tiny_hub, tmp_path):
    cache, log = tmp_path / "hf-cache", tmp_path / "connections.jsonl"
    with LocalHub(tiny_hub) as hub:
        command, env = tiny_workflow(tmp_path, hub.endpoint)
        result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    connections = [json.loads(line) for line in log.read_text().splitlines()]
    by_job = {}
    for connection in connections:
        job = next(
            (
                name
                for name in ("download_weights", "extract_hidden_states")
                if name in " ".join([*connection["argv"], connection["job"]])  # a script's, or a worker's job
            ),
            "snakemake",
        )
        by_job.setdefault(job, []).append(connection)
    assert by_job.get("extract_hidden_states") is None  # not one attempt, loopback included
    assert by_job["download_weights"] and all(c["allowed"] for c in connections)  # the guard saw the downloads
    manifest = json.loads((tmp_path / "results/manifests/tiny/step3.json").read_text())
    assert manifest["tokenizer"] == TOKENIZER and manifest["weights_format"] == "safetensors"
    repository = cache / f"models--{TINY.replace('/', '--')}"
    assert not list(repository.rglob("*.safetensors"))  # each checkpoint's weights evicted once measured
    assert (repository / "snapshots" / manifest["commit_sha"] / "config.json").is_file()  # the rest stays

    # a lane of downloads holds two checkpoints' weights at most: step2's download waits for step0's last metrics job,
    # which evicts its weights (no job of the run reads them after it)
    events = job_events(result.stderr)
    order = [
        (kind, step)
        for kind, rule, step in events
        if rule in ("download_weights", "measure_layers") and (kind == "start") == (rule == "download_weights")
    ]
    assert order.index(("end", "step0")) < order.index(("start", "step2"))
    assert order.index(("end", "step1")) < order.index(("start", "step3"))
    assert not list((tmp_path / "results/weights").rglob("*.json"))  # the receipts are temporary

    # a rerun (a resume after a stop) finds nothing to do: step2's and step3's downloads keep the gates they waited on
    rerun = subprocess.run([*command, "--dry-run"], capture_output=True, text=True, env=env | {"HF_HUB_OFFLINE": "1"})
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr, rerun.stdout[-3000:]


@pytest.mark.slow
def test_rajaee_pilehvar_s_jobs_read_the_downloaded_weights_offline_and_eviction_leaves_them(tiny_hub, tmp_path):
    """A fine-tuning and an analysis load their model on a GPU node, as extraction does: from the cache its download
    job filled, offline; the extraction's eviction leaves those weights for them, whichever job ends first."""
    with LocalHub(tiny_hub) as hub:
        command, env = tiny_workflow(tmp_path, hub.endpoint)
        config = yaml.safe_load((tmp_path / "config.yaml").read_text())
        config["models"] |= {
            "enc": {"hub_id": ENCODER, "kind": "encoder", "layers": 2, "max_length": 64},
            "enc-ft": {
                "finetune": {"base": "enc", "data": "simlex999/train", "max_steps": 2, "batch_size": 8},
                "kind": "encoder",
                "layers": 2,
            },
        }
        config["rajaee_pilehvar"] = {
            "pairs": [{"pretrained": "enc", "finetuned": "enc-ft"}],
            "seeds": [0],
            "evaluate": ["simlex999/test"],
            "clusters": 3,
            "directions": 2,
            "least_directions": [4],
            "figure_tokens": 200,
            "datasets": {
                "simlex999": {
                    "format": "word_pairs",
                    "gensim": True,
                    "scale": 10,
                    "splits": {"all": "simlex999.txt"},
                    "random_split": {"of": "all", "test": 0.333},
                }
            },
        }
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        analyses = [
            paths.isotropy_settings("simlex999", "test", model, "settings") for model in ("enc", "enc-ft-seed0")
        ]
        measured = [paths.layer_metrics("enc", "main", group) for group in layer_groups(2, "checkpoint")]
        result = subprocess.run([*command, *analyses, *measured], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    connections = [json.loads(line) for line in (tmp_path / "connections.jsonl").read_text().splitlines()]
    readers = ("finetune_model", "measure_isotropy_settings", "extract_hidden_states")
    # a job in a worker is named by the worker's environment, a script's by its command line; loopback included
    assert not [c for c in connections if any(name in " ".join([*c["argv"], c["job"]]) for name in readers)]
    weights = list((tmp_path / f"hf-cache/models--{ENCODER.replace('/', '--')}").rglob("model.safetensors"))
    assert weights and weights[0].resolve().is_file()  # left by eviction: the R&P jobs read them
    log = (tmp_path / "logs/measure_layers").rglob("*.log")
    assert any(
        "weights kept in the cache for finetune_model enc-ft-seed0, measure_isotropy_settings simlex999/test/enc"
        in path.read_text()
        for path in log
    )
    assert not list((tmp_path / "results/weights").rglob("*.json"))  # the receipts are temporary


@pytest.mark.slow
def test_a_checkpoint_s_weights_stay_in_the_cache_until_its_metrics_are_measured(tiny_hub, tmp_path):
    """A failure after the extraction (its metrics job, a time limit, a preemption) leaves the weights that a retry of
    the checkpoint's group job extracts from again, offline on its node: only its last metrics job evicts them."""
    with LocalHub(tiny_hub) as hub:
        command, env = tiny_workflow(tmp_path, hub.endpoint)
        config = yaml.safe_load((tmp_path / "config.yaml").read_text())
        config["metrics"]["layers_per_job"] = 1  # three metrics jobs a checkpoint: the last one evicts
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        extracted = subprocess.run(
            [*command, "results/manifests/tiny/step0.json"], capture_output=True, text=True, env=env
        )
        assert extracted.returncode == 0, extracted.stderr[-3000:]
        weights = tmp_path / f"hf-cache/models--{TINY.replace('/', '--')}"
        assert list(weights.rglob("*.safetensors"))  # extracted, not measured: still there
        first = subprocess.run(
            [*command, "results/metrics/tiny/step0/layer_0.parquet"], capture_output=True, text=True, env=env
        )
        assert first.returncode == 0 and list(weights.rglob("*.safetensors")), first.stderr[-3000:]
        rest = [f"results/metrics/tiny/step0/layer_{layer}.parquet" for layer in (1, 2)]
        measured = subprocess.run([*command, *rest], capture_output=True, text=True, env=env)
    assert measured.returncode == 0, measured.stderr[-3000:]
    assert not list(weights.rglob("*.safetensors"))  # its last metrics job evicted them
    assert list(weights.rglob("config.json"))


@pytest.mark.slow
def test_a_blob_gone_since_the_download_is_downloaded_again_by_the_next_run(tiny_hub, tmp_path):
    receipt, manifest = (tmp_path / f"results/{kind}/tiny/step0.json" for kind in ("weights", "manifests"))
    with LocalHub(tiny_hub) as hub:
        command, env = tiny_workflow(tmp_path, hub.endpoint)
        downloaded = subprocess.run(
            [*command, "results/weights/tiny/step0.json"], capture_output=True, text=True, env=env
        )
        assert downloaded.returncode == 0 and receipt.is_file(), downloaded.stderr[-3000:]
        commit = json.loads(receipt.read_text())["commit_sha"]
        link = tmp_path / f"hf-cache/models--{TINY.replace('/', '--')}/snapshots/{commit}/model.safetensors"
        link.resolve().unlink()  # a cache cleanup between the download job and the extraction
        target = "results/manifests/tiny/step0.json"
        # the extraction's own check, met where the download does not rerun: a run that leaves out the params trigger
        without_params = ["--rerun-triggers", "mtime", "input", "code", "software-env"]
        failed = subprocess.run([*command, target, *without_params], capture_output=True, text=True, env=env)
        assert failed.returncode != 0 and not manifest.exists()
        log = (tmp_path / "logs/extract_hidden_states/tiny/step0.log").read_text()
        assert f"{TINY}/model.safetensors: not in the Hugging Face cache" in log, log[-3000:]
        assert "results/weights/tiny/step0.json" in log and "Nothing was loaded" in log
        rerun = subprocess.run([*command, target], capture_output=True, text=True, env=env)
    assert rerun.returncode == 0 and manifest.is_file(), rerun.stderr[-3000:]
    assert [rule for kind, rule, _ in job_events(rerun.stderr) if kind == "start"] == [
        "download_weights",
        "extract_hidden_states",
    ]


@pytest.mark.slow
def test_a_model_fixed_upstream_after_its_pin_is_picked_up_by_the_command_the_refusal_names(tiny_hub, tmp_path):
    hub_folder = tmp_path / "hub"
    shutil.copytree(tiny_hub, hub_folder)
    with LocalHub(hub_folder) as hub:
        command, env = tiny_workflow(tmp_path, hub.endpoint)
        pinned = subprocess.run([*command, "results/weights/tiny/step0.json"], capture_output=True, text=True, env=env)
        assert pinned.returncode == 0, pinned.stderr[-3000:]
        lock = tmp_path / "results/lock/tiny/step0.json"
        old = json.loads(lock.read_text())["commit_sha"]
        # upstream publishes step0 again, with the block its first upload lacked; the user sets `layers: 3`
        deeper = transformers.GPTNeoXConfig.from_pretrained(tiny_hub / TINY / "revisions/step0")
        deeper.num_hidden_layers = 3
        transformers.GPTNeoXForCausalLM(deeper).save_pretrained(tmp_path / "fixed")
        add_branch(hub_folder, TINY, "step0", {path.name: path for path in (tmp_path / "fixed").iterdir()})
        config = yaml.safe_load((tmp_path / "config.yaml").read_text())
        config["models"]["tiny"]["layers"] = 3
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        refused = subprocess.run([*command, "-n"], capture_output=True, text=True, env=env)
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "results/lock/tiny/step0.json pins) gives a depth of 2" in said, said[-3000:]
        renew = re.search(r"renew its locks: `python -m shape_of_learning (renew [^`]+)`", said)[1]
        assert renew == f"renew {tmp_path / 'config.yaml'} --model tiny"
        renewed = subprocess.run(
            [sys.executable, "-m", "shape_of_learning", *renew.split()],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
        )
        assert renewed.returncode == 0, renewed.stderr[-3000:]
        new = json.loads(lock.read_text())["commit_sha"]
        assert renewed.stdout.splitlines()[0] == f"tiny/step0: renewed: commit {old} -> {new}, other weight files"
        assert renewed.stdout.splitlines()[-1] == "1 of 4 locks renewed: the next run reruns what depends on those only"
        fixed = subprocess.run([*command, "results/manifests/tiny/step0.json"], capture_output=True, text=True, env=env)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    manifest = json.loads((tmp_path / "results/manifests/tiny/step0.json").read_text())
    assert manifest["commit_sha"] == new != old and manifest["layers"] == 3


@pytest.mark.slow
def test_the_network_guard_refuses_every_address_but_loopback(tmp_path):
    log = tmp_path / "connections.jsonl"
    probe = (
        "import socket\n"
        "for attempt in (lambda: socket.create_connection(('93.184.216.34', 443), timeout=5),\n"
        "                lambda: socket.getaddrinfo('huggingface.co', 443)):\n"
        "    try:\n        attempt()\n    except OSError as error:\n        print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(GUARD), "NETWORK_GUARD_LOG": str(log)},
    )
    assert result.stdout.count("network guard: no") == 2, result.stdout + result.stderr
    assert [json.loads(line)["allowed"] for line in log.read_text().splitlines()] == [False, False]
