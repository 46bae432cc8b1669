"""Retrying a network call, and only it, when its failure is transient: a dropped or refused connection, a timeout,
HTTP 408, 429 or a server error.

A deterministic failure is raised at once: a missing repository, revision or file (404, `RepositoryNotFoundError`,
`RevisionNotFoundError`, `EntryNotFoundError`), a gated repository, `HF_HUB_OFFLINE` (`OfflineModeIsEnabled`), a
file absent from the cache with `local_files_only`, a bad digest, any ValueError: a retry would repeat it. Libraries
wrap what the transport raised (transformers raises OSError from huggingface_hub's `LocalEntryNotFoundError` from
the connection error), so a failure is judged by the first link of its `raise ... from` chain that says which.

The modules that call the Hub look `huggingface_hub.HfApi` and `hf_hub_download` up when they call them: the package
imports them on first use, with its HTTP stack (0.1-0.15 s), which every Snakemake process parsing the workflow would
otherwise pay without calling the Hub: a SLURM job's two among them (docs/cluster.md).
"""

import http.client
import logging
import os
import urllib.error
from collections.abc import Callable
from time import sleep
from typing import TypeVar

from huggingface_hub import constants
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.utils import httpx  # the HTTP client huggingface_hub raises the errors of

logger = logging.getLogger(__name__)

ATTEMPTS = 3
FIRST_WAIT_S = 2.0  # the wait before the second attempt; each further wait doubles
# Not 501 Not Implemented or 505 HTTP Version Not Supported: the server would answer the same again.
TRANSIENT_STATUS = frozenset({408, 429, *range(500, 600)} - {501, 505})
# As huggingface_hub's own back-off: timeouts, dropped connections, a response cut short.
TRANSIENT_ERRORS = (
    ConnectionError,
    TimeoutError,
    http.client.IncompleteRead,
    http.client.BadStatusLine,
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)

Result = TypeVar("Result")


def retry(
    call: Callable[[], Result], *, what: str, attempts: int = ATTEMPTS, first_wait_s: float = FIRST_WAIT_S
) -> Result:
    """``call()``'s result, calling it up to `attempts` times while it fails transiently (`is_transient`), waiting
    `first_wait_s`, then twice as long before each further attempt, and logging each retry with `what` failed.

    A deterministic failure is raised at once, after one attempt; the last transient one once `attempts` are spent.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    for attempt in range(1, attempts):
        try:
            return call()
        except Exception as error:
            if not is_transient(error):
                raise
            wait = first_wait_s * 2 ** (attempt - 1)
            logger.warning(
                "%s failed (%s: %s); retrying in %.0f s (attempt %d of %d)",
                what,
                type(error).__name__,
                " ".join(str(error).split()),
                wait,
                attempt + 1,
                attempts,
            )
            sleep(wait)
    return call()


def is_transient(error: BaseException) -> bool:
    """Whether `error`, or the error it was raised from, is a failure of the network that a later attempt may not
    meet (module docstring)."""
    while error is not None:
        if isinstance(error, (OfflineModeIsEnabled, ValueError)):  # OfflineModeIsEnabled is a ConnectionError
            return False
        status = _http_status(error)
        if status is not None:
            return status in TRANSIENT_STATUS
        if isinstance(error, TRANSIENT_ERRORS):
            return True
        if isinstance(error, urllib.error.URLError):  # the reason: a socket error, or a message (a bad URL)
            return isinstance(error.reason, OSError)
        error = error.__cause__
    return False


def _http_status(error: BaseException) -> int | None:
    """The status of an HTTP error response (urllib's, huggingface_hub's, httpx's), None for any other error."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code
    if isinstance(error, (HfHubHTTPError, httpx.HTTPStatusError)):
        return error.response.status_code
    return None


def go_offline() -> None:
    """Read the Hugging Face cache only, from now on, in this process and its children: huggingface_hub, and
    transformers through it, refuse every HTTP request (`OfflineModeIsEnabled`), as under HF_HUB_OFFLINE=1. The
    library reads the variable once, at import, and its `constants.is_offline_mode()` at each request: both are
    set."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True
