"""Which checkpoints a model really has: a Hub repository's branches and tags, checked against the config.

Upstream checkpoint series name branches that never existed in their cards (bloom-1b7 and bloom-3b stop near
global_step340000; docs/upstream-hazards.md), so every configured revision is checked: on the Hub by the
pin job (`pinning.pin`), and before any job runs, without network, against what is known locally
(`revision_problems`). `report` lists a repository's refs by step for `python -m shape_of_learning refs`.
"""

import difflib
import json
import re
from pathlib import Path

import yaml
import huggingface_hub  # HfApi looked up when called: shape_of_learning.network
from huggingface_hub import constants
from huggingface_hub.errors import HfHubHTTPError, HTTPError, OfflineModeIsEnabled

from shape_of_learning import network, paths
from shape_of_learning.models import hf_cache
from shape_of_learning.models.checkpoints import Checkpoint, parse_step

COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


class MissingRevisionError(ValueError):
    """A configured revision that the repository does not have."""


def hub_refs(repo: str) -> list[str]:
    """The branches and tags of a Hub model repository, read on the Hub (a transient failure retried)."""
    refs = network.retry(
        lambda: huggingface_hub.HfApi().list_repo_refs(repo), what=f"listing the refs of {repo} on the Hub"
    )
    return sorted({ref.name for ref in [*refs.branches, *refs.tags]})


def repository_refs(repo: str) -> tuple[list[str], str]:
    """The branches and tags of a Hub model repository, and where they were read: the Hub, or without network the
    local HF cache (only the refs downloaded there)."""
    try:
        return hub_refs(repo), "the Hub"
    except HfHubHTTPError:
        raise  # the Hub answered: repo not found, gated, ...
    except (OfflineModeIsEnabled, HTTPError):
        return hf_cache.cached_refs(repo), f"the local cache {hf_cache.repo_dir(repo)}"


def nearest_refs(revision: str, refs: list[str], count: int = 4) -> list[str]:
    """The existing refs closest to `revision`: by training step where both name one, else by spelling."""
    step = parse_step(revision)
    with_steps = [ref for ref in refs if parse_step(ref) >= 0]
    if step >= 0 and with_steps:
        return sorted(sorted(with_steps, key=lambda ref: abs(parse_step(ref) - step))[:count], key=parse_step)
    return difflib.get_close_matches(revision, refs, n=count, cutoff=0)


def check_revision(repo: str, revision: str, refs: list[str], where: str) -> None:
    """Raise MissingRevisionError, naming the nearest existing refs, unless `revision` is one of `refs` or a sha."""
    if revision in refs or COMMIT_SHA.fullmatch(revision):
        return
    raise MissingRevisionError(
        f"{repo} has no revision {revision!r} ({where}); nearest existing: {', '.join(nearest_refs(revision, refs))}"
        f" ({len(refs)} refs in all). List them with `python -m shape_of_learning refs --repo {repo}` and put real "
        "ones in the model's `checkpoints:`"
    )


def check_revisions_offline(checkpoints: dict[str, list[Checkpoint]], models: dict[str, dict]) -> None:
    """Raise the first of `revision_problems`, if any."""
    for error in revision_problems(checkpoints, models).values():
        raise error


def revision_problems(
    checkpoints: dict[str, list[Checkpoint]], models: dict[str, dict], configfiles: str = "CONFIG"
) -> dict[str, Exception]:
    """Each model with a configured checkpoint that does not exist, and the error naming it, found before any job
    runs and without network.

    `path:`/`package:` models: every checkpoint's directory (the revision's subdirectory) must exist. Hub models:
    revisions are checked against the refs known here, if any: the refs an earlier pin read on the Hub (its lock's
    `repository_refs`), or with HF_HUB_OFFLINE the refs in the local HF cache (which the pin job would check the
    same way). Where nothing is known locally, the pin_checkpoint job checks the revision on the Hub. A checkpoint
    with a lock file was pinned, so it exists: a finished run stays usable offline, its weights evicted or its
    results copied to another machine. Reads the working directory's locks (`paths.lock`); `configfiles` (the run's
    config files) complete the command that reads a model's refs on the Hub again.
    """
    problems = {}
    for model, found in checkpoints.items():
        found = [c for c in found if not Path(paths.lock(model, c.name)).is_file()]
        try:
            if "path" in models[model] or "package" in models[model]:
                _check_directories(model, found)
                continue
            for repo in dict.fromkeys(c.location for c in found if c.source == "hub"):
                refs, where, _ = _known_refs(repo, Path(paths.lock_dir(model)), f"{configfiles} --model {model}")
                for ckpt in found:
                    if refs and ckpt.location == repo:
                        check_revision(repo, ckpt.revision, refs, where)
        except (MissingRevisionError, FileNotFoundError) as error:
            problems[model] = error
    return problems


def branch_checks(checkpoints: dict[str, list[Checkpoint]], models: dict[str, dict]) -> dict[str, str]:
    """How `revision_problems` checked each model's configured checkpoints, without network: "pinned" (each has a
    lock), "lock refs" (against the refs an earlier pin read on the Hub), "cache" (the local cache, HF_HUB_OFFLINE),
    "directories" (a `path:`/`package:` model's), "not checked" (nothing known here: its pin jobs check them on the
    Hub). Models the pipeline trains or fine-tunes have no branches to check and are left out."""
    found = {}
    for model, entry in models.items():
        if "train" in entry or "finetune" in entry:
            continue
        unpinned = [c for c in checkpoints[model] if not Path(paths.lock(model, c.name)).is_file()]
        if "path" in entry or "package" in entry:
            found[model] = "directories"
        elif not unpinned:
            found[model] = "pinned"
        else:
            known = [_known_refs(repo, Path(paths.lock_dir(model))) for repo in {c.location for c in unpinned}]
            ways = {way if refs else "not checked" for refs, _, way in known}
            found[model] = "not checked" if "not checked" in ways else "cache" if ways == {"cache"} else "lock refs"
    return found


def branch_check_lines(checks: dict[str, str]) -> list[str]:
    """The dry run's lines saying how each model's branches were checked (`branch_checks`), one per way."""
    said = {
        "pinned": "pinned already (each has a lock)",
        "lock refs": "checked against the refs an earlier pin read on the Hub (a branch published since is not known)",
        "cache": "checked against the local Hugging Face cache (HF_HUB_OFFLINE)",
        "directories": "checked: their checkpoint directories exist",
        "not checked": "not checked here: nothing is known offline, their pin jobs check them on the Hub",
    }
    lines = []
    for way, text in said.items():
        named = [model for model, how in checks.items() if how == way]
        if named:
            models = f"{len(named)} models" if len(named) > 1 else "1 model"
            lines.append(f"Branches of {models} {text}: {', '.join(named)}")
    return lines


def _check_directories(model: str, found: list[Checkpoint]) -> None:
    missing = [c for c in found if not Path(c.location).is_dir()]
    if missing:
        parent = Path(missing[0].location).parent
        holds = sorted(p.name for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
        raise FileNotFoundError(
            f"model {model!r}: checkpoint directories missing: {', '.join(c.location for c in missing[:4])}"
            f"{f' and {len(missing) - 4} more' if len(missing) > 4 else ''}; present: "
            f"{', '.join(c.name for c in found if c not in missing) or 'none'} ({parent} holds "
            f"{', '.join(holds[:8]) or 'nothing'}{', ...' if len(holds) > 8 else ''}). Fix `checkpoints:` or the "
            "`path:`/`package:` of the model's entry"
        )


def _known_refs(repo: str, model_locks: Path, renew: str = "CONFIG --model MODEL") -> tuple[list[str], str, str]:
    """Refs of `repo` known without network, where they were read, and the way (`branch_checks`): recorded by an
    earlier pin ("lock refs"), or with HF_HUB_OFFLINE the cache's ("cache"); else none ("not checked")."""
    for lock in sorted(model_locks.glob("*.json")) if model_locks.is_dir() else []:
        try:
            recorded = json.loads(lock.read_text())
        except (OSError, ValueError):
            continue  # a broken lock is the pin job's to report (read_lock)
        if recorded.get("location") == repo and recorded.get("repository_refs"):
            where = (
                f"its refs as read on the Hub when {lock} was pinned; a ref published since is not known here, "
                "but a commit sha always is; to read the refs on the Hub again: "
                f"`python -m shape_of_learning renew {renew}`"
            )
            return recorded["repository_refs"], where, "lock refs"
    if constants.HF_HUB_OFFLINE:
        where = f"in the local cache {hf_cache.repo_dir(repo)}, HF_HUB_OFFLINE being set"
        return hf_cache.cached_refs(repo), where, "cache"
    return [], "", "not checked"


def by_step(refs: list[str]) -> list[str]:
    """Refs naming a training step, in step order, then the others alphabetically."""
    return sorted(refs, key=lambda ref: (parse_step(ref) < 0, parse_step(ref), ref))


def report(repo: str, configured: list[str], snippet: bool) -> str:
    """A repository's refs by step, the `configured` ones marked, missing ones named with the nearest existing;
    with `snippet`, a `checkpoints:` list of every step ref to paste into a model's entry."""
    refs, where = repository_refs(repo)
    if not refs:
        return (
            f"{repo}: no refs known to {where}: run this where the Hub is reachable (or pre-fetch the "
            "revisions into the HF cache with `hf download`)"
        )
    lines = [f"{repo}: {len(refs)} refs (from {where})"]
    for ref in by_step(refs):
        step = parse_step(ref)
        mark, label = "*" if ref in configured else " ", f"step {step:,}" if step >= 0 else ""
        lines.append(f"  {mark} {ref:<40} {label}")
    missing = [revision for revision in configured if revision not in refs]
    if configured:
        lines.append(f"* = configured ({len(configured) - len(missing)} of {len(configured)} exist)")
    for revision in missing:
        lines.append(f"configured but missing: {revision} (nearest: {', '.join(nearest_refs(revision, refs))})")
    if snippet:
        steps = [ref for ref in by_step(refs) if parse_step(ref) >= 0]
        lines.append("\n# paste into the model's entry; every ref below exists upstream")
        lines.append(yaml.safe_dump({"checkpoints": steps}, default_flow_style=None, width=110).rstrip())
    return "\n".join(lines)
