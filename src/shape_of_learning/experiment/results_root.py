"""The results root: the folder a run writes (the config's `results`), and which config wrote it.

The demo and the paper's run would otherwise share results/, each planning to rebuild the other's tables. A run
records its config in the root (`paths.WRITTEN_BY`) as it starts its jobs; every run, dry runs included, reads that
record while Snakemake plans and refuses a root another config wrote, naming the ways out. A config is named by its
base file, the first --configfile (config.yaml when none is given): an overlay read after it (presets/ci.yaml on
presets/demo.yaml), a --config tweak or an edit of the file keeps the name. A root written before the record existed
is adopted by its next run. A root that holds an output under a name this version no longer writes (`RETIRED`) is
refused too, with the entry's fix: its jobs would not be found done, and a reader of the old name would read stale
results.
"""

import json
import os
import sys
from datetime import datetime
from pathlib import Path

from shape_of_learning import RESULTS_VARIABLE
from shape_of_learning.corpus.io import atomic_path

KEY = "results"  # the config's key of the results root
# Outputs renamed or dropped: a glob under the results root (no "**": every dry run looks) -> what to do, one sentence.
RETIRED: dict[str, str] = {
    "figures/by_modality.*": "Godey et al.'s figure is now named profile_by_modality: delete the old "
    "by_modality.png and by_modality.pdf",
}


class ForeignRootError(RuntimeError):
    """The results root holds another config's results; the message names both configs and the ways out."""


class RetiredOutputError(RuntimeError):
    """The results root holds an output under a name this version no longer writes; the message names it and the fix."""


def export(config: dict) -> None:
    """Put the validated config's `results` where shape_of_learning.paths reads it at import: this process's
    environment, which every job inherits (SLURM jobs parse the Snakefile again, with the same config). Call it
    before anything imports paths; a config without `results` leaves paths its default."""
    imported = sys.modules.get("shape_of_learning.paths")
    if imported and imported.RESULTS != config.get(KEY, imported.DEFAULT_RESULTS):
        raise RuntimeError(
            f"shape_of_learning.paths was imported (results root {imported.RESULTS}/) before the "
            "config's root was exported: import it after results_root.export()"
        )
    if KEY in config:
        os.environ[RESULTS_VARIABLE] = config[KEY]
    else:
        os.environ.pop(RESULTS_VARIABLE, None)  # a value left in the shell is no config's


def config_name(configfiles: list, workflow_dir: Path) -> str:
    """The config a run reads, by its base file: relative to the workflow's folder where it lies inside (so that the
    name survives moving the checkout), absolute otherwise."""
    base, workflow_dir = Path(configfiles[0]).resolve(), Path(workflow_dir).resolve()
    return str(base.relative_to(workflow_dir) if base.is_relative_to(workflow_dir) else base)


def foreign(marker: Path, name: str) -> dict | None:
    """The record of a root that another config than `name` wrote ({config, since}); None for `name`'s root or a
    root without a record."""
    marker = Path(marker)
    if not marker.exists():
        return None
    written = _read(marker, name)
    return written if written["config"] != name else None


def check(marker: Path, name: str) -> None:
    """Refuse a root holding a retired output (`refuse_retired`) or whose record names another config than `name`;
    a root without a record passes the second."""
    marker = Path(marker)
    refuse_retired(marker.parent)
    if written := foreign(marker, name):
        root, since = marker.parent, written.get("since", "a time not recorded")
        own = f"{root}-{Path(name).stem}"
        raise ForeignRootError(
            f"{root}/ holds the results of {written['config']} (since {since}), not of {name}, which this run reads. "
            f"Give this run a results folder of its own (--config {KEY}={own}, or `{KEY}: {own}` in {name}); "
            f"or delete {root}/ to start over; or delete {marker} to adopt {root}/ for {name}"
        )


def refuse_retired(root: Path) -> None:
    """Refuse a root holding a file or folder that a pattern of `RETIRED` matches, in one line naming it and the fix."""
    for pattern, fix in RETIRED.items():
        if found := next(Path(root).glob(pattern), None):
            raise RetiredOutputError(f"{found} was written by an earlier version under a name it no longer has: {fix}")


def claim(marker: Path, name: str) -> None:
    """Record `name` as the root's config, unless a record exists (`check` has accepted it)."""
    marker = Path(marker)
    if marker.exists():
        return
    since = datetime.now().astimezone().isoformat(timespec="seconds")
    with atomic_path(marker) as tmp:  # a run killed while writing leaves no half-written record
        tmp.write_text(json.dumps({"config": name, "since": since}, indent=1) + "\n")


def _read(marker: Path, name: str) -> dict:
    try:
        written = json.loads(marker.read_text())
    except ValueError:  # not JSON, not text
        written = None
    if isinstance(written, dict) and isinstance(written.get("config"), str):
        return written
    raise ForeignRootError(
        f"{marker} does not say which config wrote {marker.parent}/: delete it to adopt {marker.parent}/ for {name}"
    )
