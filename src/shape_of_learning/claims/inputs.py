"""What a claim reads: the files of its group (`claim.Group.files`), read from the run's folder once per scorecard,
and the rows it judges, chosen as the figures choose theirs (shape_of_learning.figures.rows): the final checkpoint,
the training checkpoints' layer average, the initialisation. A checkpoint that is not its step's model (its health)
never enters a claim on the representations, whatever `figures.flagged` draws; the loss claim reads every loss and
names the checkpoints health leaves out (`loss_series`). A layer the tables mark degenerate (all vectors zero, or one
vector) enters no claim.

Anything that keeps a claim from being judged raises `NotMeasurable` with the reason: a model that cannot be had, a
file missing (a partial run), a metric not measured, too few checkpoints, one batch or one seed (no spread to
measure a margin in).
"""

import functools
from pathlib import Path

import pandas as pd

from shape_of_learning.claims.predicates import NotMeasurable
from shape_of_learning.figures.rows import (
    apply_health,
    describe,
    final_checkpoints,
    initial_checkpoints,
    layer_average,
    select,
    training_checkpoints,
)
from shape_of_learning.metrics.registry import METRICS

# The Rajaee & Pilehvar stage's package and config section: the claims import its citation, setting names and page
# layout from here.
from shape_of_learning.rajaee_pilehvar import CITATION as RAJAEE_PILEHVAR
from shape_of_learning.rajaee_pilehvar.tables import SETTING_NAMES, document

RAJAEE_PILEHVAR_SECTION = "rajaee_pilehvar"
OMIT = "omit"  # checkpoints that are not their step's model are left out of every claim (figures.rows.apply_health)
DEGENERATE = "degenerate"  # a column of the tables: a layer whose vectors are all zero, or one vector
ONE_BATCH = (
    "one batch per layer (metrics.batches: 1) gives no batch-to-batch std to measure a margin in; measure two or more"
)
ONE_SEED = (
    f"one seed ({RAJAEE_PILEHVAR_SECTION}.seeds) gives no std over seeds to measure a margin in; list two or more seeds"
)


def is_id_estimator(metric: str) -> bool:
    """Whether `metric` estimates an intrinsic dimension (its function is in metrics/intrinsic_dimension.py)."""
    return metric in METRICS and METRICS[metric].function.startswith("intrinsic_dimension.")


def without_degenerate(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a table whose layer is not marked degenerate (a table without the column has none)."""
    return table[~table[DEGENERATE].eq(True)] if DEGENERATE in table else table


class Reader:
    """The files of the groups of one scorecard, read from `root` (the workflow's working directory) once each.
    `unavailable` maps a model that cannot be had (the preflight's) to the reason."""

    def __init__(self, root: Path = Path("."), unavailable: dict[str, str] | None = None):
        self.root, self.unavailable, self.read = Path(root), unavailable or {}, {}

    def frame(self, group, name: str) -> pd.DataFrame:
        """The file `name` of `group` (`Group.files`), or NotMeasurable naming the model that cannot be had or the
        file that is missing."""
        models, path = group.files[name]
        if blocked := [model for model in models if model in self.unavailable]:
            raise NotMeasurable("; ".join(f"{model} cannot be had: {self.unavailable[model]}" for model in blocked))
        if path not in self.read:
            file = self.root / path
            if not file.is_file():
                raise NotMeasurable(f"{path} is missing: its jobs have not run, or failed")
            self.read[path] = pd.read_parquet(file) if file.suffix == ".parquet" else pd.read_csv(file)
        return self.read[path]

    def summary(self, group, model: str) -> pd.DataFrame:
        """A model's summary table: its checkpoints', and its random-init baseline's where the group reads one; the
        layers marked degenerate left out."""
        names = [name for name in (f"summary:{model}", f"baseline:{model}") if name in group.files]
        return without_degenerate(pd.concat([self.frame(group, name) for name in names], ignore_index=True))


class PaperValues:
    """A reader whose Tables 1-2 of Rajaee & Pilehvar hold the paper's values in place of ours, with no spread (the
    paper gives one run) and its removal counts, the rows without a paper value left out: a table claim judged on
    the paper's own numbers."""

    def __init__(self, reader: Reader):
        self.reader = reader

    def frame(self, group, name: str) -> pd.DataFrame:
        table = self.reader.frame(group, name).dropna(subset=["paper_performance"])
        return table.assign(
            performance=table["paper_performance"],
            isotropy=table["paper_isotropy"],
            isotropy_notebook=table["paper_isotropy"],  # the paper prints one I(W): both conventions read it
            removed=table["paper_removed"],
            performance_std=0.0,
            isotropy_std=0.0,
            isotropy_notebook_std=0.0,
            learned=True,
        )  # the paper's fine-tuned models learned their task (Table 1's Baseline)


def _refusals_not_measurable(choose):
    """Rows chosen by shape_of_learning.figures.rows, with a note of the checkpoints health left out, whose refusals (a
    metric not measured, no checkpoint that is its step's model, an incomplete layer average) make a claim not
    measurable rather than fail the scorecard."""

    @functools.wraps(choose)
    def chosen(*args, **kwargs) -> tuple[pd.DataFrame, str]:
        try:
            rows, note = choose(*args, **kwargs)
        except ValueError as refusal:
            raise NotMeasurable(str(refusal)) from None
        if rows.empty:
            raise NotMeasurable(f"no rows of {args[1]} {args[2]} to judge")
        if rows["std"].isna().any():
            raise NotMeasurable(ONE_BATCH)
        return rows, note

    return chosen


def _left_out(noted: pd.DataFrame) -> str:
    """ "health leaves out gpt2/step200 (its reason)": the checkpoints health left out or drew as another, with why;
    empty where none."""
    return f"health leaves out {describe(noted)}" if not noted.empty else ""


@_refusals_not_measurable
def final_profile(summary: pd.DataFrame, model: str, metric: str) -> tuple[pd.DataFrame, str]:
    """One row per layer at the model's final checkpoint, as Figure 1 draws it (`rows.final_checkpoints`); and, where
    health left out a later checkpoint, which checkpoint was judged and which were left out, with why."""
    rows, noted = final_checkpoints(select(summary, [metric], [model]), OMIT)
    note = f"judged at {rows['checkpoint'].iloc[0]}; {_left_out(noted)}" if not (noted.empty or rows.empty) else ""
    return rows.sort_values("layer", ignore_index=True), note


@_refusals_not_measurable
def initial_profile(summary: pd.DataFrame, model: str, metric: str) -> tuple[pd.DataFrame, str]:
    """One row per layer at the model's initialisation: its step-0 checkpoint, else its random-init baseline
    (`rows.initial_checkpoints`); and, where health left out its step 0, that checkpoint with why."""
    rows = select(summary, [metric], [model], baselines=True)
    flagged = rows[(rows["step"] == 0) & ~rows["random_init"] & rows["health"].notna()]
    noted = flagged.drop_duplicates("checkpoint").assign(reason=flagged["health"])
    return initial_checkpoints(rows).sort_values("layer", ignore_index=True), _left_out(noted)


@_refusals_not_measurable
def training_series(
    summary: pd.DataFrame, model: str, metric: str, layer_average_over: dict
) -> tuple[pd.DataFrame, str]:
    """One row per training checkpoint: the mean over layers of the per-layer mean and std, as Figures 4-5 draw it
    (`rows.layer_average`, with figures.layer_average); and the checkpoints health left out, with why."""
    rows, noted = apply_health(select(summary, [metric], [model]), OMIT)
    series = layer_average(training_checkpoints(rows), **layer_average_over).sort_values("step", ignore_index=True)
    return series, _left_out(noted)


def loss_series(health: pd.DataFrame, since: float) -> tuple[pd.DataFrame, str]:
    """Every training checkpoint from step `since` on whose loss was measured, unfiltered: health's verdicts decide
    what the figures draw, not what the loss did. In step order; and the checkpoints among them that health leaves
    out of the figures or draws as another, with why (empty where none)."""
    if health.empty or health["loss"].isna().all():
        notes = sorted(set(health["loss_note"].dropna())) or ["none recorded"]
        raise NotMeasurable(f"no loss at any checkpoint ({'; '.join(notes)})")
    rows = health[(health["step"] >= since) & health["loss"].notna()].sort_values("step", ignore_index=True)
    left_out = [
        f"step {row.step:g} ({row.health})" if pd.notna(row.health) else f"step {row.step:g} (drawn as {row.drawn_as})"
        for row in rows.itertuples()
        if pd.notna(row.health) or pd.notna(row.drawn_as)
    ]
    return rows, "; ".join(left_out)
