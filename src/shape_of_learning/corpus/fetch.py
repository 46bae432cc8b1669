"""Obtain a verified raw MediaWiki dump: download (with retries) or a local copy, then decompress and check digests.

Configured in ``config.yaml`` under ``corpus:`` (url, local_path, size, md5, sha256, archive_sha256). A download
that fails transiently is retried, resuming where it broke off (`shape_of_learning.network.retry`); any other
failure fails the job at once.
"""

import hashlib
import logging
import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from tqdm import tqdm

from shape_of_learning import network
from shape_of_learning.corpus.io import ZIP_MAGIC, open_decompressed

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20
_TIMEOUT_S = 60


class ChecksumError(ValueError):
    """A file's size or digest differs from the pinned value."""


class CorpusUnavailableError(RuntimeError):
    """Neither the configured URL nor a local copy could provide the corpus."""


def _how_to_supply(what: str) -> str:
    return (
        f"Download {what} on a machine with network access and set `corpus: local_path: /path/to/it` in "
        "config.yaml (a .zip, .bz2, .gz or the plain XML all work)."
    )


def _digests(path: Path) -> dict:
    md5, sha256, size = hashlib.md5(), hashlib.sha256(), 0
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK_BYTES):
            md5.update(chunk)
            sha256.update(chunk)
            size += len(chunk)
    return {"size": size, "md5": md5.hexdigest(), "sha256": sha256.hexdigest()}


def _mismatches(path: Path, expected: dict) -> list[str]:
    actual = _digests(path)
    return [
        f"{key}: expected {value}, got {actual[key]}"
        for key, value in expected.items()
        if value is not None and actual[key] != value
    ]


def _verify(path: Path, expected: dict, *, ours: bool) -> None:
    """Raise ChecksumError on a mismatch; a file we wrote is moved to ``<file>.corrupt`` so it is never used."""
    mismatches = _mismatches(path, expected)
    if not mismatches:
        return
    message = f"{path}: {'; '.join(mismatches)}."
    if ours:
        corrupt = path.with_name(path.name + ".corrupt")
        path.replace(corrupt)
        message += f" Moved it to {corrupt}; delete that and rerun to fetch it again."
    else:
        message += " This is the configured `corpus: local_path:`; replace it with an intact copy."
    raise ChecksumError(message)


def _download(url: str, dest: Path, attempts: int) -> None:
    """Fetch `url` into `dest`, retrying a transient failure (`network.retry`); each attempt resumes the ``.part``."""
    try:
        network.retry(lambda: _download_once(url, dest), what=f"download of {url}", attempts=attempts)
    except Exception as error:
        if network.is_transient(error):
            raise CorpusUnavailableError(
                f"could not download {url} after {attempts} attempts (last error: {error}); "
                f"this machine may be offline. {_how_to_supply(url)}"
            ) from error
        if isinstance(error, urllib.error.HTTPError):
            raise CorpusUnavailableError(
                f"{url}: HTTP {error.code} {error.reason}. Check `corpus: url:`. {_how_to_supply(url)}"
            ) from error
        raise


def _download_once(url: str, dest: Path) -> None:
    """Fetch `url` into `dest` via ``<dest>.part``, resuming with an HTTP Range request where an earlier attempt
    left a partial file; a connection closed before the announced length raises ConnectionError."""
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=_TIMEOUT_S)
    except urllib.error.HTTPError as error:
        if error.code != 416 or not have:
            raise
        part.unlink()  # 416: our partial file is no prefix of what the server has: start over
        return _download_once(url, dest)
    with response:
        if response.status != 206:  # the server ignored the Range: start over
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        with (
            open(part, "ab" if have else "wb") as out,
            tqdm(desc=dest.name, total=total, initial=have, unit="B", unit_scale=True) as progress,
        ):
            while chunk := response.read(_CHUNK_BYTES):
                out.write(chunk)
                progress.update(len(chunk))
    received = part.stat().st_size
    if total is not None and received < total:
        raise ConnectionError(f"connection closed after {received} of {total} bytes")
    part.replace(dest)


def _zip_member(archive: zipfile.ZipFile, dest: Path) -> str:
    files = [info.filename for info in archive.infolist() if not info.is_dir()]
    if len(files) == 1:
        return files[0]
    named = [name for name in files if Path(name).name in (dest.name, dest.stem)]
    if len(named) == 1:
        return named[0]
    raise ValueError(
        f"{archive.filename} holds {len(files)} files {files[:5]}; expected one, or one named "
        f"{dest.name!r} or {dest.stem!r} like the destination"
    )


def _decompress(source: Path, part: Path, dest: Path) -> None:
    """Write the uncompressed content of `source` (zip, bz2, gz or plain) to `part`."""
    with open(source, "rb") as probe:
        is_zip = probe.read(4) == ZIP_MAGIC
    if is_zip:
        with zipfile.ZipFile(source) as archive:
            member = _zip_member(archive, dest)
            with archive.open(member) as stream, open(part, "wb") as out:
                shutil.copyfileobj(stream, out, _CHUNK_BYTES)
    else:
        with open_decompressed(source) as stream, open(part, "wb") as out:
            shutil.copyfileobj(stream, out, _CHUNK_BYTES)


def obtain(
    dest: Path,
    *,
    url: str | None,
    local_path: str | Path | None,
    size: int | None,
    md5: str | None,
    sha256: str | None,
    archive_sha256: str | None = None,
    attempts: int = 5,
) -> Path:
    """Produce the verified, uncompressed dump at `dest` and return `dest`.

    Source: `local_path` if given (wins over `url`), otherwise `url`, downloaded to ``<dest dir>/downloads/<name>``
    (kept, so a rerun needs no network) through a ``.part`` file, in up to `attempts` attempts while it fails
    transiently, with exponential back-off (`network.retry`), resuming where the server supports Range requests.
    The source may be a zip (its only member, or the member named like `dest` or its stem), .bz2, .gz or the plain
    XML, detected by content.

    `archive_sha256` checks the source file as obtained; `size`, `md5`, `sha256` check the uncompressed dump. Digests
    left None are not checked. A mismatch raises ChecksumError naming the file and both digests; a bad file this
    function wrote is moved to ``<file>.corrupt`` so it is never used (a bad `local_path` is left where it is).
    An existing `dest` that verifies is returned as is.
    """
    dest = Path(dest)
    expected = {"size": size, "md5": md5, "sha256": sha256}
    if dest.is_file():
        mismatches = _mismatches(dest, expected)
        if not mismatches:
            logger.info("%s already present and verified", dest)
            return dest
        logger.warning("%s exists but fails verification (%s); obtaining it again", dest, "; ".join(mismatches))
    if local_path is not None:
        source = Path(local_path).expanduser()
        if not source.is_file():
            raise FileNotFoundError(
                f"`corpus: local_path: {local_path}` does not exist. Point it at a copy of the "
                f"corpus{f' (from {url})' if url else ''}, or remove the key to download it."
            )
    elif url is not None:
        source = dest.parent / "downloads" / (Path(urlparse(url).path).name or "download")
        if not (source.is_file() and not _mismatches(source, {"sha256": archive_sha256})):
            _download(url, source, attempts)
    else:
        raise CorpusUnavailableError(
            f"no source for {dest}: set `corpus: url:` or `corpus: local_path:` in config.yaml."
        )
    _verify(source, {"sha256": archive_sha256}, ours=local_path is None)
    logger.info("extracting %s to %s", source, dest)
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        _decompress(source, part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(dest)
    _verify(dest, expected, ours=True)
    return dest
