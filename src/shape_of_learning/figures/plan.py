"""Figures planned from the validated config: each entry of `figures:` as the figures of its kind
(`shape_of_learning.figures.kinds`), checked against the config's models and metrics, and the random-init baselines
the figures that draw them need. `shape_of_learning.experiment.plan` adds them to the experiment."""

import inspect

from shape_of_learning.figures.kinds import FIGURE_KINDS, Figure
from shape_of_learning.figures.profile_by_modality import model_group
from shape_of_learning.models.checkpoints import RandomInit, random_init


def plan_figures(kind: str, entry: dict | list, config: dict) -> list[Figure]:
    """The figures of one `figures.<kind>` entry (see `shape_of_learning.figures.kinds.FigureKind`), checked against
    the models and metrics of the config."""
    spec = FIGURE_KINDS[kind]
    entries = [
        {"target": spec.target(position), **e}
        for position, e in enumerate(entry if isinstance(entry, list) else [entry])
    ]
    if spec.per_model:
        entries = [
            {**{key: value for key, value in e.items() if key != "models"}, "model": model}
            for e in entries
            for model in e["models"]
        ]
    figures = []
    for entry_arguments in entries:
        target = entry_arguments["target"]
        arguments = {key: value for key, value in entry_arguments.items() if key != "target"}
        figure = Figure(spec.stem.format(**arguments), kind, arguments, target)
        if unknown := [m for m in figure.models if m not in config["models"]]:
            raise ValueError(
                f"figures.{kind} names models {unknown} that are not in the `models:` registry (known: "
                f"{sorted(config['models'])}, a `finetune:` entry by the run of each seed); add an entry "
                "for each or remove them from the figure"
            )
        if missing := [m for m in figure.metrics if m not in config["metrics"]["names"]]:
            raise ValueError(
                f"figures.{kind} plots {missing}, which metrics.names does not compute; add them to metrics.names"
            )
        settings = {
            "flagged": config["figures"]["flagged"],
            "layer_average_over": config["figures"]["layer_average"],
            "groups": {model: model_group(config["models"][model]) for model in figure.models},
            "standard_errors": config["health"]["standard_errors"],
            "positions_per_window": config["extraction"]["positions_per_window"],
        }
        taken = inspect.signature(spec.draw).parameters
        figures.append(Figure(figure.name, kind, arguments | {k: v for k, v in settings.items() if k in taken}, target))
    return figures


def plan_baselines(experiment) -> dict[str, RandomInit]:
    """A random-init baseline for each model of a figure that draws baselines (its `random_init_seed`), unless a
    checkpoint of the model is step 0 (a training run's initialisation: the baseline already). Built from the
    architecture of the model's last checkpoint."""
    seeds = {
        model: figure.arguments["random_init_seed"]
        for figure in experiment.figures
        if "random_init_seed" in figure.arguments
        for model in figure.models
    }
    return {
        model: random_init(experiment.last_checkpoint(model), seed)
        for model, seed in seeds.items()
        if not any(ckpt.step == 0 for ckpt in experiment.checkpoints[model])
    }
