"""Corpus stage: obtain (offline, against a local HTTP server), clean (hand-written dumps, the real enwik8 prefix),
sample windows."""

import bz2
import gzip
import hashlib
import http.server
import io
import json
import socket
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from shape_of_learning.corpus import (
    ChecksumError,
    CorpusUnavailableError,
    clean_dump,
    clean_wikitext,
    gensim_sample_path,
    obtain,
    read_windows,
    sample_windows,
    write_windows,
)
from shape_of_learning.corpus import clean as clean_module
from shape_of_learning import network

DATA = Path(__file__).parent / "data"
ENWIK8_HEAD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "enwik8-head-4154064.xml"
ENWIK8_HEAD_SHA256 = "d8b3b95fb4993726ea7dcc93ae3c9e08a1a04cc540d05d7656fd267cc8ab5d6a"
GENSIM_SAMPLE_SHA256 = "34c1c63050c87cc8477b9ae36b1cb0edf372612c92938b742e579a7109c20fa4"

MARKUP_PAGES = [
    # nested templates, bold, italics
    "Jean was a French writer.\nHe wrote books.",
    # a wikitext table with a nested table and a template inside
    "Before the table.\nAfter the table.",
    # self-closing refs (<ref name=x/>), refs with templates and external links, <references/>; headings kept
    "A claim. Another. A cited claim. Done.\nReferences",
    # <math> holding braces, <code>, <pre>
    "Euler's identity is famous.\nCall to greet.\nAfter the code block.",
    # comments (holding a template, over two lines), tags with content kept, <br> as a line break, HTML tables
    "Visible text.\nRed words\nand small ones.\nBelow.",
    # entities double-escaped in the XML, decoded after markup is stripped: &amp;lt;b&amp;gt; is visible text
    'Fish & chips cost <3 €\xa0today — café été.\nShown markup: <b>bold</b> stays literal.\nHe said "yes".',
    # file/image/media links with nested links in captions, piped links, link trails, inline interwiki and
    # category links, external links with and without labels, bare URLs, categories, interlanguage links
    "Jean lived in the capital and Lyons.\nMaps follow.\nHe read a definition and the writers' list.\n"
    "See the page, and too.",
    "Intro line.\nSection one\nFirst item\nNested item\nNumbered\nIndented\nTerm : definition\nSub\nClosing paragraph.",
    # then: a redirect, a Talk page, a page of markup only -- all dropped
]
MALFORMED_PAGES = [
    "Prose before.\nInfobox broken|name=Never closed\nMore prose after the broken template.",  # unclosed {{ is literal
    "Stray closers and a lone opener do no harm.\nStill here.",
    "Bad bytes here, valid café kept.",  # invalid UTF-8 bytes dropped
    "A dangling reference text\nNext line stays.\nText before",  # unclosed <ref> tag dropped, comment to page end
    # Wikipedia:Sandbox, namespace 4 by title prefix (no <ns> in this format): dropped
    "This page must survive the broken pages before it.",
    "The dump ends inside this page unfinished",  # the dump is cut inside this page, as enwik8 is
]


def expected_text(pages: list[str]) -> str:
    return "\n\n".join(pages) + "\n"


def clean(src: Path, out_dir: Path) -> tuple[str, dict]:
    stats = clean_dump(src, out_dir / "clean.txt", out_dir / "clean.stats.json")
    assert json.loads((out_dir / "clean.stats.json").read_text()) == stats
    return (out_dir / "clean.txt").read_text(encoding="utf-8"), stats


# ---------------------------------------------------------------------------------------------------- clean


def test_every_markup_case_cleans_to_known_prose(tmp_path):
    text, stats = clean(DATA / "markup.xml", tmp_path)
    assert text == expected_text(MARKUP_PAGES)
    assert {key: stats[key] for key in ("pages_in", "pages", "redirects", "other_namespaces", "empty_pages")} == {
        "pages_in": 11,
        "pages": 8,
        "redirects": 1,
        "other_namespaces": 1,
        "empty_pages": 1,
    }
    raw = (DATA / "markup.xml").read_bytes()
    assert stats["bytes_in"] == len(raw) and stats["bytes_out"] == len(text.encode())
    assert stats["distinct_bytes_in"] == len(set(raw)) and stats["distinct_chars_out"] == len(set(text))
    assert stats["sha256_in"] == hashlib.sha256(raw).hexdigest()


def test_malformed_markup_never_swallows_the_next_page(tmp_path):
    text, stats = clean(DATA / "malformed.xml", tmp_path)
    assert text == expected_text(MALFORMED_PAGES)
    assert stats["invalid_utf8_pages"] == 1 and stats["other_namespaces"] == 1


@pytest.mark.parametrize(
    "wikitext, prose",
    [
        ("A {{cite|x|}} b.", "A b."),  # "|}}" closes the template, not a table
        ("{{Infobox\n| name = x\n|}}\nProse.", "Prose."),
        (
            "[http://example.org Talk at [[University of California, Berkeley|UC Berkeley]], 1962] x",
            "Talk at UC Berkeley, 1962 x",
        ),
        ("{{office-table}}\n|President\n|-\n|Someone\n|}\nAfter.", "After."),  # rows of a table a template opened
        ("[[Image:a.jpg|thumb|See [b] and [[c|d]]]] Text.", "Text."),  # single brackets inside a caption
        ("'''''Both''''' and ''[[link]]''.", "Both and link."),
    ],
)
def test_markup_met_in_real_dumps(wikitext, prose):
    assert clean_wikitext(wikitext) == prose


@pytest.mark.parametrize("name", ["markup.xml", "malformed.xml"])
def test_output_is_independent_of_stream_block_size(tmp_path, monkeypatch, name):
    whole, _ = clean(DATA / name, tmp_path)
    monkeypatch.setattr(clean_module, "_BLOCK_BYTES", 13)  # pages and "<page>" tags split across reads
    (tmp_path / "small").mkdir()
    assert clean(DATA / name, tmp_path / "small")[0] == whole


@pytest.mark.parametrize("compress", [bz2.compress, gzip.compress])
def test_compressed_dumps_clean_like_the_plain_one(tmp_path, compress):
    src = tmp_path / "dump.xml.compressed"
    src.write_bytes(compress((DATA / "markup.xml").read_bytes()))
    text, stats = clean(src, tmp_path)
    assert text == expected_text(MARKUP_PAGES)
    assert stats["bytes_in"] == (DATA / "markup.xml").stat().st_size


def test_clean_refuses_a_zip_with_the_fix(tmp_path):
    with zipfile.ZipFile(tmp_path / "dump.zip", "w") as archive:
        archive.write(DATA / "markup.xml", "markup.xml")
    with pytest.raises(ValueError, match="zip archive.*obtain"):
        clean_dump(tmp_path / "dump.zip", tmp_path / "clean.txt", tmp_path / "stats.json")
    assert not (tmp_path / "clean.txt").exists()


@pytest.fixture(scope="module")
def enwik8_head_clean(tmp_path_factory):
    if not ENWIK8_HEAD.is_file():
        pytest.skip(f"real enwik8 prefix not found at {ENWIK8_HEAD} (shared/data/ beside the repo)")
    out_dir = tmp_path_factory.mktemp("enwik8_head")
    text, stats = clean(ENWIK8_HEAD, out_dir)
    return out_dir / "clean.txt", text, stats


def test_real_enwik8_prefix(enwik8_head_clean):
    _, text, stats = enwik8_head_clean
    assert stats["sha256_in"] == ENWIK8_HEAD_SHA256 and stats["bytes_in"] == 4_154_064
    assert {
        key: stats[key] for key in ("pages_in", "pages", "redirects", "other_namespaces", "invalid_utf8_pages")
    } == {"pages_in": 491, "pages": 248, "redirects": 242, "other_namespaces": 1, "invalid_utf8_pages": 0}
    assert stats["distinct_bytes_in"] == 200  # the byte alphabet of the raw XML; the whole enwik8 has 205
    assert text.startswith(
        "Anarchism originated as a term of abuse first used against early working class radicals "
        "including the Diggers of the English Revolution and the sans-culottes of the French "
        "Revolution. Whilst the term"
    )
    for markup in ("{{", "}}", "[[", "]]", "{|", "<ref", "&lt;", "&quot;", "'''", "thumb|", "[[Category:", "http://"):
        assert markup not in text, markup


def test_cleaning_is_deterministic(tmp_path, enwik8_head_clean):
    _, text, stats = enwik8_head_clean
    again, again_stats = clean(ENWIK8_HEAD, tmp_path)
    assert again == text and again_stats["sha256_out"] == stats["sha256_out"]


def test_gensim_demo_sample_obtains_and_cleans(tmp_path):
    pytest.importorskip("gensim", reason="gensim (demo extra) not installed")
    dest = obtain(
        tmp_path / "enwiki-sample.xml",
        url=None,
        local_path=gensim_sample_path(),
        size=None,
        md5=None,
        sha256=GENSIM_SAMPLE_SHA256,
    )
    _, stats = clean(dest, tmp_path)
    assert (stats["pages_in"], stats["pages"], stats["distinct_bytes_in"]) == (206, 106, 201)


def test_gensim_sample_path_names_the_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gensim", None)
    with pytest.raises(ImportError, match="pip install gensim"):
        gensim_sample_path()


# ---------------------------------------------------------------------------------------------------- obtain

PAYLOAD = (DATA / "markup.xml").read_bytes()
PINNED = {"size": len(PAYLOAD), "md5": hashlib.md5(PAYLOAD).hexdigest(), "sha256": hashlib.sha256(PAYLOAD).hexdigest()}


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


ZIPPED = zipped({"enwik8": PAYLOAD})


@pytest.mark.parametrize(
    "packed", [ZIPPED, bz2.compress(PAYLOAD), gzip.compress(PAYLOAD), PAYLOAD], ids=["zip", "bz2", "gz", "plain"]
)
def test_obtain_from_local_copy(tmp_path, packed):
    local = tmp_path / "copy"
    local.write_bytes(packed)
    dest = obtain(
        tmp_path / "raw" / "enwik8",
        url="http://unused.invalid/enwik8.zip",
        local_path=local,
        archive_sha256=hashlib.sha256(packed).hexdigest(),
        **PINNED,
    )
    assert dest.read_bytes() == PAYLOAD
    assert sorted(p.name for p in dest.parent.iterdir()) == ["enwik8"]  # no .part left


def test_obtain_picks_the_zip_member_named_like_dest(tmp_path):
    local = tmp_path / "both.zip"
    local.write_bytes(zipped({"README": b"not the dump", "dir/enwik8": PAYLOAD}))
    assert obtain(tmp_path / "enwik8", url=None, local_path=local, **PINNED).read_bytes() == PAYLOAD
    with pytest.raises(ValueError, match="holds 2 files"):
        obtain(tmp_path / "other.xml", url=None, local_path=local, **PINNED)


def test_obtain_digest_mismatch_names_both_digests_and_moves_the_file_aside(tmp_path):
    local = tmp_path / "enwik8.zip"
    local.write_bytes(ZIPPED)
    dest = tmp_path / "raw" / "enwik8"
    wrong = "0" * 64
    with pytest.raises(ChecksumError) as error:
        obtain(dest, url=None, local_path=local, size=None, md5=None, sha256=wrong)
    assert str(dest) in str(error.value) and wrong in str(error.value) and PINNED["sha256"] in str(error.value)
    assert not dest.exists() and (tmp_path / "raw" / "enwik8.corrupt").read_bytes() == PAYLOAD


def test_obtain_leaves_a_bad_local_copy_in_place(tmp_path):
    local = tmp_path / "enwik8.zip"
    local.write_bytes(ZIPPED)
    with pytest.raises(ChecksumError, match="sha256: expected 0+, got [0-9a-f]{64}.*local_path"):
        obtain(tmp_path / "enwik8", url=None, local_path=local, archive_sha256="0" * 64, **PINNED)
    assert local.exists() and not (tmp_path / "enwik8").exists()


class _DumpHandler(http.server.BaseHTTPRequestHandler):
    """Serves server.payload; drops the connection mid-body server.drops times; honours Range if asked to."""

    def do_GET(self):
        server = self.server
        server.ranges.append(self.headers.get("Range"))
        if server.status != 200:
            self.send_error(server.status)
            return
        start = 0
        if server.supports_range and self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(server.payload) - 1}/{len(server.payload)}")
        else:
            self.send_response(200)
        body = server.payload[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.drops:
            server.drops -= 1
            body = body[: len(body) // 2]  # then HTTP/1.0 closes the connection: the client sees a short body
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve(monkeypatch):
    monkeypatch.setattr(network, "sleep", lambda seconds: None)
    servers = []

    def start(payload=ZIPPED, *, drops=0, supports_range=True, status=200):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DumpHandler)
        server.payload, server.drops, server.supports_range, server.status = payload, drops, supports_range, status
        server.ranges = []
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_port}/enwik8.zip"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("supports_range", [True, False])
def test_obtain_downloads_and_recovers_from_a_dropped_connection(tmp_path, serve, supports_range):
    server, url = serve(drops=1, supports_range=supports_range)
    dest = obtain(
        tmp_path / "enwik8", url=url, local_path=None, archive_sha256=hashlib.sha256(ZIPPED).hexdigest(), **PINNED
    )
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges == [None, f"bytes={len(ZIPPED) // 2}-"]  # the retry resumed from the partial file
    assert (tmp_path / "downloads" / "enwik8.zip").read_bytes() == ZIPPED
    assert not (tmp_path / "downloads" / "enwik8.zip.part").exists()
    obtain(dest, url=url, local_path=None, **PINNED)  # present and verified: no new request
    assert len(server.ranges) == 2


def test_obtain_moves_a_corrupt_download_aside(tmp_path, serve):
    _, url = serve()
    with pytest.raises(ChecksumError, match="enwik8.zip.corrupt"):
        obtain(tmp_path / "enwik8", url=url, local_path=None, archive_sha256="0" * 64, **PINNED)
    assert (tmp_path / "downloads" / "enwik8.zip.corrupt").exists()
    assert not (tmp_path / "downloads" / "enwik8.zip").exists() and not (tmp_path / "enwik8").exists()


def test_obtain_does_not_retry_a_missing_url(tmp_path, serve):
    server, url = serve(status=404)
    with pytest.raises(CorpusUnavailableError, match="HTTP 404.*corpus: url:.*corpus: local_path:"):
        obtain(tmp_path / "enwik8", url=url, local_path=None, **PINNED)
    assert len(server.ranges) == 1


def test_obtain_retries_a_server_error_until_its_attempts_are_spent(tmp_path, serve):
    server, url = serve(status=503)
    with pytest.raises(CorpusUnavailableError, match=f"could not download {url} after 3 attempts .*503"):
        obtain(tmp_path / "enwik8", url=url, local_path=None, attempts=3, **PINNED)
    assert len(server.ranges) == 3


def test_obtain_offline_says_what_is_missing_and_how_to_supply_it(tmp_path, monkeypatch):
    monkeypatch.setattr(network, "sleep", lambda seconds: None)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/enwik8.zip"
    with pytest.raises(CorpusUnavailableError) as error:
        obtain(tmp_path / "enwik8", url=url, local_path=None, attempts=2, **PINNED)
    assert f"could not download {url} after 2 attempts" in str(error.value)
    assert "offline" in str(error.value) and "`corpus: local_path:" in str(error.value)


def test_obtain_without_any_source(tmp_path):
    with pytest.raises(CorpusUnavailableError, match="set `corpus: url:` or `corpus: local_path:`"):
        obtain(tmp_path / "enwik8", url=None, local_path=None, **PINNED)
    with pytest.raises(FileNotFoundError, match="`corpus: local_path: .*nowhere.zip` does not exist"):
        obtain(tmp_path / "enwik8", url=None, local_path=tmp_path / "nowhere.zip", **PINNED)


# ---------------------------------------------------------------------------------------------------- windows


@pytest.fixture(params=["made-up prose", "enwik8 prefix"])
def clean_text(request, tmp_path):
    """A cleaned text and its sha256: prose this test writes (words of 1-12 letters, single spaces and line breaks),
    and the real cleaned enwik8 prefix where ../shared/data has it."""
    if request.param == "enwik8 prefix":
        path, text, stats = request.getfixturevalue("enwik8_head_clean")
        return path, text, stats["sha256_out"]
    rng = np.random.default_rng(0)
    ends = np.cumsum(rng.integers(1, 13, 150_000) + 1) - 1  # each word is followed by a space or a line break
    letters = rng.integers(ord("a"), ord("z") + 1, ends[-1] + 1).astype(np.uint8)
    letters[ends] = np.where(rng.random(len(ends)) < 0.95, ord(" "), ord("\n"))
    text = letters.tobytes().decode()
    path = tmp_path / "clean.txt"
    path.write_text(text)
    return path, text, hashlib.sha256(text.encode()).hexdigest()


def test_windows_are_deterministic_non_overlapping_and_start_at_words(clean_text):
    path, text, sha256 = clean_text
    windows = sample_windows(path, n_windows=1000, window_chars=512, seed=7)
    pd.testing.assert_frame_equal(windows, sample_windows(path, n_windows=1000, window_chars=512, seed=7))
    assert not windows["start"].equals(sample_windows(path, n_windows=1000, window_chars=512, seed=8)["start"])
    assert windows["window"].tolist() == list(range(1000))
    assert not windows["start"].is_monotonic_increasing  # consumption order is random, not text order
    starts = windows["start"].sort_values().to_numpy()
    assert (starts[1:] - starts[:-1] >= 512).all() and starts[-1] + 512 <= len(text)
    assert all(row.text == text[row.start : row.start + 512] for row in windows.itertuples())
    assert all(start == 0 or (text[start - 1].isspace() and not text[start].isspace()) for start in starts)
    assert windows.attrs["source_sha256"] == sha256 and windows.attrs["source_chars"] == len(text)


def test_windows_tile_a_text_with_no_room_to_spare(tmp_path):
    path = tmp_path / "clean.txt"
    path.write_text("abcdefghij" * 6)
    starts = sample_windows(path, n_windows=6, window_chars=10, seed=0)["start"]
    assert sorted(starts) == [0, 10, 20, 30, 40, 50]


def test_too_little_text_states_the_numbers(tmp_path):
    path = tmp_path / "clean.txt"
    path.write_text("x" * 999)
    with pytest.raises(ValueError, match=r"has 999 characters, but 10 windows x 100 characters need 1,000\. Lower"):
        sample_windows(path, n_windows=10, window_chars=100, seed=0)
    with pytest.raises(ValueError, match="n_windows >= 1"):
        sample_windows(path, n_windows=0, window_chars=100, seed=0)


def test_windows_file_round_trip(tmp_path):
    text_path = tmp_path / "clean.txt"
    text_path.write_text("Some words of prose, repeated. " * 200)
    windows = sample_windows(text_path, n_windows=20, window_chars=64, seed=3)
    out = tmp_path / "corpus" / "windows.parquet"
    write_windows(windows, out)
    assert sorted(p.name for p in out.parent.iterdir()) == ["windows.parquet"]  # no temporary left
    assert read_windows(out) == windows["text"].tolist()
    assert json.loads(pq.read_schema(out).metadata[b"shape_of_learning.windows"]) == {
        "seed": 3,
        "n_windows": 20,
        "window_chars": 64,
        "source": str(text_path),
        "source_sha256": hashlib.sha256(text_path.read_bytes()).hexdigest(),
        "source_chars": len(text_path.read_text()),
    }
    pd.testing.assert_frame_equal(pd.read_parquet(out), windows, check_dtype=False)


def test_write_windows_rejects_a_frame_without_metadata(tmp_path):
    with pytest.raises(ValueError, match="make it with sample_windows"):
        write_windows(pd.DataFrame({"window": [0], "start": [0], "text": ["x"]}), tmp_path / "windows.parquet")
