"""Questions about a config and its run, from the shell.

    python -m shape_of_learning verify presets/demo.yaml [presets/ci.yaml] [--directory WORKDIR]
    python -m shape_of_learning disk config.yaml [--hub] [--directory WORKDIR]
    python -m shape_of_learning cost config.yaml [--gpus N] [--cluster] [--hub] [--directory WORKDIR]
    python -m shape_of_learning refs pythia-1b [--configfile config.yaml] [--snippet]
    python -m shape_of_learning refs --repo EleutherAI/pythia-1b
    python -m shape_of_learning path REPORT presets/demo.yaml [presets/ci.yaml]
    python -m shape_of_learning renew config.yaml --model pythia-1b [--checkpoint step1000 ...] [--directory WORKDIR]
    python -m shape_of_learning jobs

verify: is a finished run complete (every output, every row of the tables, all finite)? A results folder another
config wrote is refused, as a run refuses it (shape_of_learning.experiment.results_root). It prints the claims
scorecard too, judged on the tables the run has (a partial run's too); its exit status says whether the run is
complete and no check raised, never whether a claim holds. disk: the download and disk volume a config needs, per model
(shape_of_learning.cost.disk). cost: its download, device time by term, device-hours and wall time on N
devices, per model (shape_of_learning.cost.device_time). refs: a Hub model's branches and tags by step, the configured
ones marked and missing ones named (shape_of_learning.models.revisions). path: where a config's run writes a file of
shape_of_learning.paths (REPORT, SUMMARY_CSV, ...), under the config's `results` folder. renew: pin a model's
pinned Hub checkpoints again on the Hub after upstream fixed them, rewriting only the locks that changed, so that the
next run reruns only what depends on those (shape_of_learning.models.pinning.renew). jobs: your SLURM jobs in the
queue, each with the checkpoint and rules it runs, which their SLURM names do not tell
(shape_of_learning.experiment.slurm_jobs).
"""

import argparse
import os
import sys
from pathlib import Path

from shape_of_learning import DEFAULT_CONFIG, REPOSITORY
from shape_of_learning.experiment import results_root
from shape_of_learning.experiment.config import load_config

REPO_CONFIG = REPOSITORY / DEFAULT_CONFIG
# Each command imports what reads shape_of_learning.paths only after `_load` has exported the config's results root,
# which paths reads at import.


def _load(*configfiles: Path) -> dict:
    """The validated config, its results root exported for shape_of_learning.paths."""
    config = load_config(*configfiles)
    results_root.export(config)
    return config


def verify(args) -> int:
    """Print what is missing, the claims scorecard (judged on the tables the run has, `verify.scorecard_lines`), and
    whether the run is complete: the exit status says that and whether a claim's check raised (a defect), never
    whether a claim holds."""
    config = _load(*args.configfiles)
    from shape_of_learning import paths
    from shape_of_learning.experiment.verify import problems, scorecard_lines

    name = results_root.config_name(args.configfiles, REPO_CONFIG.parent)
    if written := results_root.foreign(args.directory / paths.WRITTEN_BY, name):  # as a run refuses it
        print(
            f"{args.directory / paths.RESULTS}/ holds the results of {written['config']}, not of {name}: verify "
            f"it with `python -m shape_of_learning verify {written['config']}` (and its overlays), or give "
            f"--directory the working directory of {name}'s run",
            file=sys.stderr,
        )
        return 1
    found = problems(config, args.directory)
    for problem in found:
        print(problem, file=sys.stderr)
    said, defects = scorecard_lines(config, args.directory)
    for line in said:
        print(line)
    for defect in defects:
        print(defect, file=sys.stderr)
    print("run incomplete" if found else f"run complete: {args.directory}")
    return 1 if found or defects else 0


def _volumes(args):
    """The config, its plan and the sizes `disk.volumes` knows, read in the run's working directory."""
    configfiles = [path.resolve() for path in args.configfiles]
    os.chdir(args.directory)  # where the run's locks and relative `path:` entries are
    config = _load(*configfiles)
    from shape_of_learning.cost import disk
    from shape_of_learning.experiment.plan import plan

    experiment = plan(config)
    return (
        config,
        experiment,
        disk.volumes(
            experiment.checkpoints,
            experiment.models,
            experiment.tokens_per_layer,
            config["extraction"]["store_dtype"],
            hub=args.hub,
        ),
    )


def volume(args) -> int:
    config, experiment, found = _volumes(args)
    from shape_of_learning.cost import disk

    print(disk.table(found))
    print(disk.summary(found, config["extraction"], experiment.download_lanes(), experiment.kept_weights()))
    return 0


def cost(args) -> int:
    if args.gpus is not None and args.gpus < 1:
        args.parser.error(f"--gpus {args.gpus}: give at least 1 device")
    config, experiment, found = _volumes(args)
    from shape_of_learning.cost import device_time

    estimate = device_time.estimate(experiment, found, config, args.gpus, cluster=args.cluster)
    print(device_time.table(estimate))
    print(device_time.summary(estimate, config))
    return 0


def refs(args) -> int:
    if bool(args.model) == bool(args.repo):
        args.parser.error("give a model name of the config or --repo, not both")
    models = None if args.repo else _load(args.configfile)["models"]
    from shape_of_learning.models.checkpoints import checkpoints
    from shape_of_learning.models.revisions import report

    if args.repo:
        print(report(args.repo, [], args.snippet))
        return 0
    if args.model not in models:
        args.parser.error(f"{args.configfile} has no model {args.model!r}; models: {', '.join(sorted(models))}")
    hub = [c for c in checkpoints(args.model, models[args.model]) if c.source == "hub"]
    if not hub:
        args.parser.error(f"model {args.model!r} is not on the Hub (a path, package or trained model)")
    for repo in dict.fromkeys(c.location for c in hub):  # TinyLlama: one repository per checkpoint
        print(report(repo, [c.revision for c in hub if c.location == repo], args.snippet))
    return 0


def path(args) -> int:
    _load(*args.configfiles)
    from shape_of_learning import paths

    found = {
        "RESULTS": paths.RESULTS,
        "LOGS": paths.LOGS,
        **{
            name: value
            for name, value in vars(paths).items()
            if name.isupper() and isinstance(value, str) and value.startswith(f"{paths.RESULTS}/")
        },
    }
    if args.name not in found:
        args.parser.error(f"shape_of_learning.paths has no path {args.name!r}; paths: {', '.join(sorted(found))}")
    print(found[args.name])
    return 0


def renew_locks(args) -> int:
    configfiles = [path.resolve() for path in args.configfiles]
    os.chdir(args.directory)  # where the run's locks are
    config = _load(*configfiles)
    from shape_of_learning import paths
    from shape_of_learning.experiment.plan import plan
    from shape_of_learning.models.pinning import renew

    experiment = plan(config)
    if args.model not in experiment.models:
        args.parser.error(f"the config has no model {args.model!r}; models: {', '.join(sorted(experiment.models))}")
    named = {c.name: c for c in experiment.checkpoints[args.model]}
    if unknown := sorted(set(args.checkpoint) - set(named)):
        args.parser.error(
            f"model {args.model!r} has no checkpoint {', '.join(unknown)}; its checkpoints: {', '.join(named)}"
        )
    chosen = [named[name] for name in args.checkpoint] or list(named.values())
    renewed = 0
    for checkpoint in chosen:
        lock = paths.lock(args.model, checkpoint.name)
        if checkpoint.source != "hub" or not Path(lock).is_file():
            said = "not on the Hub" if checkpoint.source != "hub" else "not pinned yet: the run pins it"
        else:
            said = renew(checkpoint, experiment.models[args.model]["weights"], lock)
            renewed += said.startswith("renewed")
        print(f"{args.model}/{checkpoint.name}: {said}")
    print(f"{renewed} of {len(chosen)} locks renewed: the next run reruns what depends on those only")
    return 0


def jobs(args) -> int:
    from shape_of_learning.experiment.slurm_jobs import listing

    for line in ["JOBID\tSTATE\tTIME\tWHERE\tRUNS", *listing()]:
        print(line)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shape_of_learning", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    command = commands.add_parser("verify", help="check a finished run")
    command.add_argument("configfiles", type=Path, nargs="+", help="the --configfile files of the run, in order")
    command.add_argument("--directory", type=Path, default=Path("."), help="the workflow's working directory")
    command.set_defaults(run=verify)
    command = commands.add_parser("disk", help="download and disk volume of a config")
    command.add_argument("configfiles", type=Path, nargs="+", help="config or presets (later ones override)")
    command.add_argument("--directory", type=Path, default=Path("."), help="the run's working directory")
    command.add_argument(
        "--hub",
        action="store_true",
        help="ask the Hub the sizes of unpinned, uncached checkpoints "
        "(one model_info each) and fetch config.json where no local copy gives the hidden size",
    )
    command.set_defaults(run=volume)
    command = commands.add_parser("cost", help="download, device time and wall time of a config's run, per model")
    command.add_argument("configfiles", type=Path, nargs="+", help="config or presets (later ones override)")
    command.add_argument("--directory", type=Path, default=Path("."), help="the run's working directory")
    command.add_argument("--gpus", type=int, default=None, help="devices for the wall time (default: cost.gpus)")
    command.add_argument(
        "--cluster", action="store_true", help="each checkpoint's job submitted to a cluster (cost.submission_s)"
    )
    command.add_argument(
        "--hub",
        action="store_true",
        help="as for disk: ask the Hub the sizes the model facts, locks and the HF cache do not know",
    )
    command.set_defaults(run=cost, parser=command)
    command = commands.add_parser("refs", help="a Hub model's branches and tags by step")
    command.add_argument("model", nargs="?", help="a model name of the config")
    command.add_argument("--configfile", type=Path, default=REPO_CONFIG)
    command.add_argument("--repo", help="a Hub repository id instead of a configured model")
    command.add_argument("--snippet", action="store_true", help="print a `checkpoints:` list of the existing refs")
    command.set_defaults(run=refs, parser=command)
    command = commands.add_parser("path", help="where a config's run writes a file (make report asks for REPORT)")
    command.add_argument("name", help="a path of shape_of_learning.paths: REPORT, SUMMARY_CSV, RESULTS, ...")
    command.add_argument("configfiles", type=Path, nargs="+", help="config or presets (later ones override)")
    command.set_defaults(run=path, parser=command)
    command = commands.add_parser("renew", help="pin a model's checkpoints again on the Hub after an upstream fix")
    command.add_argument("configfiles", type=Path, nargs="+", help="config or presets (later ones override)")
    command.add_argument("--model", required=True, help="a model name of the config")
    command.add_argument("--checkpoint", action="append", default=[], help="one of its checkpoints (default: all)")
    command.add_argument("--directory", type=Path, default=Path("."), help="the run's working directory")
    command.set_defaults(run=renew_locks, parser=command)
    command = commands.add_parser("jobs", help="your SLURM jobs, each with the checkpoint and rules it runs")
    command.set_defaults(run=jobs)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
