"""The local Hub speaks the part of the Hub's API that huggingface_hub calls: refs, model info with file metadata,
resolve with the Hub's headers and ranges, the Hub's errors, and the faults it is told to inject."""

import hashlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RemoteEntryNotFoundError, RevisionNotFoundError

from shape_of_learning.rehearsal.local_hub import Fault, LocalHub, add_branch, read_faults

from hf_cache import fresh_client

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = bytes(range(256)) * 400  # 102,400 bytes


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "hub"
    add_branch(
        root,
        "acme/tiny",
        "main",
        {
            "config.json": b'{"model_type": "gpt2"}',
            "model.safetensors": WEIGHTS,
            "sub/notes.txt": b"a file in a subfolder",
        },
    )
    add_branch(root, "acme/tiny", "step1", {"config.json": b'{"model_type": "gpt2"}', "model.safetensors": b"w1"})
    add_branch(root, "acme/gated", "main", {"config.json": b"{}"})
    (root / "acme/gated/gated").touch()
    return root


@pytest.fixture
def client(monkeypatch, tmp_path):
    fresh_client(monkeypatch, tmp_path / "cache")


def get(url: str, headers: dict | None = None, method: str = "GET"):
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}, method=method), timeout=10)


def test_model_info_lists_each_file_with_its_size_blob_id_and_lfs_sha256(folder, client):
    with LocalHub(folder) as hub:
        api = huggingface_hub.HfApi(endpoint=hub.endpoint)
        info = api.model_info("acme/tiny", revision="main", files_metadata=True)
        refs = api.list_repo_refs("acme/tiny")
        again = api.model_info("acme/tiny", revision=info.sha)
    files = {s.rfilename: s for s in info.siblings}
    assert sorted(files) == ["config.json", "model.safetensors", "sub/notes.txt"]
    weights = files["model.safetensors"]
    assert weights.size == len(WEIGHTS) and weights.lfs.sha256 == hashlib.sha256(WEIGHTS).hexdigest()
    pointer = (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{weights.lfs.sha256}\nsize {len(WEIGHTS)}\n"
    ).encode()
    assert weights.blob_id == hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()  # git's id of the pointer
    config = b'{"model_type": "gpt2"}'
    assert files["config.json"].lfs is None
    assert files["config.json"].blob_id == hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()
    branches = {ref.name: ref.target_commit for ref in refs.branches}
    assert sorted(branches) == ["main", "step1"] and branches["main"] == info.sha != branches["step1"]
    assert again.sha == info.sha  # a commit sha names its branch


def test_a_commit_sha_is_the_sha1_of_the_branch_and_its_files_digests(folder):
    listing = [
        ["config.json", hashlib.sha256(b'{"model_type": "gpt2"}').hexdigest()],
        ["model.safetensors", hashlib.sha256(WEIGHTS).hexdigest()],
        ["sub/notes.txt", hashlib.sha256(b"a file in a subfolder").hexdigest()],
    ]
    expected = hashlib.sha1(json.dumps(["main", listing]).encode()).hexdigest()
    with LocalHub(folder) as hub:
        assert json.load(get(f"{hub.endpoint}/api/models/acme/tiny"))["sha"] == expected
        add_branch(folder, "acme/tiny", "main", {"model.safetensors": b"other"})  # new files, new commit
        assert json.load(get(f"{hub.endpoint}/api/models/acme/tiny"))["sha"] != expected


def test_resolve_answers_with_the_hub_s_headers_and_honours_a_range(folder):
    sha256 = hashlib.sha256(WEIGHTS).hexdigest()
    with LocalHub(folder) as hub:
        commit = json.load(get(f"{hub.endpoint}/api/models/acme/tiny"))["sha"]
        head = get(f"{hub.endpoint}/acme/tiny/resolve/main/model.safetensors", method="HEAD")
        whole = get(f"{hub.endpoint}/acme/tiny/resolve/{commit}/model.safetensors")
        tail = get(f"{hub.endpoint}/acme/tiny/resolve/main/model.safetensors", {"Range": "bytes=100000-"})
        body = tail.read()
    assert head.headers["X-Repo-Commit"] == commit and head.headers["X-Linked-Etag"] == f'"{sha256}"'
    assert head.headers["ETag"] == f'"{sha256}"' and head.headers["X-Linked-Size"] == str(len(WEIGHTS))
    assert whole.status == 200 and whole.read() == WEIGHTS
    assert tail.status == 206 and body == WEIGHTS[100000:]
    assert tail.headers["Content-Range"] == f"bytes 100000-{len(WEIGHTS) - 1}/{len(WEIGHTS)}"


def test_hf_hub_download_reads_it_into_the_cache_layout(folder, client, tmp_path):
    with LocalHub(folder) as hub:
        path = Path(huggingface_hub.hf_hub_download("acme/tiny", "model.safetensors", endpoint=hub.endpoint))
    cache = tmp_path / "cache/models--acme--tiny"
    assert path.read_bytes() == WEIGHTS and path.resolve() == cache / "blobs" / hashlib.sha256(WEIGHTS).hexdigest()
    assert (cache / "refs/main").read_text() == path.parent.name


def test_the_hub_s_errors_become_huggingface_hub_s_exceptions(folder, client):
    with LocalHub(folder, token="hf_right") as hub:
        api = huggingface_hub.HfApi(endpoint=hub.endpoint)
        with pytest.raises(RevisionNotFoundError):
            api.model_info("acme/tiny", revision="step2")
        with pytest.raises(RemoteEntryNotFoundError):
            huggingface_hub.hf_hub_download("acme/tiny", "missing.json", endpoint=hub.endpoint)
        with pytest.raises(GatedRepoError) as gated:
            huggingface_hub.hf_hub_download("acme/gated", "config.json", endpoint=hub.endpoint)
        with pytest.raises(GatedRepoError) as refused:
            huggingface_hub.hf_hub_download("acme/gated", "config.json", endpoint=hub.endpoint, token="hf_wrong")
        assert api.model_info("acme/gated").sha  # a gated repository's listing is public, as on the Hub
        assert (
            Path(
                huggingface_hub.hf_hub_download("acme/gated", "config.json", endpoint=hub.endpoint, token="hf_right")
            ).read_bytes()
            == b"{}"
        )
        with pytest.raises(urllib.error.HTTPError) as absent:
            get(f"{hub.endpoint}/api/models/acme/absent")
    assert gated.value.response.status_code == 401 and refused.value.response.status_code == 403
    assert absent.value.code == 404 and absent.value.headers["X-Error-Code"] == "RepoNotFound"


def test_faults_fail_the_configured_requests_a_set_number_of_times(folder, client, tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text(
        json.dumps([{"path": "*/refs", "status": 500, "times": 2}, {"path": "*/model.safetensors", "drop_after": 1000}])
    )
    with LocalHub(folder, faults=read_faults(faults)) as hub:
        api = huggingface_hub.HfApi(endpoint=hub.endpoint)
        for _ in range(2):
            with pytest.raises(HfHubHTTPError) as error:
                api.list_repo_refs("acme/tiny")
            assert error.value.response.status_code == 500
        assert api.list_repo_refs("acme/tiny").branches  # the third attempt passes
        cut = get(f"{hub.endpoint}/acme/tiny/resolve/main/model.safetensors")
        with pytest.raises(Exception):  # the body ends after 1000 of its 102,400 bytes: the connection dropped
            cut.read()
        assert get(f"{hub.endpoint}/acme/tiny/resolve/main/model.safetensors").read() == WEIGHTS  # once only
    statuses = [(method, path.rsplit("/", 1)[1], status) for method, path, _, status in hub.requests]
    assert statuses == [
        ("GET", "refs", 500),
        ("GET", "refs", 500),
        ("GET", "refs", 200),
        ("GET", "model.safetensors", 200),
        ("GET", "model.safetensors", 200),
    ]
    with pytest.raises(ValueError, match="exactly one of status and drop_after"):
        Fault("*", status=500, drop_after=10)


def test_it_runs_from_the_command_line(folder):
    process = subprocess.Popen(
        [sys.executable, "-m", "shape_of_learning.rehearsal.local_hub", str(folder), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        line = process.stdout.readline()
        endpoint = line.split("HF_ENDPOINT=")[1].split()[0]
        deadline = time.monotonic() + 10
        while True:
            try:
                assert json.load(get(f"{endpoint}/api/models/acme/tiny/refs"))["branches"]
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline, line
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(10)
