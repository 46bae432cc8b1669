"""Every kind of figure, declared once (`FIGURE_KINDS`), and a figure of the plan (`Figure`): its files, its report
caption and its drawing. The workflow plans and draws every figure from these (one `plot_figure` rule).

A figure's report caption (workflow/report/figure.rst) opens with the first paragraph of its plotting function's
docstring, written for a reader of the report (what the figure shows, what the paper found), and adds what every
figure shares: models, batches, layer average, estimator settings, checkpoint health, dtype.
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from shape_of_learning import paths
from shape_of_learning.figures.loss import loss_across_checkpoints
from shape_of_learning.figures.razzhigaev import (
    anisotropy_by_layer,
    id_across_checkpoints,
    id_estimators,
    profile_across_checkpoints,
)
from shape_of_learning.figures.profile_by_modality import profile_by_modality
from shape_of_learning.figures.style import estimator_settings


@dataclass(frozen=True)
class FigureKind:
    """A kind of figure, declared once: its plotting function (whose docstring opens its caption), its report label,
    its file names.

    Its entry under `figures:` in the config (one schema entry, named as the function) gives one figure, or one per
    item of a list, or with `per_model` one per entry of its `models` (drawn with `model=`), built by the named
    target of the entry's `target`, else the kind's target for the entry's place in its list (`targets`: the paper's
    figure numbers), else the kind's name. Files: `paths.figure` of `stem`,
    formatted with the figure's arguments. The plotting function gets the entry's fields (less `target`,
    the named target that builds it) as keyword arguments, and those of `flagged`, `layer_average_over`, `groups` and
    `standard_errors` (health's) it takes, from the config (`shape_of_learning.figures.plan`). It reads its models' summary tables, or with
    `reads="health"` their health tables.
    """

    draw: Callable
    label: str  # the report's "figure" column
    stem: str
    per_model: bool = False
    reads: str = "summary"
    targets: tuple[str, ...] = ()  # the named targets of its first entries where they have no `target`

    def target(self, position: int) -> str:
        """The named target of the kind's entry at `position` (in the config's list) that names none."""
        return self.targets[position] if position < len(self.targets) else self.draw.__name__


FIGURE_KINDS: dict[str, FigureKind] = {
    kind.draw.__name__: kind
    for kind in [
        FigureKind(
            anisotropy_by_layer, "1: anisotropy, encoders vs decoders", "anisotropy_by_layer", targets=("figure1",)
        ),
        FigureKind(
            profile_across_checkpoints,
            "2-3: profile across checkpoints",
            "profile_{model}_{metric}",
            targets=("figure2", "figure3"),
        ),  # the paper's Bloom, then Pythia
        FigureKind(
            id_across_checkpoints, "4: intrinsic dimension vs step", "id_across_checkpoints", targets=("figure4",)
        ),
        FigureKind(
            id_estimators, "5: three ID estimators", "id_estimators_{model}", per_model=True, targets=("figure5",)
        ),
        FigureKind(
            profile_by_modality,
            "Godey et al.: by modality, trained and at initialisation",
            "profile_by_modality",
            targets=("godey",),
        ),
        FigureKind(
            loss_across_checkpoints, "loss and checkpoint health", "loss_{model}", per_model=True, reads="health"
        ),
    ]
}


@dataclass(frozen=True)
class Figure:
    """One figure of the plan: its file stem, its kind (a key of `FIGURE_KINDS`), the keyword arguments of the kind's
    plotting function and its named target. The tables it reads: `Experiment.figure_inputs`."""

    name: str
    kind: str
    arguments: dict  # models=/model= and metric=/metrics=, as the plotting function names them
    # the named target that builds it: its entry's `target`, else its kind (`snakemake figure3`); no param of the job
    target: str = field(repr=False, compare=False)

    @property
    def outputs(self) -> list[str]:
        """Its PNG and PDF, relative to the working directory."""
        return [paths.figure(self.name, ext) for ext in paths.FIGURE_FORMATS]

    @property
    def models(self) -> list[str]:
        return self.arguments["models"] if "models" in self.arguments else [self.arguments["model"]]

    @property
    def metrics(self) -> list[str]:
        """The metrics it draws; none for a figure of the health tables."""
        return self.arguments.get("metrics") or [self.arguments[key] for key in ("metric",) if key in self.arguments]

    @property
    def reads(self) -> str:
        return FIGURE_KINDS[self.kind].reads

    @property
    def labels(self) -> dict[str, str]:
        """Its row in the report: the kind's label, and its model and its metric where it draws a single one."""
        single = {key: self.arguments[key] for key in ("model", "metric") if key in self.arguments}
        return {"figure": FIGURE_KINDS[self.kind].label, **single}

    @property
    def description(self) -> str:
        """What the figure shows and what the paper found: the first paragraph of its plotting function's docstring."""
        return " ".join(inspect.getdoc(FIGURE_KINDS[self.kind].draw).split("\n\n")[0].split())

    def estimator_settings(self, config: dict) -> str:
        """The settings its metrics ran with (`style.estimator_settings`); empty where none has a setting."""
        return estimator_settings(self.metrics, config["metrics"]["settings"])

    def draw(self, table, png, pdf):
        """Draw it from its table (`inputs`, concatenated) into the PNG and PDF files."""
        return FIGURE_KINDS[self.kind].draw(table, out_png=png, out_pdf=pdf, **self.arguments)
