"""Streaming MediaWiki cleaner: raw XML dump -> article prose, as the paper does for enwik8 (section 2.1).

The paper removes "all the code, media, and HTML tags". We keep what a reader sees as article prose: section
headings, paragraphs, list items, the visible text of links. Everything else goes: the XML envelope and page
metadata, redirects, pages outside the article namespace (0), templates ``{{...}}`` (nested), tables ``{|...|}`` and
``<table>``, ``<ref>``, ``<math>``, ``<code>``, ``<pre>`` and similar elements with their content, comments, all other
HTML tags (their content is kept), file/image/media links with their captions, categories, interlanguage links,
external-link URLs, bold/italic quotes, list and heading markers. HTML entities are decoded.

Order matters: dump text is XML-escaped, so ``<ref>`` arrives as ``&lt;ref&gt;`` and a literal ``<`` in an article as
``&amp;lt;``. We decode the XML layer first, strip markup, and decode HTML entities last, so ``&amp;lt;b&amp;gt;``
becomes the visible text ``<b>`` instead of a tag to strip.

Malformed markup follows MediaWiki's own rendering where that is well defined: an unclosed ``{{`` or ``{|`` is
literal text (we drop the braces, keep the words), an unclosed comment runs to the end of its page. Every rule works
on one page at a time, so nothing can swallow the next page. Invalid UTF-8 bytes are dropped (and counted).
"""

import hashlib
import html
import json
import logging
import re
import time
from pathlib import Path
from xml.sax.saxutils import unescape as xml_unescape

import numpy as np
from tqdm import tqdm

from shape_of_learning.corpus.io import atomic_path, open_decompressed

logger = logging.getLogger(__name__)

_BLOCK_BYTES = 1 << 22
_PAGE_OPEN = b"<page>"
_NAMESPACE = re.compile(rb'<namespace key="(-?\d+)"[^>]*>([^<]*)</namespace>')
_REDIRECT = re.compile(rb"\s*#redirect", re.IGNORECASE)

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# Elements dropped with their content: footnotes, formulas, code, galleries, and HTML tables.
_DROPPED_TAGS = (
    "ref|references|math|chem|ce|code|pre|source|syntaxhighlight|timeline|gallery|imagemap|hiero|"
    "score|graph|includeonly|table"
)
_DROPPED_ELEMENT = re.compile(
    rf"<(?:{_DROPPED_TAGS})\b[^<>]*?/>|<({_DROPPED_TAGS})\b[^<>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE
)
# Template braces anywhere; table braces only at line start, as MediaWiki parses them ("{{x|}}" holds no table end).
_BRACE_TOKEN = re.compile(r"\{\{|\}\}|^[ \t:]*\{\||^[ \t]*\|\}(?!\})", re.MULTILINE)
# Rows of a table whose "{|" came from a template ({{office-table}}) survive the brace scan; they start with | or !.
_TABLE_ROW = re.compile(r"^[ \t]*[|!].*$", re.MULTILINE)
# "[url label]" -> label; the label may hold wikilinks, resolved later.
_EXTERNAL_LINK = re.compile(
    r"\[(?:(?:https?|ftp|news|irc|gopher|mailto):|//)[^\s\[\]]*"
    r"(?:[ \t]+([^\[\]\n]*(?:\[\[[^\[\]\n]*\]\][^\[\]\n]*)*))?\]"
)
_BARE_URL = re.compile(r"\b(?:https?|ftp)://[^\s\]]*")
# A link with no "[[" inside (single-bracket groups allowed), so caption links resolve before their image link.
_INNERMOST_LINK = re.compile(r"\[\[([^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]\]")
_DROPPED_LINK_NAMESPACES = frozenset({"file", "image", "media", "category"})
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z]{2,8})*|simple")
_LINE_BREAK = re.compile(r"<br\b[^<>]*>", re.IGNORECASE)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*\b[^<>]*>")
_HEADING = re.compile(r"^=+[ \t]*(.*?)[ \t]*=+[ \t]*$", re.MULTILINE)
_LINE_MARKUP = re.compile(r"^(?:[*#:;]+[ \t]*|-{4,})", re.MULTILINE)
_INLINE_MARKUP = re.compile(r"'{2,}|__[A-Z]+__|\[\[|\]\]")
_SPACES = re.compile(r"[ \t\r\f\v]+")
_WORD = re.compile(r"\w")


def _drop_templates_and_tables(text: str) -> str:
    """Remove outermost ``{{...}}`` and ``{|...|}`` spans by a brace-depth scan; unmatched braces are dropped alone."""
    spans, open_tokens = [], []
    for token in _BRACE_TOKEN.finditer(text):
        kind = token.group().strip(" \t:")
        if kind in ("{{", "{|"):
            open_tokens.append((kind, token.start(), token.end()))
            continue
        opener = "{{" if kind == "}}" else "{|"
        depth = next((d for d in range(len(open_tokens) - 1, -1, -1) if open_tokens[d][0] == opener), None)
        if depth is None:  # stray closer
            spans.append((token.start(), token.end()))
            continue
        spans += [(start, end) for _, start, end in open_tokens[depth + 1 :]]  # openers never closed inside it
        spans.append((open_tokens[depth][1], token.end()))
        del open_tokens[depth:]
    spans += [(start, end) for _, start, end in open_tokens]
    if not spans:
        return text
    kept, position = [], 0
    for start, end in sorted(spans):
        if start >= position:
            kept.append(text[position:start])
        position = max(position, end)
    kept.append(text[position:])
    return "".join(kept)


def _link_text(match: re.Match) -> str:
    target, pipe, label = match.group(1).partition("|")
    prefix, colon, _ = target.partition(":")
    if colon:  # "[[:Category:X]]" has an empty prefix: an inline link, kept
        prefix = prefix.strip().lower()
        if prefix in _DROPPED_LINK_NAMESPACES or _LANGUAGE_CODE.fullmatch(prefix):
            return ""
    return label if pipe and label else target.lstrip(":")


def clean_wikitext(text: str) -> str:
    """Prose of one article's wikitext (already XML-decoded): one paragraph per line, no markup.

    Lines with no letter or digit left (bare punctuation from removed markup) are dropped.
    """
    text = _COMMENT.sub("", text)
    text = _DROPPED_ELEMENT.sub("", text)
    text = _drop_templates_and_tables(text)
    text = _TABLE_ROW.sub("", text)
    text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
    text = _BARE_URL.sub("", text)
    replaced = 1
    while replaced and "[[" in text:
        text, replaced = _INNERMOST_LINK.subn(_link_text, text)
    text = _HTML_TAG.sub("", _LINE_BREAK.sub("\n", text))
    text = _HEADING.sub(r"\1", text)
    text = _LINE_MARKUP.sub("", text)
    text = _INLINE_MARKUP.sub("", text)
    text = _SPACES.sub(" ", html.unescape(text))
    return "\n".join(line for line in map(str.strip, text.split("\n")) if _WORD.search(line))


def _pieces(stream, on_block):
    """Yield the dump split at each ``<page>``: the header first, then one page per piece (the last may be cut)."""
    buffer = b""
    while block := stream.read(_BLOCK_BYTES):
        on_block(block)
        buffer += block
        cut = buffer.rfind(_PAGE_OPEN)
        if cut > 0:
            yield from buffer[:cut].split(_PAGE_OPEN)
            buffer = buffer[cut:]
    yield from buffer.split(_PAGE_OPEN)


def _between(piece: bytes, start_tag: bytes, end_tag: bytes) -> bytes | None:
    start = piece.find(start_tag)
    if start < 0:
        return None
    start += len(start_tag)
    end = piece.find(end_tag, start)
    return piece[start : end if end >= 0 else len(piece)]


def _page_wikitext(piece: bytes) -> bytes:
    """The ``<text>`` body of a page; up to the end of the piece if the dump was cut inside it."""
    start = piece.find(b"<text")
    if start < 0:
        return b""
    open_end = piece.find(b">", start)
    if open_end < 0 or piece[open_end - 1 : open_end] == b"/":
        return b""
    end = piece.find(b"</text>", open_end)
    return piece[open_end + 1 : end if end >= 0 else len(piece)]


def _article_prose(piece: bytes, title: bytes, namespace_prefixes: dict[bytes, int], stats: dict) -> str | None:
    """A page's prose, or None for a page that is not an article with prose (counted in `stats` by why)."""
    ns = _between(piece, b"<ns>", b"</ns>")
    prefix = title[: title.find(b":") + 1]
    if (int(ns) if ns is not None else namespace_prefixes.get(prefix, 0)) != 0:
        stats["other_namespaces"] += 1
        return None
    raw = _page_wikitext(piece)
    if _REDIRECT.match(raw):
        stats["redirects"] += 1
        return None
    try:
        wikitext = raw.decode("utf-8")
    except UnicodeDecodeError:
        stats["invalid_utf8_pages"] += 1
        wikitext = raw.decode("utf-8", errors="ignore")
    prose = clean_wikitext(xml_unescape(wikitext, {"&quot;": '"', "&apos;": "'"}))
    if not prose:
        stats["empty_pages"] += 1
        return None
    return prose


def clean_dump(src: Path, text_out: Path, stats_out: Path) -> dict:
    """Clean a MediaWiki XML export (plain, .bz2 or .gz) into article prose, streaming page by page.

    Keeps namespace-0 articles only: the namespace comes from ``<ns>`` where the dump has it, otherwise from the
    title prefix and the dump's ``<siteinfo>`` namespace list (enwik8's 2006 export format has no ``<ns>``). Redirects
    and articles left with no prose are skipped. Output: UTF-8, one paragraph per line, pages separated by a blank
    line, in dump order. Both outputs are written atomically (temporary name, then rename).

    Returns the stats, also written as JSON to `stats_out`: bytes_in (uncompressed XML), bytes_out, pages (written),
    pages_in, redirects, other_namespaces, empty_pages, invalid_utf8_pages, distinct_bytes_in (byte alphabet of the
    raw input: 205 for the whole enwik8, the paper's "205 distinct characters"), distinct_chars_out, sha256_in,
    sha256_out, seconds.
    """
    src, text_out, stats_out = Path(src), Path(text_out), Path(stats_out)
    started = time.perf_counter()
    tally = _Tally()
    with (
        open_decompressed(src) as stream,
        atomic_path(text_out) as text_tmp,
        open(text_tmp, "wb") as out,
        tqdm(desc=f"cleaning {src.name}", unit="B", unit_scale=True) as progress,
    ):

        def count_block(block: bytes) -> None:
            tally.read(block)
            progress.update(len(block))

        _write_articles(_pieces(stream, count_block), out, tally)
    stats = tally.totals(src, time.perf_counter() - started)
    with atomic_path(stats_out) as stats_tmp:
        stats_tmp.write_text(json.dumps(stats, indent=2) + "\n")
    logger.info(
        "cleaned %s: %d of %d pages, %d -> %d bytes in %.1f s",
        src,
        stats["pages"],
        stats["pages_in"],
        stats["bytes_in"],
        stats["bytes_out"],
        stats["seconds"],
    )
    return stats


# What `clean_dump` counts, in the order its stats list them
_COUNTED = (
    "bytes_in",
    "bytes_out",
    "pages",
    "pages_in",
    "redirects",
    "other_namespaces",
    "empty_pages",
    "invalid_utf8_pages",
)


class _Tally:
    """What `clean_dump` counts as it streams: the bytes read (their alphabet and hash), the pages by fate, and the
    prose written (its characters and hash)."""

    def __init__(self):
        self.byte_counts = np.zeros(256, dtype=np.int64)
        self.sha_in, self.sha_out = hashlib.sha256(), hashlib.sha256()
        self.chars_out: set[str] = set()
        self.stats = dict.fromkeys(_COUNTED, 0)

    def read(self, block: bytes) -> None:
        self.byte_counts[:] += np.bincount(np.frombuffer(block, dtype=np.uint8), minlength=256)
        self.sha_in.update(block)
        self.stats["bytes_in"] += len(block)

    def written(self, prose: str) -> bytes:
        """A page's prose as written: UTF-8, after a blank line unless it is the first page."""
        encoded = (("\n" if self.stats["pages"] else "") + prose + "\n").encode("utf-8")
        self.sha_out.update(encoded)
        self.chars_out.update(prose)
        self.stats["bytes_out"] += len(encoded)
        self.stats["pages"] += 1
        return encoded

    def totals(self, src: Path, seconds: float) -> dict:
        """The stats of the whole dump (`clean_dump`)."""
        if self.stats["pages"]:
            self.chars_out.add("\n")
        self.stats.update(
            distinct_bytes_in=int(np.count_nonzero(self.byte_counts)),
            distinct_chars_out=len(self.chars_out),
            sha256_in=self.sha_in.hexdigest(),
            sha256_out=self.sha_out.hexdigest(),
            seconds=round(seconds, 3),
            source=str(src),
        )
        return self.stats


def _write_articles(pieces, out, tally: _Tally) -> None:
    """Write the prose of every article among the dump's `pieces` (`_pieces`) to `out`, counting pages in `tally`;
    the header before the first page gives the namespaces' title prefixes."""
    namespace_prefixes: dict[bytes, int] = {}
    for piece in pieces:
        title = _between(piece, b"<title>", b"</title>")
        if title is None:  # the header before the first page
            namespace_prefixes.update(
                (name.strip() + b":", int(key)) for key, name in _NAMESPACE.findall(piece) if name.strip()
            )
            continue
        tally.stats["pages_in"] += 1
        prose = _article_prose(piece, title, namespace_prefixes, tally.stats)
        if prose is not None:
            out.write(tally.written(prose))
