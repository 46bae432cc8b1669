"""The user documentation is no lab notebook: README.md, CHANGELOG.md and docs/*.md cite no commit of this repository,
no scratch folder of one machine and no word of who had which machine when; nor does the cost model's calibration,
whose `measured` text the dry run prints. What changed, and when, goes in commit messages and the changelog.

A hex string of 7-40 characters counts only where git resolves it to a commit of this repository: enwik8's size
(4154064), a sha256 or a Hub commit sha pass. A date counts where it dates a measurement (`2026-12-02, make ...`),
not where it names an upstream event (`reported on 2023-12-18`).
"""

import re
import subprocess
from pathlib import Path

import pytest

from shape_of_learning.cost.calibration import CALIBRATIONS

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]

HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])")
MACHINE_PATH = re.compile(r"(?<![\w.~}$])/(tmp|work)/[\w.$-]+")
ISO_DATE = re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b")
UPSTREAM_EVENT = re.compile(r"\b(reported|released|published|announced|posted|dated)\b[^.]{0,20}$", re.IGNORECASE)
WHO_WHEN = re.compile(
    r"\blent\b"  # "no GPU was lent", "the machine lent to"
    r"|\b(this|that|another|other) sessions?\b|\ba session of\b"  # "this session", "three other sessions"
    r"|\b(later|earlier) (that|the same) (day|evening|night|morning|hour)\b"
    r"|\b(that|the same) (evening|night|morning|afternoon|hour)\b|\ban hour (earlier|later)\b",
    re.IGNORECASE,
)


def git_commits(candidates: set[str]) -> set[str]:
    """The `candidates` (hex strings) that git resolves to a commit of this repository, in one `git cat-file` call."""
    names = sorted(candidates)
    answer = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "--batch-check"],
        check=True,
        capture_output=True,
        text=True,
        input="".join(f"{name}^{{commit}}\n" for name in names),
    ).stdout.splitlines()
    return {name for name, line in zip(names, answer, strict=True) if line.split()[1:2] == ["commit"]}


def notebook_entries(text: str) -> list[str]:
    """What in `text` belongs in a lab notebook, not in user documentation: one 'line N: ...' per finding."""
    lines = text.splitlines()
    hexes = {(number, match.group()) for number, line in enumerate(lines, 1) for match in HEX.finditer(line)}
    commits = git_commits({hex_string for _, hex_string in hexes})
    found = [
        (number, f"{hex_string} is a commit of this repository: say what changed, not which commit")
        for number, hex_string in hexes
        if hex_string in commits
    ]
    for number, line in enumerate(lines, 1):
        found += [(number, f"{match.group()} is a folder of one machine") for match in MACHINE_PATH.finditer(line)]
        found += [(number, f"'{match.group()}' tells who had which machine when") for match in WHO_WHEN.finditer(line)]
        found += [
            (number, f"{match.group()} dates a measurement: name its command and machine instead")
            for match in ISO_DATE.finditer(line)
            if not UPSTREAM_EVENT.search(line[: match.start()])
        ]
    return [f"line {number}: {message}" for number, message in sorted(found)]


@pytest.fixture(scope="module", autouse=True)
def git_checkout():
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout: commits cannot be told from other hex strings")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_a_user_page_is_no_lab_notebook(page):
    entries = notebook_entries(page.read_text())
    assert not entries, f"{page.relative_to(REPO)}:\n" + "\n".join(entries)


def test_every_user_page_is_checked():
    assert all(page.exists() for page in PAGES) and len(PAGES) > 10


@pytest.mark.parametrize("name", sorted(CALIBRATIONS))
def test_the_calibration_says_what_it_was_measured_on_not_by_whom_or_when(name):
    assert not notebook_entries(CALIBRATIONS[name].measured), CALIBRATIONS[name].measured


def test_a_commit_of_this_repository_is_found_and_other_hex_strings_pass(tmp_path):
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    full = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\nMeasured on the code of {head}.\nAnd again at `{full}`.\n")
    assert notebook_entries(page.read_text()) == [
        f"line 3: {head} is a commit of this repository: say what changed, not which commit",
        f"line 4: {full} is a commit of this repository: say what changed, not which commit",
    ]
    sha256 = "a" * 64
    fine = (
        f"enwik8's first 4154064 bytes; a file of sha256 {sha256}; a Hub commit deadbeefcafe0123; "
        "TinyLlama's bug, reported on 2023-12-18; `scratch: /tmp`, `/local/scratch/$USER`; a tmux session."
    )
    assert notebook_entries(fine) == []


@pytest.mark.parametrize(
    "text",
    [
        "cleaned in 47 s (`--src /tmp/wtA-demo/enwik8`)",
        "a checkout in /work/wt-43",
        "No GPU was lent to the session that built it",
        "shared with three other sessions and a CI run",
        "On 2026-12-02, the reference machine gave 1.25x",
        "432 s (2026-12-02, quiet)",
        "and later that day 1.15x",
    ],
)
def test_a_scratch_folder_or_who_measured_when_is_found(text):
    assert notebook_entries(text)
