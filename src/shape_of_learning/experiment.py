"""The experiment as the workflow sees it: every checkpoint job and every figure, planned from the config alone.

Everything is enumerated at parse time (no Snakemake checkpoints), so `snakemake -n` on tens of thousands of jobs
stays fast and works offline.
"""

import inspect
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from shape_of_learning.figures import FIGURE_KINDS
from shape_of_learning.metrics.registry import METRICS
from shape_of_learning.pinning import check_revisions_offline
from shape_of_learning.registry import Checkpoint, checkpoints

WORKFLOW = Path(__file__).resolve().parents[2] / "workflow"
SCHEMAS = WORKFLOW / "schemas"


def config_schema() -> dict:
    """workflow/schemas/config.schema.yaml with the metric names of `shape_of_learning.metrics.registry` filled in
    (the enum of `$defs/metric`, the default of `metrics.names`), so that metrics are declared in the registry only."""
    schema = yaml.safe_load((SCHEMAS / "config.schema.yaml").read_text())
    schema["$defs"]["metric"]["enum"] = list(METRICS)
    schema["properties"]["metrics"]["properties"]["names"]["default"] = list(METRICS)
    models = schema["properties"]["models"]["additionalProperties"]
    models["$ref"] = (SCHEMAS / models["$ref"]).as_uri()  # the filled-in schema is validated from a temporary file
    return schema


def validate_config(config: dict) -> dict:
    """Validate against workflow/schemas/ and fill in defaults, model entries included, before any job is planned.

    Snakemake fills defaults of `properties` only, not of each entry under `models:` (`additionalProperties`), so
    every model entry is validated against its own schema as well. An invalid config raises ConfigError, naming the
    key, the problem and the allowed values.
    """
    with tempfile.TemporaryDirectory() as folder:  # snakemake.utils.validate reads a schema from a file
        schema = Path(folder) / "config.schema.yaml"
        schema.write_text(yaml.safe_dump(config_schema(), sort_keys=False))
        _validate(config, schema, "config")
    for name, entry in config["models"].items():
        _validate(entry, SCHEMAS / "model.schema.yaml", f"models.{name}")
    return config


def validate_model_entry(entry: dict) -> dict:
    """One entry of `models:` checked against model.schema.yaml, its defaults filled in place: what every function
    taking a model entry (registry, extraction, training) expects."""
    return _validate(entry, SCHEMAS / "model.schema.yaml", "model entry")


class ConfigError(ValueError):
    """The config breaks its schema; the message names the key, what is wrong and what is allowed."""


def _validate(instance: dict, schema: Path, where: str) -> dict:
    import jsonschema
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(instance, str(schema))
    except WorkflowError as failure:
        error = failure.__context__  # Snakemake raises its WorkflowError while handling jsonschema's error
        if not isinstance(error, jsonschema.ValidationError):
            raise
        raise ConfigError(_explain(error, where)) from None
    return instance


def _explain(error, where: str) -> str:
    """One line for a schema violation instead of Snakemake's dump of the whole schema."""
    import jsonschema

    alternatives = [s["required"] for s in error.schema.get("oneOf", []) if set(s) == {"required"}]
    if error.validator == "oneOf" and alternatives:  # e.g. a model's source: exactly one of hub_id, path, ...
        keys = [key for required in alternatives for key in required]
        found = [key for key in keys if key in error.instance]
        return f"{_key(where, error)}: give exactly one of {', '.join(keys)}; found {', '.join(found) or 'none'}"
    while error.context:  # oneOf/anyOf: what is wrong inside the alternative of the instance's own type
        same_type = [e for e in error.context if not (e.validator == "type" and not e.relative_path)]
        error = jsonschema.exceptions.best_match(same_type or error.context)
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return f"{_key(where, error)}: {error.instance!r} is not allowed; allowed: {allowed}"
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return f"{_key(where, error)}: {error.message}; allowed keys: {allowed}"
    return f"{_key(where, error)}: {error.message}"


def _key(where: str, error) -> str:
    return ".".join([where, *map(str, error.absolute_path)])


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
    """One figure to draw: its file stem, its kind (a key of `shape_of_learning.figures.FIGURE_KINDS`) and the
    keyword arguments of the kind's plotting function."""

    name: str
    kind: str
    arguments: dict  # models=/model= and metric=/metrics=, as the plotting function names them

    @staticmethod
    def files(name: str) -> dict[str, str]:
        """The PNG and the PDF of figure `name` (or of a pattern such as "{figure}"), relative to the working dir."""
        return {ext: f"results/figures/{name}.{ext}" for ext in ("png", "pdf")}

    @property
    def outputs(self) -> list[str]:
        return list(self.files(self.name).values())

    @property
    def models(self) -> list[str]:
        return self.arguments["models"] if "models" in self.arguments else [self.arguments["model"]]

    @property
    def metrics(self) -> list[str]:
        return self.arguments["metrics"] if "metrics" in self.arguments else [self.arguments["metric"]]

    @property
    def labels(self) -> dict[str, str]:
        """Its row in the report: the kind's label, and its model and its metric where it draws a single one."""
        single = {key: self.arguments[key] for key in ("model", "metric") if key in self.arguments}
        return {"figure": FIGURE_KINDS[self.kind].label, **single}

    def caption(self, snakemake) -> str:
        """The kind's caption (workflow/report/), rendered as Snakemake renders a report caption."""
        import jinja2

        template = (WORKFLOW / "report" / FIGURE_KINDS[self.kind].caption).read_text()
        return jinja2.Template(template, trim_blocks=True, lstrip_blocks=True).render(snakemake=snakemake)

    def draw(self, summary, png, pdf):
        return FIGURE_KINDS[self.kind].draw(summary, out_png=png, out_pdf=pdf, **self.arguments)


@dataclass
class Experiment:
    models: dict[str, dict]
    checkpoints: dict[str, list[Checkpoint]]
    layers_per_job: int = 1
    figures: list[Figure] = field(default_factory=list)

    def figure(self, name: str) -> Figure:
        return next(figure for figure in self.figures if figure.name == name)

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
    check_revisions_offline(experiment.checkpoints, models)  # no network: local dirs, recorded or cached refs
    for kind, entry in config["figures"].items():
        if kind in FIGURE_KINDS:
            experiment.figures += plan_figures(kind, entry, config)
    return experiment


def plan_figures(kind: str, entry: dict | list, config: dict) -> list[Figure]:
    """The figures of one `figures.<kind>` entry (see `shape_of_learning.figures.FigureKind`), checked against the
    models and metrics of the config."""
    spec = FIGURE_KINDS[kind]
    entries = entry if isinstance(entry, list) else [entry]
    if spec.per_model:
        entries = [{**{key: value for key, value in e.items() if key != "models"}, "model": model}
                   for e in entries for model in e["models"]]
    figures = []
    for arguments in entries:
        figure = Figure(spec.stem.format(**arguments), kind, arguments)
        if unknown := [m for m in figure.models if m not in config["models"]]:
            raise ValueError(f"figures.{kind} names models {unknown} that are not in the `models:` registry (known: "
                             f"{sorted(config['models'])}); add an entry for each or remove them from the figure")
        if missing := [m for m in figure.metrics if m not in config["metrics"]["names"]]:
            raise ValueError(f"figures.{kind} plots {missing}, which metrics.names does not compute; add them to "
                             "metrics.names")
        settings = {"duplicates": config["figures"]["duplicates"],
                    "layer_average_over": config["figures"]["layer_average"],
                    "groups": {model: model_group(config["models"][model]) for model in figure.models}}
        taken = inspect.signature(spec.draw).parameters
        figures.append(Figure(figure.name, kind, arguments | {k: v for k, v in settings.items() if k in taken}))
    return figures
