"""Every file the workflow writes, stated once: rules, scripts, planning, verify and the CLIs build their paths here.

Paths are relative to the workflow's working directory (`snakemake --directory`). Each function returns one path, or,
called without arguments, the Snakemake pattern with its wildcards: ``lock()`` is
``"results/lock/{model}/{checkpoint}.json"``, ``lock("gpt2", "main")`` is ``"results/lock/gpt2/main.json"``.

Every result lies under the results root RESULTS, the config's `results` (default DEFAULT_RESULTS), read at import from
the environment, where common.smk puts it for its process and every job's (`experiment.results_root.export`). Logs
of the default root go to logs/, those of any other root to {root}/logs/: two roots' logs never mix, and the
default's stay where they always were. WRITTEN_BY records which config wrote the root (`experiment.results_root`).
"""

import os

from shape_of_learning import RESULTS_VARIABLE

DEFAULT_RESULTS = "results"
RESULTS = os.environ.get(RESULTS_VARIABLE, DEFAULT_RESULTS)
LOGS = "logs" if RESULTS == DEFAULT_RESULTS else f"{RESULTS}/logs"
WRITTEN_BY = f"{RESULTS}/.written-by.json"


def log(rule: str, job: str = "") -> str:
    """A job's log: logs/{rule}/{job}.log, `job` naming the job by its wildcards ("{model}/{checkpoint}"), or
    logs/{rule}.log for a rule with a single job."""
    return f"{LOGS}/{rule}{'/' + job if job else ''}.log"


def benchmark(rule: str, job: str = "") -> str:
    """A job's time and memory (Snakemake's `benchmark:`), laid out as its log under results/benchmarks/."""
    return f"{RESULTS}/benchmarks/{rule}{'/' + job if job else ''}.tsv"


# Corpus: the dump, its prose, the text windows, and the sampled image and audio files.
def corpus_dir(corpus: str = "{corpus}") -> str:
    return f"{RESULTS}/corpus/{corpus}"


def raw_corpus(corpus: str = "{corpus}") -> str:
    return f"{corpus_dir(corpus)}/raw.xml"


def clean_corpus(corpus: str = "{corpus}") -> str:
    return f"{corpus_dir(corpus)}/clean.txt"


def clean_stats(corpus: str = "{corpus}") -> str:
    return f"{corpus_dir(corpus)}/clean.stats.json"


def windows(corpus: str = "{corpus}") -> str:
    return f"{corpus_dir(corpus)}/windows.parquet"


def media(corpus: str = "{corpus}", modality: str = "{modality}") -> str:
    return f"{corpus_dir(corpus)}/{modality}.parquet"


# Models: the demo's own training runs, the fine-tuned encoders, the pin of every checkpoint and its download.
def trained_model(model: str = "{model}") -> str:
    return f"{RESULTS}/models/{model}"


def trained_checkpoint(model: str = "{model}", step: int | str = "{step}") -> str:
    return f"{trained_model(model)}/step{step}"


def finetuned_model(model: str = "{model}") -> str:
    return f"{RESULTS}/finetuned/{model}"


def lock_dir(model: str = "{model}") -> str:
    return f"{RESULTS}/lock/{model}"


def lock(model: str = "{model}", checkpoint: str = "{checkpoint}") -> str:
    return f"{lock_dir(model)}/{checkpoint}.json"


def weights_receipt(model: str = "{model}", checkpoint: str = "{checkpoint}") -> str:
    """What a checkpoint's download job put into the Hugging Face cache for its extraction: temporary, gone once the
    extraction is done."""
    return f"{RESULTS}/weights/{model}/{checkpoint}.json"


# Extraction: one shard per layer (temporary unless extraction.keep_embeddings) and the job's manifest.
def shards(model: str = "{model}", checkpoint: str = "{checkpoint}", scratch: str | None = None) -> str:
    """A checkpoint's shards: in the results root, or on a node-local `scratch` folder (the config's, expanded:
    experiment.config.shards_scratch) in a folder named after the results root's absolute path, so that the runs of
    two roots never share one."""
    root = RESULTS if scratch is None else f"{scratch.rstrip('/')}/{os.path.abspath(RESULTS).lstrip('/')}"
    return f"{root}/embeddings/{model}/{checkpoint}"


def shard(model: str = "{model}", checkpoint: str = "{checkpoint}", layer: int | str = "{layer}") -> str:
    return f"{shards(model, checkpoint)}/{shard_name(layer)}"


def shard_name(layer: int | str) -> str:
    return f"layer_{layer}.parquet"


def manifest(model: str = "{model}", checkpoint: str = "{checkpoint}") -> str:
    return f"{RESULTS}/manifests/{model}/{checkpoint}.json"


# Metrics: one file per metrics job (a group of consecutive layers), then the tidy tables.
def layer_metrics(model: str = "{model}", checkpoint: str = "{checkpoint}", layer_group: str = "{layer_group}") -> str:
    return f"{RESULTS}/metrics/{model}/{checkpoint}/layer_{layer_group}.parquet"


def table(name: str) -> str:
    """results/tables/{name}: metrics.parquet, summary.parquet, summary.csv, rajaee_pilehvar_table1.csv, ..."""
    return f"{RESULTS}/tables/{name}"


def model_table(model: str = "{model}", series: str = "{series}", part: str = "{part}") -> str:
    """One model's tables, which its figures read: `part` metrics (one row per batch) or summary (over batches), of
    one `series`: its checkpoints, or its random-init baseline (models.checkpoints.RANDOM_INIT), kept apart so that a
    figure without baselines never waits for one."""
    return table(f"models/{model}/{series}.{part}.parquet")


METRICS_TABLE = table("metrics.parquet")
SUMMARY = table("summary.parquet")
SUMMARY_CSV = table("summary.csv")
CHECKPOINTS_TABLE = table("checkpoints.csv")  # every checkpoint's health
CLAIMS_TABLE = table("claims.csv")  # the claims scorecard: each paper's claims checked on the run's tables
CLAIMS_REPORT = table("claims.html")  # the same, the report's claims page


# Health: one table per model, its checkpoints' losses, duplicates and verdicts.
def health(model: str = "{model}") -> str:
    return table(f"health/{model}.parquet")


# Figures: a PNG and a PDF per figure, named by its stem.
FIGURE_FORMATS = ("png", "pdf")


def figure(name: str = "{figure}", ext: str = "png") -> str:
    return f"{RESULTS}/figures/{name}.{ext}"


REPORT = f"{RESULTS}/report.html"


# Rajaee & Pilehvar: rated pairs, their downloads and digests, and each analysis job's outputs.
def dataset(name: str = "{dataset}") -> str:
    """A folder with one {split}.parquet per configured split."""
    return f"{RESULTS}/datasets/{name}"


def dataset_split(name: str = "{dataset}", split: str = "{split}") -> str:
    return f"{dataset(name)}/{split}.parquet"


def dataset_download(name: str = "{dataset}") -> str:
    return f"{RESULTS}/downloads/{name}/{name}.tar"


def dataset_lock(name: str = "{dataset}") -> str:
    """The sha256 the first download of a dataset without a configured digest recorded."""
    return f"{RESULTS}/lock/dataset-{name}.json"


RAJAEE_PILEHVAR_TABLES = [table(f"rajaee_pilehvar_table{number}.csv") for number in (1, 2)]  # Tables 1-2, tidy
RAJAEE_PILEHVAR_REPORT = table("rajaee_pilehvar_tables.html")  # Tables 1-2 as the paper lays them out
RAJAEE_PILEHVAR_FIGURES = {
    number: [figure(f"rajaee_pilehvar_figure{number}", ext) for ext in FIGURE_FORMATS] for number in (1, 2)
}


def isotropy_settings(
    dataset: str = "{dataset}", split: str = "{split}", model: str = "{model}", part: str = "settings"
) -> str:
    """One analysis job's `part`: settings (its rows of Tables 1-2), layers (I(W) per layer, Figure 1) or view (the
    PCA view of Figure 2)."""
    return f"{RESULTS}/rajaee_pilehvar/{dataset}/{split}/{model}/{part}.parquet"
