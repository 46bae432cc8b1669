"""The experiment as the workflow sees it: every checkpoint job and every figure, planned from the config alone.

Everything is enumerated at parse time (no Snakemake checkpoints), so `snakemake -n` on tens of thousands of jobs
stays fast and works offline.
"""

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from shape_of_learning.registry import Checkpoint, checkpoints

SCHEMAS = Path(__file__).resolve().parents[2] / "workflow" / "schemas"


def validate_config(config: dict) -> dict:
    """Validate against workflow/schemas/ and fill in defaults, model entries included, before any job is planned.

    Snakemake fills defaults of `properties` only, not of each entry under `models:` (`additionalProperties`), so
    every model entry is validated against its own schema as well.
    """
    from snakemake.utils import validate

    validate(config, str(SCHEMAS / "config.schema.yaml"))
    for entry in config["models"].values():
        validate_model_entry(entry)
    return config


def validate_model_entry(entry: dict) -> dict:
    """One entry of `models:` checked against model.schema.yaml, its defaults filled in place: what every function
    taking a model entry (registry, extraction, training) expects."""
    from snakemake.utils import validate

    validate(entry, str(SCHEMAS / "model.schema.yaml"))
    return entry


def load_config(*paths: Path) -> dict:
    """Read a config or preset (several merge, later ones win, as `--configfile a.yaml b.yaml` does) and validate it
    exactly as the Snakefile does."""
    from snakemake.utils import update_config

    config = {}
    for path in paths:
        update_config(config, yaml.safe_load(Path(path).read_text()))
    return validate_config(config)


@dataclass(frozen=True)
class Figure:
    """One figure of the paper: a plotting function of `shape_of_learning.figures` and its keyword arguments."""

    name: str  # file stem under results/figures/
    function: str
    arguments: dict  # models=/model= and metric=/metrics=, as the plotting function names them

    @property
    def outputs(self) -> list[str]:
        """The PNG and the PDF, relative to the workflow's working directory."""
        return [f"results/figures/{self.name}.{ext}" for ext in ("png", "pdf")]

    @property
    def models(self) -> list[str]:
        return self.arguments["models"] if "models" in self.arguments else [self.arguments["model"]]

    @property
    def metrics(self) -> list[str]:
        return self.arguments["metrics"] if "metrics" in self.arguments else [self.arguments["metric"]]

    def draw(self, summary, png, pdf):
        from shape_of_learning import figures  # matplotlib only where a figure is drawn, not at DAG-build time

        return getattr(figures, self.function)(summary, out_png=png, out_pdf=pdf, **self.arguments)


@dataclass
class Experiment:
    models: dict[str, dict]
    checkpoints: dict[str, list[Checkpoint]]
    layers_per_job: int = 1
    figures: list[Figure] = field(default_factory=list)

    def checkpoint(self, model: str, name: str) -> Checkpoint:
        for ckpt in self.checkpoints[model]:
            if ckpt.name == name:
                return ckpt
        raise KeyError(f"model {model!r} has no checkpoint {name!r}")

    def hidden_states(self, model: str) -> range:
        """The hidden states of one forward pass, by index: the embedding output (0) and each of the model's `layers`
        blocks (1..layers)."""
        return range(self.models[model]["layers"] + 1)

    def layer_groups(self, model: str) -> list[str]:
        """The layers of each metrics job, as named in its output: "3", or "0-7" with metrics.layers_per_job: 8."""
        states, size = self.hidden_states(model), self.layers_per_job
        chunks = [states[i:i + size] for i in range(0, len(states), size)]
        return [str(c[0]) if len(c) == 1 else f"{c[0]}-{c[-1]}" for c in chunks]


def model_group(entry: dict) -> dict:
    """Where the modality figure draws a model: its modality's panel, and its line style (what a token is)."""
    modality = entry["modality"]
    if modality == "text":
        return {"modality": modality, "group": f"{entry['text_unit']}-level"}
    return {"modality": modality, "group": "CNN" if entry["kind"] == "cnn" else "transformer"}


def layers_in_group(group: str) -> range:
    """Inverse of `Experiment.layer_groups`: "3" -> range(3, 4), "0-7" -> range(0, 8)."""
    first, _, last = group.partition("-")
    return range(int(first), int(last or first) + 1)


def plan(config: dict) -> Experiment:
    """Expand a validated config into checkpoints and figures; cross-references the schema cannot check fail here."""
    models = config["models"]
    for name, entry in models.items():
        modality = entry["modality"]
        if modality != "text" and not config.get(f"{modality}_corpus"):
            raise ValueError(f"model {name!r} reads {modality} (modality: {modality}) but the config has no "
                             f"`{modality}_corpus`; add one (name, local_path to a folder or archive, count) or "
                             "remove the model")
    experiment = Experiment(models, {name: checkpoints(name, entry) for name, entry in models.items()},
                            config["metrics"]["layers_per_job"])
    computed = set(config["metrics"]["names"])
    figures = config.get("figures", {})

    def figure(name, function, **arguments):
        fig = Figure(name, function, {**arguments, "duplicates": figures["duplicates"]})
        unknown = [m for m in fig.models if m not in models]
        if unknown:
            raise ValueError(
                f"figures.{function} names models {unknown} that are not in the `models:` registry "
                f"(known: {sorted(models)}); add an entry for each or remove them from the figure"
            )
        missing = [m for m in fig.metrics if m not in computed]
        if missing:
            raise ValueError(
                f"figures.{function} plots {missing}, which metrics.names does not compute; add them to metrics.names"
            )
        experiment.figures.append(fig)

    if "anisotropy_by_layer" in figures:
        spec = figures["anisotropy_by_layer"]
        figure("anisotropy_by_layer", "anisotropy_by_layer", models=spec["models"], metric=spec["metric"])
    for spec in figures.get("profile_across_checkpoints", []):
        figure(f"profile_{spec['model']}_{spec['metric']}", "profile_across_checkpoints", model=spec["model"],
               metric=spec["metric"])
    if "id_across_checkpoints" in figures:
        spec = figures["id_across_checkpoints"]
        figure("id_across_checkpoints", "id_across_checkpoints", models=spec["models"], metric=spec["metric"],
               layer_average_over=figures["layer_average"])
    if "id_estimators" in figures:
        spec = figures["id_estimators"]
        for model in spec["models"]:
            figure(f"id_estimators_{model}", "id_estimators", model=model, metrics=spec["metrics"],
                   layer_average_over=figures["layer_average"])
    if "by_modality" in figures:
        spec = figures["by_modality"]
        figure("by_modality", "by_modality", models=spec["models"], metric=spec["metric"],
               groups={model: model_group(models[model]) for model in spec["models"] if model in models})
    return experiment
