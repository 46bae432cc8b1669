"""The user documentation is no lab notebook, and no page states what its commands no longer print.

No lab notebook: README.md, CHANGELOG.md and docs/*.md cite no commit of this repository, no scratch folder of one
machine and no word of who had which machine when; nor does the cost model's calibration, whose `measured` text the dry
run prints. What changed, and when, goes in commit messages and the changelog. A hex string of 7-40 characters counts
only where git resolves it to a commit of this repository: enwik8's size (4154064), a sha256 or a Hub commit sha pass.
A date counts where it dates a measurement (`2026-12-02, make ...`), not where it names an upstream event (`reported on
2023-12-18`).

Executable docs. A fenced block whose info string has the word `runnable` (```` ```bash runnable ````: GitHub
highlights it as bash and shows no marker) is run by `test_every_runnable_block_runs_and_prints_what_its_page_says`,
each command as written, in a folder laid out as a fresh clone (this checkout's tracked files and its .venv: no
results/, logs/ or data/), with an empty Hugging Face cache and HF_HUB_OFFLINE=1. Its snakemake and make commands must
be dry runs (-n, --lint, --list-target-rules). A fenced block whose info string has the word `output` (```` ```text
output ````), after a runnable block with no other block between, holds lines that its commands print, stdout and
stderr together, in any order and spaces aside: `...` within a line stands for any text, a line of `...` alone for
lines left out. A page states a count or a cost of the pipeline in such a block, or names the command that prints it.
One run per distinct command serves every page; the paper's dry runs make the test slow (`make test`, not `make check`).
"""

import difflib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
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


# Executable docs (the module's docstring: the convention)
FENCE = re.compile(r"^( *)(```+|~~~+)(.*)$")
MARKERS = {"runnable", "output"}  # the words an info string may add after its language
DRY_RUN = {"-n", "--dry-run", "--dryrun", "--lint", "--list-target-rules", "--just-print"}


@dataclass(frozen=True)
class Block:
    line: int  # its first line inside the fence
    words: tuple[str, ...]  # its info string
    lines: tuple[str, ...]


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown page, its lines less the fence's indentation (a block inside a list item)."""
    blocks, lines, number = [], text.splitlines(), 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        number += 1
        if not opening:
            continue
        indent, fence, start = len(opening[1]), opening[2], number
        while number < len(lines) and not lines[number].strip().startswith(fence):
            number += 1
        body = tuple(line[indent:] if not line[:indent].strip() else line.lstrip() for line in lines[start:number])
        blocks.append(Block(start + 1, tuple(opening[3].split()), body))
        number += 1
    return blocks


def commands(block: Block) -> list[tuple[int, str]]:
    """The block's commands and their first lines: a command goes on until its quotes close and no backslash ends
    its line; blank and comment lines are none."""
    found, text, first = [], "", 0
    for offset, line in enumerate(block.lines):
        text, first = (f"{text}\n{line}", first) if text else (line, block.line + offset)
        if text.rstrip().endswith("\\"):
            continue
        try:
            words = shlex.split(text, comments=True)
        except ValueError:  # a quote still open
            continue
        if words:
            found.append((first, text))
        text = ""
    assert not text, f"line {first}: a command whose quotes never close"
    return found


def not_a_dry_run(command: str) -> bool:
    """A snakemake or make command without -n or another flag that runs no job."""
    words = shlex.split(command, comments=True)
    return any(Path(word).name in ("snakemake", "make") for word in words) and not DRY_RUN & set(words)


RUNS: dict[tuple[Path, tuple[str, ...]], subprocess.CompletedProcess] = {}


def run(checkout: Path, hf_home: Path, command: str) -> subprocess.CompletedProcess:
    """`command` as a user types it in a fresh clone, run once however many pages show it (comments and spaces aside);
    its stdout holds its stderr too."""
    key = (checkout, tuple(shlex.split(command, comments=True)))
    if key not in RUNS:
        env = {name: value for name, value in os.environ.items() if not name.startswith(("HF_", "HUGGINGFACE_"))}
        env |= {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        try:
            RUNS[key] = subprocess.run(
                ["bash", "-c", command],
                cwd=checkout,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
        except subprocess.TimeoutExpired as timeout:
            RUNS[key] = subprocess.CompletedProcess(command, f"nothing in {timeout.timeout} s", "")
    return RUNS[key]


def spaced(line: str) -> str:
    return " ".join(line.split())


def printed(expected: str, lines: list[str]) -> bool:
    """Whether `expected` is one of `lines`, where `...` stands for any text."""
    pattern = ".*".join(map(re.escape, expected.split("...")))
    return any(re.fullmatch(pattern, line) for line in lines)


def page_problems(page: Path, checkout: Path, hf_home: Path) -> list[str]:
    """Where a page's runnable blocks do not do what it says, one line each naming the page and its line: a command
    that fails or would run jobs, a line of an output block that its runnable block does not print."""
    name = page.relative_to(REPO) if page.is_relative_to(REPO) else page.name
    problems, output, runnable = [], None, None
    for block in fenced_blocks(page.read_text()):
        if "output" in block.words:
            if output is None:
                problems.append(f"{name} line {block.line}: an output block after no runnable block")
            for offset, line in enumerate(block.lines if output is not None else ()):
                if spaced(line) in ("", "...") or printed(spaced(line), output):
                    continue
                nearest = difflib.get_close_matches(spaced(line), output, n=1, cutoff=0.5)
                said = repr(nearest[0]) if nearest else "no such line"
                problems.append(
                    f"{name} line {block.line + offset}: the page says {spaced(line)!r}; the commands at line "
                    f"{runnable} print {said}"
                )
            output = None
            continue
        output = [] if "runnable" in block.words else None
        runnable = block.line
        for number, command in commands(block) if output is not None else ():
            if not_a_dry_run(command):
                problems.append(f"{name} line {number}: `{command}` runs jobs: a runnable block dry-runs them (-n)")
                continue
            done = run(checkout, hf_home, command)
            output += [spaced(line) for line in done.stdout.splitlines()]
            if done.returncode != 0:
                tail = "\n".join(done.stdout.splitlines()[-15:])
                problems.append(f"{name} line {number}: `{command}` exited {done.returncode}:\n{tail}")
    return problems


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> tuple[Path, Path]:
    """A folder laid out as a fresh clone of this checkout (its tracked files, and its .venv), and an empty Hugging Face
    cache: what a page's commands read. Nothing they write lands in the checkout."""
    checkout, hf_home = tmp_path_factory.mktemp("checkout"), tmp_path_factory.mktemp("hf-home")
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], check=True, capture_output=True, text=True).stdout
    for entry in sorted({path.split("/")[0] for path in tracked.splitlines()} | {".venv"}):
        (checkout / entry).symlink_to(REPO / entry)
    return checkout, hf_home


RUNNABLE_PAGES = [page for page in PAGES if any("runnable" in block.words for block in fenced_blocks(page.read_text()))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda page: page.name)
def test_every_runnable_block_runs_and_prints_what_its_page_says(page, fresh_clone):
    problems = page_problems(page, *fresh_clone)
    assert not problems, "\n".join(problems)


def test_the_pages_that_state_counts_have_runnable_blocks_and_every_marker_is_known():
    assert {"README.md", "paper-run.md", "cost.md", "cluster.md", "outputs.md"} <= {
        page.name for page in RUNNABLE_PAGES
    }
    unknown = [
        f"{page.relative_to(REPO)} line {block.line}: {' '.join(block.words)}"
        for page in PAGES
        for block in fenced_blocks(page.read_text())
        if not MARKERS.issuperset(block.words[1:])
    ]
    assert not unknown, f"words after an info string's language other than {sorted(MARKERS)}:\n" + "\n".join(unknown)


def test_blocks_commands_and_dry_runs_are_told_apart():
    page = """Text.

- an item:

  ```bash runnable
  .venv/bin/snakemake -n --quiet rules   # the plan
  .venv/bin/python -c "
  print(1)"
  .venv/bin/snakemake --cores 8 \\
      figure3
  ```
"""
    (block,) = fenced_blocks(page)
    assert block.line == 6 and block.words == ("bash", "runnable")
    assert commands(block) == [
        (6, ".venv/bin/snakemake -n --quiet rules   # the plan"),
        (7, '.venv/bin/python -c "\nprint(1)"'),
        (9, ".venv/bin/snakemake --cores 8 \\\n    figure3"),
    ]
    assert [not_a_dry_run(command) for _, command in commands(block)] == [False, False, True]
    assert printed("total 79", ["job count", "total 79"]) and not printed("total 7", ["total 79"])
    assert printed("opt-13b ... 55.2 GB", ["opt-13b 1 1 25.7 GB 4 min 55.2 GB"])


def test_a_command_that_fails_fails_its_page_naming_the_line_and_the_error(tmp_path, fresh_clone):
    page = tmp_path / "page.md"
    command = ".venv/bin/python -c 'from shape_of_learning.experiment import cost'"
    page.write_text(
        f"# A page\n\n```bash runnable\n{command}\n```\n\n```text output\n...\n```\n\n"
        "```text output\nan output block after a block that is not runnable\n```\n"
    )
    problems = page_problems(page, *fresh_clone)
    assert problems[0].startswith(f"page.md line 4: `{command}` exited 1:\n"), problems
    assert "ImportError: cannot import name 'cost' from 'shape_of_learning.experiment'" in problems[0]
    assert problems[1:] == ["page.md line 12: an output block after no runnable block"]


@pytest.mark.slow
def test_a_changed_count_fails_its_page_naming_the_line_what_it_says_and_what_is_printed(tmp_path, fresh_clone):
    command = ".venv/bin/snakemake figure3 -n --quiet rules"  # outputs.md's: one run for both
    jobs = int(re.search(r"^total\s+(\d+)$", run(*fresh_clone, command).stdout, re.MULTILINE)[1])
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\n```bash runnable\n{command}\n```\n\n```text output\ntotal {jobs + 1}\n```\n")
    assert page_problems(page, *fresh_clone) == [
        f"page.md line 8: the page says 'total {jobs + 1}'; the commands at line 4 print 'total {jobs}'"
    ]
    page.write_text("```bash runnable\n.venv/bin/snakemake figure3 --cores 8\n```\n")
    assert page_problems(page, *fresh_clone) == [
        "page.md line 2: `.venv/bin/snakemake figure3 --cores 8` runs jobs: a runnable block dry-runs them (-n)"
    ]
