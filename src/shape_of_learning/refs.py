"""Which checkpoints a Hub model really has: its branches and tags, by training step, against the config.

    python -m shape_of_learning.refs pythia-1b                  # a model of config.yaml
    python -m shape_of_learning.refs bloom-3b-intermediate --configfile config.yaml --snippet
    python -m shape_of_learning.refs --repo EleutherAI/pythia-1b

Lists every ref with its step, marks those the config asks for, and names configured revisions that do not exist
(pinning would stop at them). --snippet prints a `checkpoints:` list of the existing step refs to paste into the
model's entry. Reads the Hub, or without network the refs the local HF cache holds.
"""

import argparse
import sys
from pathlib import Path

import yaml

from shape_of_learning.experiment import load_config
from shape_of_learning.pinning import nearest_refs, repository_refs
from shape_of_learning.registry import checkpoints, parse_step

REPO_ROOT = Path(__file__).resolve().parents[2]


def by_step(refs: list[str]) -> list[str]:
    """Refs naming a training step, in step order, then the others alphabetically."""
    return sorted(refs, key=lambda ref: (parse_step(ref) < 0, parse_step(ref), ref))


def report(repo: str, configured: list[str], snippet: bool) -> str:
    refs, where = repository_refs(repo)
    if not refs:
        return (f"{repo}: no refs known to {where}: run this where the Hub is reachable (or pre-fetch the "
                "revisions into the HF cache with `hf download`)")
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="a model name of the config")
    parser.add_argument("--configfile", default=str(REPO_ROOT / "config.yaml"))
    parser.add_argument("--repo", help="a Hub repository id instead of a configured model")
    parser.add_argument("--snippet", action="store_true", help="print a `checkpoints:` list of the existing refs")
    args = parser.parse_args(argv)
    if bool(args.model) == bool(args.repo):
        parser.error("give a model name of the config or --repo, not both")
    if args.repo:
        print(report(args.repo, [], args.snippet))
        return 0
    models = load_config(Path(args.configfile))["models"]
    if args.model not in models:
        parser.error(f"{args.configfile} has no model {args.model!r}; models: {', '.join(sorted(models))}")
    hub = [c for c in checkpoints(args.model, models[args.model]) if c.source == "hub"]
    if not hub:
        parser.error(f"model {args.model!r} is not on the Hub (a path, package or trained model)")
    for repo in dict.fromkeys(c.location for c in hub):  # TinyLlama: one repository per checkpoint
        print(report(repo, [c.revision for c in hub if c.location == repo], args.snippet))
    return 0


if __name__ == "__main__":
    sys.exit(main())
