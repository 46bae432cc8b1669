# Plans every job from the validated config at parse time: no Snakemake checkpoints, so dry runs stay fast.
from shape_of_learning.experiment import plan

EXPERIMENT = plan(config)
if workflow.output_settings.dryrun:  # while parsing, Snakemake tells a dry run by its output settings only
    from shape_of_learning.disk import summary, volumes

    print(summary(config, volumes(config, EXPERIMENT)), file=sys.stderr)
CORPUS = f"results/corpus/{config['corpus']['name']}"
# Image and audio corpora (Godey et al.): one sampled file per modality, read by the models of that modality.
MEDIA = {modality: f"results/corpus/{config[f'{modality}_corpus']['name']}/{modality}.parquet"
         for modality in ("image", "audio") if config.get(f"{modality}_corpus")}
ENV = "../../envs/pipeline.yaml"


wildcard_constraints:
    model=r"[A-Za-z0-9._-]+",
    checkpoint=r"[A-Za-z0-9._-]+",
    layer_group=r"\d+(-\d+)?",


def all_checkpoints():
    return [(model, ckpt) for model, ckpts in EXPERIMENT.checkpoints.items() for ckpt in ckpts]


PINS = [f"results/lock/{model}/{ckpt.name}.json" for model, ckpt in all_checkpoints()]
LAYER_METRICS = [
    f"results/metrics/{model}/{ckpt.name}/layer_{group}.parquet"
    for model, ckpt in all_checkpoints()
    for group in EXPERIMENT.layer_groups(model)
]
FIGURES = [path for fig in EXPERIMENT.figures for path in fig.outputs]


def model_entry(wildcards):
    return EXPERIMENT.models[wildcards.model]


def model_corpus(wildcards, text=f"{CORPUS}/windows.parquet"):
    """The corpus items a model reads, by its modality: text windows, or the sampled image or audio files."""
    modality = EXPERIMENT.models[wildcards.model]["modality"]
    return text if modality == "text" else MEDIA[modality]


def trained_model_dir(wildcards):
    """A model the pipeline trains or fine-tunes itself is an input of its checkpoints' jobs; a Hub or local model
    is not."""
    entry = EXPERIMENT.models[wildcards.model]
    if "finetune" in entry:
        return f"results/finetuned/{wildcards.model}"
    return f"results/models/{wildcards.model}" if "train" in entry else []


def result_settings(section, *ignored):
    """A config section as a job's params: without the settings that cannot change a result (devices, batch sizes,
    storage), keys sorted at every level. Snakemake reruns a job when the repr of its params changes, so neither
    those settings nor the order of keys in a config file may rerun finished work."""
    def canonical(value):
        if isinstance(value, dict):
            return {key: canonical(value[key]) for key in sorted(value)}
        return [canonical(item) for item in value] if isinstance(value, list) else value

    return canonical({key: value for key, value in section.items() if key not in ignored})


def shards_dir(path):
    """Hidden-state shards are temporary unless extraction.keep_embeddings: at the paper's scale they are terabytes."""
    return path if config["extraction"]["keep_embeddings"] else temp(path)


# Rajaee & Pilehvar (finetuning.smk): a `finetune:` model starts from the last checkpoint of its base model.
def last_checkpoint(model):
    return EXPERIMENT.checkpoints[model][-1]


def finetune_inputs(wildcards):
    spec = EXPERIMENT.models[wildcards.model]["finetune"]
    dataset, _ = finetuning_plan.split_reference(spec["data"], FINETUNING["datasets"], wildcards.model)
    base = last_checkpoint(spec["base"])
    return {"pairs": f"results/datasets/{dataset}", "pin": f"results/lock/{spec['base']}/{base.name}.json"}


def finetune_scale(wildcards):
    """The rating scale of the fine-tuning data (`data` is "dataset/split")."""
    dataset, _ = finetuning_plan.split_reference(EXPERIMENT.models[wildcards.model]["finetune"]["data"],
                                                 FINETUNING["datasets"], wildcards.model)
    return FINETUNING["datasets"][dataset]["scale"]
