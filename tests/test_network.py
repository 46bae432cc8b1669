"""Retrying a network call on transient failures only (shape_of_learning.network), on the errors huggingface_hub,
transformers and urllib really raise."""

import http.client
import logging
import socket
import urllib.error
from types import SimpleNamespace

import huggingface_hub.constants
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import hf_raise_for_status, httpx

from shape_of_learning import network
from shape_of_learning.corpus.fetch import ChecksumError
from shape_of_learning.models import pinning
from shape_of_learning.models.checkpoints import Checkpoint


@pytest.fixture
def waits(monkeypatch):
    """The waits `network.retry` asked for, none of them slept."""
    asked = []
    monkeypatch.setattr(network, "sleep", asked.append)
    return asked


def failing(*errors, result="done"):
    """A call that raises `errors` in turn, then returns `result`; `.calls` counts the calls made."""

    def call():
        call.calls += 1
        if call.calls <= len(errors):
            raise errors[call.calls - 1]
        return result

    call.calls = 0
    return call


def hub_error(status: int, error_code: str | None = None) -> Exception:
    """The error huggingface_hub raises for a Hub response of `status` (and its X-Error-Code header)."""
    request = httpx.Request("GET", "https://huggingface.co/api/models/org/model/revision/main")
    response = httpx.Response(status, headers={"X-Error-Code": error_code} if error_code else {}, request=request)
    try:
        hf_raise_for_status(response)
    except Exception as error:
        return error
    raise AssertionError(f"hf_raise_for_status raised nothing for HTTP {status}")


def raised_from(*chain: BaseException) -> BaseException:
    """chain[0] raised from chain[1] raised from ...: how libraries wrap what the transport raised."""
    for outer, inner in zip(chain, chain[1:]):
        outer.__cause__ = inner
    return chain[0]


def http_error(code: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("https://example.org/enwik8.zip", code, "status", {}, None)


TRANSIENT = {
    "connection reset": ConnectionResetError("Connection reset by peer"),
    "socket timeout": TimeoutError("timed out"),
    "urllib, connection refused": urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
    "urllib, short body": http.client.IncompleteRead(b"partial", 100),
    "urllib 503": http_error(503),
    "urllib 429": http_error(429),
    "Hub 429": hub_error(429),
    "Hub 500": hub_error(500),
    "Hub 503": hub_error(503),
    "httpx connect": httpx.ConnectError("[Errno 111] Connection refused"),
    "httpx read timeout": httpx.ReadTimeout("The read operation timed out"),
    "httpx server disconnected": httpx.RemoteProtocolError("Server disconnected without sending a response."),
    # transformers' from_pretrained on an unreachable Hub, the file not cached: OSError from huggingface_hub's
    # LocalEntryNotFoundError from the connection error
    "transformers, Hub unreachable": raised_from(
        OSError("We couldn't connect to 'https://huggingface.co'"),
        LocalEntryNotFoundError("An error happened"),
        httpx.ConnectError("[Errno 111] Connection refused"),
    ),
}
DETERMINISTIC = {
    "value error": ValueError("the model has 6 blocks but its config entry says layers: 5"),
    "bad digest": ChecksumError("enwik8.zip: sha256: expected 0000, got 1111."),
    "missing file": FileNotFoundError("no such file"),
    "urllib 404": http_error(404),
    "urllib 501": http_error(501),
    "urllib, bad URL": urllib.error.URLError("unknown url type: htp"),
    "Hub, no such repository": hub_error(404, "RepoNotFound"),
    "Hub, gated repository": hub_error(403, "GatedRepo"),
    "Hub, no such revision": hub_error(404, "RevisionNotFound"),
    "Hub, no such file": hub_error(404, "EntryNotFound"),
    "HF_HUB_OFFLINE": OfflineModeIsEnabled("Cannot reach https://huggingface.co: offline mode is enabled."),
    "not cached, local_files_only": LocalEntryNotFoundError("Cannot find the requested files in the disk cache"),
    "transformers, no such repository": raised_from(
        OSError("org/model is not a local folder"), hub_error(404, "RepoNotFound")
    ),
    "a ValueError raised from a connection error": raised_from(
        ValueError("Force download failed"), httpx.ConnectError("refused")
    ),
}


def test_hub_errors_are_those_the_module_names():
    assert isinstance(TRANSIENT["Hub 503"], pinning.HfHubHTTPError)
    assert isinstance(DETERMINISTIC["Hub, no such repository"], RepositoryNotFoundError)
    assert isinstance(DETERMINISTIC["Hub, gated repository"], GatedRepoError)
    assert isinstance(DETERMINISTIC["Hub, no such revision"], RevisionNotFoundError)
    assert isinstance(DETERMINISTIC["Hub, no such file"], EntryNotFoundError)
    assert isinstance(DETERMINISTIC["HF_HUB_OFFLINE"], ConnectionError)  # judged before the transient errors


def test_an_unreachable_hub_is_transient_and_a_file_missing_from_the_cache_offline_is_not(tmp_path, monkeypatch):
    # .ci/run exports HF_HUB_OFFLINE=1, under which huggingface_hub refuses before connecting: this test must connect
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        unreachable = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(httpx.ConnectError) as refused:
        HfApi(endpoint=unreachable).model_info("org/model")
    assert network.is_transient(refused.value)
    with pytest.raises(LocalEntryNotFoundError) as offline:
        hf_hub_download("org/model", "config.json", cache_dir=tmp_path, local_files_only=True)
    assert not network.is_transient(offline.value)


@pytest.mark.parametrize("name", TRANSIENT)
def test_transient_errors_are_retried_then_the_call_succeeds(name, waits, caplog):
    call = failing(TRANSIENT[name], TRANSIENT[name])
    with caplog.at_level(logging.WARNING, logger=network.__name__):
        assert network.retry(call, what="reading the refs of org/model", attempts=3, first_wait_s=2.0) == "done"
    assert call.calls == 3
    assert waits == [2.0, 4.0]  # exponential back-off
    assert [record.getMessage().startswith("reading the refs of org/model failed (") for record in caplog.records] == [
        True,
        True,
    ]
    assert "retrying in 4 s (attempt 3 of 3)" in caplog.records[-1].getMessage()


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_deterministic_errors_are_raised_after_one_attempt(name, waits):
    call = failing(DETERMINISTIC[name])
    with pytest.raises(type(DETERMINISTIC[name])) as raised:
        network.retry(call, what="pinning org/model")
    assert raised.value is DETERMINISTIC[name]
    assert call.calls == 1 and waits == []


def test_spent_attempts_reraise_the_last_error(waits):
    call = failing(*(TimeoutError(f"timed out, attempt {attempt}") for attempt in (1, 2, 3)))
    with pytest.raises(TimeoutError, match="^timed out, attempt 3$"):
        network.retry(call, what="downloading config.json", attempts=3, first_wait_s=0.5)
    assert call.calls == 3 and waits == [0.5, 1.0]
    with pytest.raises(ValueError, match="attempts must be >= 1, got 0"):
        network.retry(call, what="nothing", attempts=0)


def test_the_pin_retries_the_hub_call_that_failed_and_not_the_job(monkeypatch, waits):
    refs = failing(
        httpx.ReadTimeout("timed out"), result=SimpleNamespace(branches=[SimpleNamespace(name="main")], tags=[])
    )
    info = failing(
        hub_error(502),
        result=SimpleNamespace(
            sha="a" * 40,
            siblings=[
                SimpleNamespace(
                    rfilename="model.safetensors", lfs=SimpleNamespace(sha256="1" * 64), blob_id="b", size=3
                )
            ],
        ),
    )
    api = SimpleNamespace(list_repo_refs=lambda repo: refs(), model_info=lambda repo, revision, files_metadata: info())
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: api)
    pinned = pinning.pin(Checkpoint("m", "main", "hub", "org/model", "main", -1))
    assert pinned["commit_sha"] == "a" * 40 and (refs.calls, info.calls) == (2, 2)
    assert waits == [network.FIRST_WAIT_S] * 2
    gone = failing(hub_error(404, "RepoNotFound"))
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: SimpleNamespace(list_repo_refs=lambda repo: gone()))
    with pytest.raises(RepositoryNotFoundError):
        pinning.pin(Checkpoint("m", "main", "hub", "org/gone", "main", -1))
    assert gone.calls == 1
