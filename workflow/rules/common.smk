# Shared by the rules files: the config validated, its results root claimed, the DAG planned from it, the preflight,
# and input functions. Paths come from shape_of_learning.paths. A job's params hold what reruns it when it changes
# (`result_settings`: the config's settings less those the schema marks `x-rerun: false`) and the planned objects it
# works on; its script reads every setting from the validated config.
import atexit
import functools
import logging
import shutil
import time

from snakemake.io import IOFile
from snakemake.logging import LogEvent

from shape_of_learning.experiment import results_root
from shape_of_learning.experiment.config import (ConfigError, extraction_settings, read_config_file, result_settings,
                                                 shards_scratch, share_string_resources, validate_config)

CONFIG_FILES = workflow.config_settings.configfiles or [Path(workflow.basedir) / DEFAULT_CONFIG]
for config_file in CONFIG_FILES:
    read_config_file(config_file)  # Snakemake's reading keeps the last of two equal keys; refuse them instead
validate_config(config)  # against workflow/schemas/, before any job runs; fills in every default
results_root.export(config)  # before the imports below: shape_of_learning.paths reads the results root at import

from shape_of_learning import paths, worker
from shape_of_learning.corpus import MODALITIES
from shape_of_learning.cost import device_time
from shape_of_learning.cost.report import dry_run_report
from shape_of_learning.experiment import preflight
from shape_of_learning.experiment.plan import SERIES, layers_in_group, plan
from shape_of_learning.rajaee_pilehvar.plan import parse_reference
from shape_of_learning.experiment.outcome import drop_unavailable, missing
from shape_of_learning.models import download
from shape_of_learning.models.checkpoints import RANDOM_INIT
from shape_of_learning.models.facts import missing_lines
from shape_of_learning.models.revisions import branch_check_lines, branch_checks, revision_problems

CONFIG_NAME = results_root.config_name(CONFIG_FILES, workflow.basedir)
# the run's config files as a command names them (a lock renewed: experiment.preflight.renew_command)
CONFIG_ARGS = " ".join(results_root.config_name([file], workflow.basedir) for file in CONFIG_FILES)
if workflow.is_main_process:  # where Snakemake plans, not in each job's process
    results_root.check(paths.WRITTEN_BY, CONFIG_NAME)  # another config's root is refused, dry runs too
EXPERIMENT = plan(config)
config["models"] = EXPERIMENT.models  # the planned registry, one model per fine-tuning seed: what every script reads
RUN_STARTED = time.time()  # the failed jobs this run ends by naming are those whose logs it wrote
DRY_RUN = workflow.output_settings.dryrun  # while parsing, Snakemake tells a dry run by its output settings only
# Preflight, without network, where Snakemake plans (not in jobs): does each configured checkpoint exist, does each
# model have the layers its config.json gives, is every local data path there (experiment.preflight)?
PREFLIGHT = (revision_problems(EXPERIMENT.checkpoints, EXPERIMENT.models, CONFIG_ARGS) if workflow.is_main_process
             else {})
if workflow.is_main_process:
    if wrong_layers := preflight.layer_problems(EXPERIMENT, CONFIG_ARGS):
        raise ValueError("\n".join(wrong_layers))
    if DRY_RUN:  # what the revision check above could check offline, and what it leaves to the pin jobs
        for line in branch_check_lines(branch_checks(EXPERIMENT.checkpoints, EXPERIMENT.models)):
            print(line, file=sys.stderr)
        for line in missing_lines(EXPERIMENT.models, CONFIG_ARGS):  # its cost unknown until the command adds its row
            print(line, file=sys.stderr)
# a dry run plans the whole run and says what is missing, for the targets asked for (`say_missing_data`)
MISSING_DATA = preflight.missing_data(config, EXPERIMENT) if workflow.is_main_process else []
for data in [] if DRY_RUN else MISSING_DATA:
    PREFLIGHT |= {model: FileNotFoundError(data.line) for model in data.models if model not in PREFLIGHT}
drop_unavailable(EXPERIMENT, PREFLIGHT)  # the targets leave out what needs them: made with --keep-going


@functools.cache  # once per target, however often Snakemake evaluates its input function
def say_missing_data(name):
    """A dry run's line for each local data path that a model of the target `name` (None: every target) needs and
    that does not exist, where a real run asking for that target would stop (`targets`): none for a target that
    does not need the data (`figure3` without ImageNet), nor for a partial deliverable, made without the model."""
    needed = {model for deliverable in EXPERIMENT.deliverables() if name in (None, deliverable.target)
              and not deliverable.partial for model in deliverable.models}
    for data in MISSING_DATA:
        if needed & set(data.models):
            print(f"{data.line}. A real run stops here unless --keep-going leaves out what needs it", file=sys.stderr)


def no_such_target(wildcards):
    """The input function of `name_the_targets`: an error naming this config's targets."""
    named = sorted(rule.name for rule in workflow.rules if not rule.output and rule.name != "all")
    raise ValueError(f"{wildcards.target!r} is not a target of {CONFIG_NAME}; its targets: {', '.join(named)} (or "
                     "any file they make)")


def targets(name=None):
    """The input function of `all` (every target) and of each named target, giving its outputs, the preflight's
    problem with a model it needs raised instead, before any job (and before the results root is claimed), unless the
    run goes on with --keep-going. Snakemake tells keep-going only once it executes, not while it parses; where it
    does not execute (--report), the outputs that exist: a report of a partial run holds the figures it made."""

    def inputs(wildcards):
        executing = workflow.execution_settings
        outputs = EXPERIMENT.targets() if name is None else EXPERIMENT.named_targets()[name]
        if executing is None:
            return [path for path in outputs if Path(path).exists()]
        if DRY_RUN:
            say_missing_data(name)
        blocked = [model for deliverable in EXPERIMENT.deliverables() if name in (None, deliverable.target)
                   for model in EXPERIMENT.blocked_by(deliverable)]
        if blocked and not executing.keep_going:
            raise PREFLIGHT[blocked[0]]
        return outputs

    return inputs
class PlannedJobs(logging.Handler):
    """Snakemake's log, watched for the job stats a dry run logs once it has planned every job: a plan that failed
    is not priced."""

    planned = False

    def emit(self, record):
        self.planned = self.planned or getattr(record, "event", None) == LogEvent.RUN_INFO


def submits_jobs():
    """Whether this run's jobs go to a cluster. A dry run executes through Snakemake's own dry-run executor, which
    runs locally: there the intended executor shows in `use_threads`, which Snakemake sets for a non-local one."""
    return not workflow.local_exec or (DRY_RUN and workflow.execution_settings.use_threads)


def print_cost_of_planned_jobs(watch):
    """The dry run's last words: the disk, download and cost of the extractions it planned (cost.report)."""
    if watch.planned and workflow.dag is not None:
        extractions = {(job.wildcards.model, job.wildcards.checkpoint) for job in workflow.dag.jobs
                       if job.rule.name == "extract_hidden_states"}
        print(dry_run_report(EXPERIMENT.restricted_to(extractions), config, cluster=submits_jobs()),
              file=sys.stderr)


if DRY_RUN and workflow.is_main_process:
    planned_jobs = PlannedJobs()
    logging.getLogger("snakemake.logging").addHandler(planned_jobs)
    atexit.register(print_cost_of_planned_jobs, planned_jobs)  # after all Snakemake prints: the summary comes last

CORPUS = config["corpus"]["name"]
# Image and audio corpora (Godey et al.): one sampled file per modality, read by the models of that modality.
MEDIA = {modality: paths.media(config[f"{modality}_corpus"]["name"], modality)
         for modality in MODALITIES if config.get(f"{modality}_corpus")}
ENV = "../../envs/pipeline.yaml"


wildcard_constraints:
    model=r"[A-Za-z0-9._-]+",
    checkpoint=r"[A-Za-z0-9._-]+",
    layer_group=r"\d+(-\d+)?",


def model_entry(wildcards):
    return EXPERIMENT.models[wildcards.model]


def model_corpus(wildcards):
    """The corpus items a model reads, by its modality: text windows, or the sampled image or audio files."""
    modality = model_entry(wildcards)["modality"]
    return paths.windows(CORPUS) if modality == "text" else MEDIA[modality]


def training_corpus(wildcards):
    """A text model trains on the whole clean corpus, an image model on the sampled images."""
    return paths.clean_corpus(CORPUS) if model_entry(wildcards)["modality"] == "text" else model_corpus(wildcards)


def trained_model_dir(wildcards):
    """A model the pipeline trains or fine-tunes itself is an input of its checkpoints' jobs; a Hub or local model
    is not."""
    entry = model_entry(wildcards)
    if "finetune" in entry:
        return paths.finetuned_model(wildcards.model)
    return paths.trained_model(wildcards.model) if "train" in entry else []


def last_pin(model):
    """The lock of a model's last checkpoint: what a fine-tuning starts from and Rajaee & Pilehvar measure."""
    return paths.lock(model, EXPERIMENT.last_checkpoint(model).name)


@functools.cache
def job_runtime_min(model, job):
    """A checkpoint's extraction or metrics job's time limit on a cluster, before retries (cost.device_time)."""
    return device_time.runtime_min(model, EXPERIMENT, config, job)


# A job that holds an accelerator asks for `gpu=1`: on a cluster one GPU of its node, on a workstation with a GPU the
# one slot profiles/default gives. Without a GPU (the demo) such jobs ask for none and run side by side, as many as the
# cores allow, as every other job does.
DEVICE_SLOT = 1 if not workflow.local_exec or workflow.remote_exec or worker.visible_gpus() else 0


def run_in_worker(target, rule, input, output, params, wildcards, threads, log):
    """A `run:` block's job, `target` ("module:function"), in a worker process of this Snakemake process
    (shape_of_learning.worker), as many at once as it runs jobs; its job's error raised as this job's."""
    job = worker.Job(rule, input, output, params, wildcards, threads, log, config)
    worker.run(target, job, workflow.resource_settings.cores)


def jobs_in_threads(wildcards):
    """No input: where Snakemake builds the DAG of a process that will execute jobs, whether the run's on a workstation
    or a group job's on a node, let it run `run:` jobs in its own threads (`run_in_worker`), as it does any other
    job's. It would start a new Snakemake process for each (which parses this workflow again), and its command-line
    switch for threads (--force-use-threads) does not reach the processes of a cluster's group jobs. Set on the
    settings it executes with (attached after this file is parsed), before it starts its executor; not in a dry run,
    where those settings tell a cluster's executor (`submits_jobs`)."""
    if not DRY_RUN and workflow.execution_settings is not None:
        workflow.execution_settings.use_threads = True
    return []


# A checkpoint's extraction and metrics run as one SLURM job (profiles/slurm's `groups`): a string resource a profile
# sets for one of them (a partition, a constraint, slurm_extra) is asked for by both, as Snakemake requires of a group.
# Before the rules are defined: each takes its set-resources then, and jobs get them from there too.
CHECKPOINT_GROUP = ("extract_hidden_states", "measure_layers")
share_string_resources(workflow.resource_settings._parsed_overwrite_resources, CHECKPOINT_GROUP)

# A checkpoint's shards: extraction writes them, its metrics jobs read them.
SCRATCH = shards_scratch(config)
SHARDS = paths.shards(scratch=SCRATCH)


@functools.cache
def gpu_type_request(model):
    """SLURM's -C of a checkpoint's group job (a group's jobs must share it): the larger cards' feature for a model
    that needs them (cost.device_time.large_gpu_constraint), none otherwise."""
    return device_time.large_gpu_constraint(model, EXPERIMENT, config)


@functools.cache
def node_disk_request(model):
    """SLURM's --tmp of a checkpoint's group job (the extraction's and its metrics' `slurm_extra`, which a group's
    jobs must share): the node's local disk its shards take (cost.device_time.scratch_mb), where they go to a
    node-local `scratch` and the config asks for it (`scratch_request`: SLURM refuses --tmp where the nodes' TmpDisk is
    unset); none where they stay on the shared filesystem."""
    if SCRATCH is None or config["extraction"]["keep_embeddings"] or not config["scratch_request"]:
        return ""
    return f"--tmp={device_time.scratch_mb(model, EXPERIMENT, config)}M"


def shards_stay_on_the_nodes(wildcards):
    """No input: an extraction's check, where Snakemake plans and knows its executor, that a run on a cluster's nodes
    keeps the shards off the shared filesystem. A `--config` on the command line replaces the profile's `config:`,
    `scratch` with it: such a run is refused naming the fix, not sent 3.5 GB per checkpoint through the shared disk;
    its dry run too (`submits_jobs`: a dry run executes locally)."""
    if SCRATCH is None and submits_jobs() and not config["extraction"]["keep_embeddings"]:
        raise ConfigError("config.scratch is not set, so every checkpoint's temporary shards would go through the "
                          "shared filesystem; a --config on the command line replaces the profile's `config:`: add "
                          "scratch=/tmp (profiles/slurm's) to it, or the absolute path of a folder on the shared "
                          "filesystem to keep them there (docs/cluster.md)")
    return []


def remove_group_shards():
    """At the exit of a Snakemake process that ran a checkpoint's group job on a node, whatever its outcome (atexit):
    remove the checkpoint's shard folder from the node's scratch, the group job's own (results root, model and
    checkpoint name it). A finished group has deleted them already (temp); after a failed job, or SLURM's SIGTERM at a
    time limit, a preemption or an scancel (Snakemake's scheduler then exits normally), nothing else would: the main
    process cannot reach a node's disk, and `onerror` does not run in jobs (Snakemake starts them with --no-hooks).
    The Snakemake command a SLURM job runs cannot be wrapped in a shell trap: the plugin writes it whole."""
    for target in getattr(workflow.dag_settings, "target_jobs", None) or ():  # None where parsing failed
        if target.rulename == "extract_hidden_states":  # the job that wrote them; group-local temp: its metrics too
            model, checkpoint = target.wildcards_dict["model"], target.wildcards_dict["checkpoint"]
            shutil.rmtree(paths.shards(model, checkpoint, scratch=SCRATCH), ignore_errors=True)


if workflow.remote_exec and SCRATCH is not None:  # a job's processes on a node (the batch script's, its job step's)
    atexit.register(remove_group_shards)


def shards_output():
    """Hidden-state shards are temporary unless extraction.keep_embeddings: at the paper's scale they are terabytes.
    On a node-local `scratch` they are group-local too (`group_jobs`): Snakemake runs a checkpoint's extraction and
    its metrics jobs as one job on one node, and its main process never looks for them (docs/cluster.md)."""
    if config["extraction"]["keep_embeddings"]:
        return directory(SHARDS)
    return temp(directory(SHARDS), group_jobs=SCRATCH is not None)


def weights_receipt(ckpt):
    """A checkpoint's download receipt, where a download job fetches what loading it reads (models.download)."""
    return paths.weights_receipt(ckpt.model, ckpt.name) if download.needed(ckpt, EXPERIMENT.models[ckpt.model]) else []


def downloaded_weights(wildcards):
    """What a checkpoint's extraction reads of the download jobs: its receipt (`weights_receipt`)."""
    return weights_receipt(EXPERIMENT.checkpoint(wildcards.model, wildcards.checkpoint))


def checkpoint_metrics(ckpt):
    """A checkpoint's metrics files, one per metrics job: once all exist, its weights have left the cache (the last
    of those jobs evicts them, with extraction.evict_weights: shape_of_learning.metrics.job)."""
    return [paths.layer_metrics(ckpt.model, ckpt.name, group) for group in EXPERIMENT.layer_groups(ckpt.model)]


# With extraction.evict_weights, a lane of downloads (Experiment.download_lanes) holds the weights of two checkpoints
# at most: one extracting or measured, the next downloading. Only checkpoints still to measure wait, and ancient(): a
# finished checkpoint never reruns for another's.
GATES = (EXPERIMENT.download_gates(lambda ckpt: not all(map(os.path.exists, checkpoint_metrics(ckpt))))
         if config["extraction"]["evict_weights"] and workflow.is_main_process else {})


def download_gate(wildcards):
    """The metrics files of the checkpoint a checkpoint's download waits for, if any: its weights evicted. A download
    that has run (its receipt still there) keeps the gate it waited on, as Snakemake recorded its inputs: a set of
    inputs changed since would make a rerun (a resume) download and extract it again."""
    receipt = paths.weights_receipt(wildcards.model, wildcards.checkpoint)
    gate = GATES.get((wildcards.model, wildcards.checkpoint))
    if gate and not Path(receipt).exists():
        return [ancient(path) for path in checkpoint_metrics(gate)]
    recorded = (workflow.persistence.input(IOFile(receipt)) if workflow.persistence else None) or []
    pin = paths.lock(wildcards.model, wildcards.checkpoint)
    return [ancient(path) for path in recorded if path != pin and Path(path).exists()]


def last_weights(model):
    """The receipt of a model's last checkpoint (`weights_receipt`): what Rajaee & Pilehvar's fine-tunings and
    analyses load, offline, as extraction does."""
    return weights_receipt(EXPERIMENT.last_checkpoint(model))


def finetuning_data(wildcards):
    """What a `finetune:` entry trains on: the dataset of its `data` ("dataset/split"), and its base model's lock and
    downloaded weights."""
    spec = model_entry(wildcards)["finetune"]
    return {"pairs": paths.dataset(parse_reference(spec["data"])[0]), "pin": last_pin(spec["base"]),
            "weights": last_weights(spec["base"])}


def claim_results_root():
    """Record this run's config in its results root (`onstart`: jobs are about to run; not a dry run, --lint or
    --report, which write nothing)."""
    results_root.claim(paths.WRITTEN_BY, CONFIG_NAME)


def report_outcome():
    """Print what this run was asked for and could not make, and why (shape_of_learning.experiment.outcome)."""
    dag = workflow.dag
    requested_rules = {job.rule.name for job in dag.targetjobs}
    for line in missing(EXPERIMENT, set(map(str, dag.derived_targetfiles)), requested_rules, RUN_STARTED):
        print(line, file=sys.stderr)
