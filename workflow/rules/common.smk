# Plans every job from the validated config at parse time: no Snakemake checkpoints, so dry runs stay fast.
from shape_of_learning.experiment import plan

EXPERIMENT = plan(config)
CORPUS = f"results/corpus/{config['corpus']['name']}"
ENV = "../../envs/pipeline.yaml"


wildcard_constraints:
    model=r"[A-Za-z0-9._-]+",
    checkpoint=r"[A-Za-z0-9._-]+",
    layer=r"\d+",


def all_checkpoints():
    return [(model, ckpt) for model, ckpts in EXPERIMENT.checkpoints.items() for ckpt in ckpts]


PINS = [f"results/lock/{model}/{ckpt.name}.json" for model, ckpt in all_checkpoints()]
MANIFESTS = [f"results/manifests/{model}/{ckpt.name}.json" for model, ckpt in all_checkpoints()]
LAYER_METRICS = [
    f"results/metrics/{model}/{ckpt.name}/layer_{layer}.parquet"
    for model, ckpt in all_checkpoints()
    for layer in EXPERIMENT.layers(model)
]
FIGURES = [f"results/figures/{fig.name}.{ext}" for fig in EXPERIMENT.figures for ext in ("png", "pdf")]


def model_entry(wildcards):
    return EXPERIMENT.models[wildcards.model]


def trained_model_dir(wildcards):
    """A model the pipeline trains itself is an input of its checkpoints' jobs; a Hub or local model is not."""
    return f"results/models/{wildcards.model}" if "train" in EXPERIMENT.models[wildcards.model] else []


def resource(rule_name, key):
    return config["resources"][rule_name][key]
