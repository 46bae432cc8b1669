"""A claim of a paper (`Claim`) and a row of the scorecard (`Group`: a claim and the models it is judged on), with
what the three papers' catalogues share: the models of a figure, their summary tables, a check run model by model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from shape_of_learning import paths
from shape_of_learning.claims.predicates import Verdict, every, judged
from shape_of_learning.models.checkpoints import RANDOM_INIT, SERIES

FLOOR = "(that std taken as no less than {spread_floor} x the larger value)"
MARGIN = f"by at least {{margin_std}} batch-to-batch std of the difference {FLOOR}"
SEED_MARGIN = f"by at least {{margin_std}} std over seeds of the difference {FLOOR}"
CHANGE = f"{MARGIN} and by at least {{min_change}} of the peak"


@dataclass(frozen=True)
class Group:
    """One row of the scorecard: a claim (its name in `catalogue.CLAIMS`) and the models it is judged on, labelled;
    the files it reads, by name ("summary:gpt2", "table1", ...), each with the models whose jobs make it and its
    path; the settings of its figure it reads; and, where the config gives the claim no models, why (`empty`)."""

    claim: str
    label: str
    models: tuple[str, ...] = ()
    files: dict = field(default_factory=dict)
    arguments: dict = field(default_factory=dict)
    empty: str = ""


@dataclass(frozen=True)
class Claim:
    """A claim of a paper: where the paper makes it (`source`: section, figure or table) and in its own words
    (`quote`, verbatim), the claim in a sentence (`statement`), the predicate it is judged by in words (formatted
    with the config's `claims:`), the thresholds of `claims:` it reads, its groups (planned from the experiment and
    the config: `groups(claim, experiment, config)`) and its check (a group, a reader of the run's files, the
    thresholds -> a Verdict; none for a claim no run can measure). `on_paper_values`: the check can also judge the
    paper's own numbers (Rajaee & Pilehvar's Tables 1-2). `note`: where the reading is the project's own."""

    name: str
    paper: str
    source: str
    quote: str
    statement: str
    predicate: str
    thresholds: tuple[str, ...]
    groups: Callable[..., list[Group]]
    check: Callable[..., Verdict] | None = None  # None: a claim no run can measure (`not_measurable`)
    on_paper_values: bool = False
    note: str = ""

    def group(self, label: str, models: list[str], files: dict, empty: str, **arguments) -> list[Group]:
        """This claim's row for `models`; none of them: a row saying why (`empty`)."""
        return [Group(self.name, label, tuple(models), files if models else {}, arguments, "" if models else empty)]


def not_measurable(reason: str) -> Callable[..., list[Group]]:
    """The groups of a claim no run can measure: one row, saying why."""
    return lambda claim, experiment, config: claim.group("every run", [], {}, reason)


def figure_models(experiment, kind: str, keep: Callable[[dict], bool] = lambda entry: True) -> list[str]:
    """The models of the config's figures of `kind`, in order, those whose registry entry `keep` accepts."""
    return list(
        dict.fromkeys(
            model
            for figure in experiment.figures
            if figure.kind == kind
            for model in figure.models
            if keep(experiment.models[model])
        )
    )


def is_kind(*kinds: str) -> Callable[[dict], bool]:
    return lambda entry: entry["kind"] in kinds


def summaries(experiment, models, baselines: bool = False) -> dict:
    """The summary tables of `models` (their training checkpoints), and of their random-init baselines."""
    files = {f"summary:{model}": ((model,), paths.model_table(model, SERIES[0], "summary")) for model in models}
    if baselines:
        files |= {
            f"baseline:{model}": ((model,), paths.model_table(model, RANDOM_INIT, "summary"))
            for model in models
            if model in experiment.baselines
        }
    return files


def each_model(group: Group, check: Callable[[str], Verdict]) -> Verdict:
    """The check of every model of the group, joined (`predicates.every`)."""
    return every({model: judged(check, model) for model in group.models})


def layer_mean(profile: pd.DataFrame) -> tuple[float, float]:
    """A profile's mean over layers, with the mean of its per-layer batch-to-batch std (the figures' band)."""
    return float(profile["mean"].mean()), float(profile["std"].mean())
