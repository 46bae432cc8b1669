"""What a dry run prints last: the disk and download volume, the cost per model and the totals of the extractions it
plans (those of the targets asked for, less what is done)."""

from shape_of_learning.cost import device_time, disk
from shape_of_learning.experiment.plan import Experiment


def dry_run_report(experiment: Experiment, config: dict, cluster: bool) -> str:
    """`experiment` (restricted to the planned extractions: `Experiment.restricted_to`) as `snakemake -n` reports it,
    its jobs submitted to a `cluster` or run on this machine."""
    volumes = disk.volumes(
        experiment.checkpoints, experiment.models, experiment.tokens_per_layer, config["extraction"]["store_dtype"]
    )
    estimate = device_time.estimate(experiment, volumes, config, cluster=cluster)
    return "\n".join(
        [
            disk.summary(volumes, config["extraction"], experiment.download_lanes(), experiment.kept_weights()),
            device_time.table(estimate),
            device_time.summary(estimate, config),
        ]
    )
