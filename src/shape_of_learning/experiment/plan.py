"""The experiment as the workflow sees it, planned from the validated config alone: every checkpoint and its layer
groups, and what a user can ask for (`Deliverable`): each figure, the Rajaee & Pilehvar analysis, every model's
tables and the claims scorecard, with the models each needs and the named target that builds it. Each stage plans its
own part: the figures and their baselines (`figures.plan`), the Rajaee & Pilehvar pairs and analysis jobs
(`rajaee_pilehvar.plan`), the scorecard's rows (`claims.catalogue`); `plan` puts them together.

Everything is enumerated at parse time (no Snakemake checkpoints), so `snakemake -n` on thousands of jobs stays
fast and works offline. Planning reads no file: whether the configured checkpoints exist is the preflight's
question (`shape_of_learning.models.revisions.revision_problems`, run by common.smk after `plan`).
Cross-references a schema cannot check (a figure's models, a pair's fine-tuned model, a dataset split) fail here.
"""

import dataclasses
from dataclasses import dataclass, field

from shape_of_learning import paths
from shape_of_learning.claims.catalogue import Group, plan_claims
from shape_of_learning.figures.kinds import FIGURE_KINDS, Figure
from shape_of_learning.figures.plan import plan_baselines, plan_figures
from shape_of_learning.models.checkpoints import RANDOM_INIT, SERIES, Checkpoint, RandomInit, checkpoints
from shape_of_learning.rajaee_pilehvar.plan import (
    Analysis,
    Pair,
    excluded_training_data,
    plan_analyses,
    plan_pairs,
    seed_models,
)

# A lane of downloads (`Experiment.download_lanes`) fetches this many checkpoints ahead of the one it extracts
DOWNLOADS_AHEAD = 1
GLOBAL_TABLES = [paths.METRICS_TABLE, paths.SUMMARY, paths.SUMMARY_CSV, paths.CHECKPOINTS_TABLE]
CLAIMS_OUTPUTS = (paths.CLAIMS_TABLE, paths.CLAIMS_REPORT)


@dataclass(frozen=True)
class Deliverable:
    """A final output a user asks for: a figure, the Rajaee & Pilehvar analysis, every model's tables or the claims
    scorecard; its files, the models it needs, and its named target (a rule of the Snakefile: `snakemake figure3`).
    A `partial` one is made from the models that can be had and names the others in it (the scorecard: each claim
    that needs a model that cannot be had is "not measurable"), so no model blocks it."""

    name: str
    target: str
    outputs: tuple[str, ...]
    models: tuple[str, ...]
    partial: bool = False


@dataclass
class Experiment:
    models: dict[str, dict]
    checkpoints: dict[str, list[Checkpoint]]
    tokens_per_layer: int  # vectors every layer of every checkpoint keeps: metrics.batches x metrics.batch_size
    layers_per_job: int | str = 1  # metrics.layers_per_job: a number of layers, or "checkpoint"
    figures: list[Figure] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    analyses: list[Analysis] = field(default_factory=list)  # Tables 1-2; the pairs' on the first split: Figures 1-2
    # the dataset splits fine-tuned on whose pairs every evaluation leaves out (rajaee_pilehvar.drop_training_pairs)
    excluded_training_data: list[str] = field(default_factory=list)
    # random-initialisation baselines, kept apart from `checkpoints` (what health, series and fine-tuning read)
    baselines: dict[str, RandomInit] = field(default_factory=dict)
    # models that cannot be had, each with the reason (a --keep-going run drops what needs them: `deliverables`)
    unavailable: dict[str, str] = field(default_factory=dict)
    claims: list[Group] = field(default_factory=list)  # the scorecard's rows, where the config has `claims:`

    def restricted_to(self, extractions: set[tuple[str, str]]) -> "Experiment":
        """This plan with only the checkpoints and random-init baselines named in `extractions`, (model, checkpoint)
        pairs: the extractions a dry run plans, for the cost of what was asked. A model keeps its entry where either
        remains."""
        baselines = {model: b for model, b in self.baselines.items() if (model, b.name) in extractions}
        checkpoints = {
            model: [c for c in found if (model, c.name) in extractions] for model, found in self.checkpoints.items()
        }
        return dataclasses.replace(
            self,
            baselines=baselines,
            checkpoints={model: found for model, found in checkpoints.items() if found or model in baselines},
        )

    def figure(self, name: str) -> Figure:
        return next(figure for figure in self.figures if figure.name == name)

    def figure_inputs(self, name: str) -> list[str]:
        """The tables a figure reads: its models' health tables, or their summaries (`paths.model_table`), those of
        their random-init baselines too where the figure draws baselines. Never another model's: a figure waits for
        its own models only, and adding a model elsewhere leaves it untouched."""
        figure = self.figure(name)
        if figure.reads == "health":
            return [paths.health(model) for model in figure.models]
        series = SERIES if "random_init_seed" in figure.arguments else SERIES[:1]
        return [
            paths.model_table(model, one, "summary")
            for model in figure.models
            for one in series
            if one != RANDOM_INIT or model in self.baselines
        ]

    def series(self, model: str, series: str) -> list[Checkpoint]:
        """The checkpoints of one of a model's `SERIES`."""
        return self.checkpoints[model] if series == SERIES[0] else [self.baselines[model]]

    def model_series(self) -> list[tuple[str, str]]:
        """Every (model, series) measured: each model's checkpoints, and its baseline where planned."""
        return [(model, SERIES[0]) for model in self.checkpoints] + [(model, RANDOM_INIT) for model in self.baselines]

    def measured(self, model: str) -> list[Checkpoint]:
        """The checkpoints extracted and measured: the model's own, and its random-init baseline where planned."""
        return self.checkpoints[model] + ([self.baselines[model]] if model in self.baselines else [])

    def checkpoint(self, model: str, name: str) -> Checkpoint:
        for ckpt in self.measured(model):
            if ckpt.name == name:
                return ckpt
        raise KeyError(f"model {model!r} has no checkpoint {name!r}")

    def last_checkpoint(self, model: str) -> Checkpoint:
        """The checkpoint a fine-tuning starts from and the Rajaee & Pilehvar analysis measures."""
        return self.checkpoints[model][-1]

    def read_after_extraction(self, model: str, checkpoint: str) -> list[str]:
        """The jobs besides its extraction that load a checkpoint's weights: Rajaee & Pilehvar's fine-tunings from it
        and analyses of it, which read a model's last checkpoint. With extraction.evict_weights its weights stay in
        the cache for them (shape_of_learning.metrics.job)."""
        if model not in self.checkpoints or checkpoint != self.last_checkpoint(model).name:
            return []
        finetunings = [
            f"finetune_model {name}"
            for name, entry in self.models.items()
            if entry.get("finetune", {}).get("base") == model
        ]
        analyses = [f"measure_isotropy_settings {job.reference}/{model}" for job in self.analyses if job.model == model]
        return finetunings + analyses

    def kept_weights(self) -> frozenset[tuple[str, str]]:
        """(model, checkpoint) of the Hub checkpoints whose weights `extraction.evict_weights` leaves in the cache for
        the jobs that read them after the extraction (`read_after_extraction`)."""
        return frozenset(
            (model, found[-1].name)
            for model, found in self.checkpoints.items()
            if found and found[-1].source == "hub" and self.read_after_extraction(model, found[-1].name)
        )

    def hidden_states(self, model: str) -> range:
        """The hidden states of one forward pass, by index: the embedding output (0) and each of the model's `layers`
        blocks (1..layers)."""
        return range(self.models[model]["layers"] + 1)

    def layer_groups(self, model: str) -> list[str]:
        """The layers of each metrics job of a checkpoint of `model` (`layer_groups`)."""
        return layer_groups(self.models[model]["layers"], self.layers_per_job)

    @property
    def figure_analyses(self) -> list[Analysis]:
        """The pairs' analyses on the first evaluated split, every seed's: what Figure 1 of Rajaee & Pilehvar shows."""
        return [job for job in self.analyses if job.reference == self.analyses[0].reference and job.pair]

    @property
    def view_analyses(self) -> list[Analysis]:
        """Figure 2's: per pair, the pre-trained model and the run of its first seed, on the first evaluated split."""
        return [
            job
            for job in self.figure_analyses
            if job.state == "pre-trained" or job.model == job.pair.finetuned_models[0]
        ]

    def analysis_seeds(self, model: str) -> tuple[int, ...]:
        """The k-means seeds of a model's analysis jobs (`Analysis.seeds`, the same on every split)."""
        return next(job.seeds for job in self.analyses if job.model == model)

    def deliverables(self) -> list[Deliverable]:
        """Every final output, planned: each figure (its target the config entry's `target`, else its kind's), the
        Rajaee & Pilehvar tables and figures (`rajaee_pilehvar`), every model's tables in one (`tables`), the claims
        scorecard (`claims`)."""
        found = [
            Deliverable(figure.name, figure.target, tuple(figure.outputs), self.needs(figure.models))
            for figure in self.figures
        ]
        if self.pairs:
            outputs = (
                *paths.RAJAEE_PILEHVAR_TABLES,
                paths.RAJAEE_PILEHVAR_REPORT,
                *paths.RAJAEE_PILEHVAR_FIGURES[1],
                *paths.RAJAEE_PILEHVAR_FIGURES[2],
            )
            found.append(
                Deliverable(
                    "rajaee_pilehvar", "rajaee_pilehvar", outputs, self.needs(job.model for job in self.analyses)
                )
            )
        found.append(Deliverable("tables", "tables", tuple(GLOBAL_TABLES), tuple(self.checkpoints)))
        if self.claims:
            models = self.needs(model for group in self.claims for model in group.models)
            found.append(Deliverable("claims", "claims", CLAIMS_OUTPUTS, models, partial=True))
        return found

    def needs(self, models) -> tuple[str, ...]:
        """The models whose results `models` need: each, and a fine-tuned model's base too."""
        found = {}
        for model in models:
            found.update(dict.fromkeys([self.models[model].get("finetune", {}).get("base", model), model]))
        return tuple(found)

    def blocked_by(self, deliverable: Deliverable) -> list[str]:
        """Its models that cannot be had (`unavailable`); none for a partial deliverable, made without them."""
        return [model for model in deliverable.models if model in self.unavailable and not deliverable.partial]

    def claim_inputs(self) -> list[str]:
        """The files the claims scorecard reads (`claims.catalogue.Group.files`), less those of models that cannot be
        had: its rows that need them say so."""
        return list(
            dict.fromkeys(
                path
                for group in self.claims
                for models, path in group.files.values()
                if not any(model in self.unavailable for model in models)
            )
        )

    def download_lanes(self) -> list[list[Checkpoint]]:
        """The checkpoints whose weights a download job fetches, in lanes: the models that the same deliverables need
        (the partial claims scorecard aside) share one, in plan order, each series in order. Any target that needs a
        checkpoint of a lane needs them all, and a failure in a lane blocks only deliverables it blocks anyway."""
        deliverables = [d for d in self.deliverables() if not d.partial]
        needed_by = {model: frozenset(d.name for d in deliverables if model in d.models) for model in self.checkpoints}
        lanes = {}
        for model, found in self.checkpoints.items():
            lanes.setdefault(needed_by[model], []).extend(ckpt for ckpt in found if ckpt.source == "hub")
        return [lane for lane in lanes.values() if lane]

    def download_gates(self, pending) -> dict[tuple[str, str], Checkpoint]:
        """(model, checkpoint) -> the checkpoint whose metrics its download waits for: in its lane, among the
        checkpoints still to measure (`pending(checkpoint)`), the one DOWNLOADS_AHEAD + 1 places before it. A lane
        then holds the weights of DOWNLOADS_AHEAD + 1 checkpoints at most, evicted as each one's last metrics job
        ends (nothing of the run reads them after: a cluster's group job of extraction and metrics is retried whole):
        one extracting or measured and the next downloading, the GPU never waiting for the network within a lane."""
        gates = {}
        for lane in self.download_lanes():
            waiting = [ckpt for ckpt in lane if pending(ckpt)]
            gates |= {
                (ckpt.model, ckpt.name): waiting[index - DOWNLOADS_AHEAD - 1]
                for index, ckpt in enumerate(waiting)
                if index > DOWNLOADS_AHEAD
            }
        return gates

    def targets(self) -> list[str]:
        """Every final output that can be made: the outputs of every deliverable not blocked by a model that cannot
        be had (`snakemake`'s default target, rule `all`)."""
        return [path for target in self.named_targets().values() for path in target]

    def named_targets(self) -> dict[str, list[str]]:
        """Each named target's outputs, those of deliverables blocked by a model that cannot be had left out."""
        found = {}
        for deliverable in self.deliverables():
            outputs = found.setdefault(deliverable.target, [])
            if not self.blocked_by(deliverable):
                outputs += deliverable.outputs
        return found


def layer_groups(layers: int, layers_per_job: int | str) -> list[str]:
    """The layers of each metrics job of a checkpoint with `layers` blocks (hidden states 0..layers), as named in its
    output: "3", or "0-7" with metrics.layers_per_job: 8, or every layer of the checkpoint in one ("0-32") with
    `checkpoint`."""
    states = range(layers + 1)
    size = len(states) if layers_per_job == "checkpoint" else layers_per_job
    chunks = [states[i : i + size] for i in range(0, len(states), size)]
    return [str(c[0]) if len(c) == 1 else f"{c[0]}-{c[-1]}" for c in chunks]


def layers_in_group(group: str) -> range:
    """Inverse of `layer_groups`: "3" -> range(3, 4), "0-7" -> range(0, 8)."""
    first, _, last = group.partition("-")
    return range(int(first), int(last or first) + 1)


def plan(config: dict) -> Experiment:
    """Expand a validated config into checkpoints, figures and analyses. The registry it plans (`Experiment.models`)
    is the config's with each `finetune:` entry replaced by one model per seed (`seed_models`), less the models of
    the modalities `modalities` leaves out (`leave_out_modalities`)."""
    config = leave_out_modalities(config)
    pairs = plan_pairs(config)
    models = seed_models(config)
    for name, entry in models.items():
        modality = entry["modality"]
        if modality != "text" and not config.get(f"{modality}_corpus"):
            raise ValueError(
                f"model {name!r} reads {modality} (modality: {modality}) but the config has no "
                f"`{modality}_corpus`; add one (name, local_path to a folder or archive, count) or "
                "remove the model"
            )
    metrics = config["metrics"]
    experiment = Experiment(
        models,
        {name: checkpoints(name, entry) for name, entry in models.items()},
        metrics["batches"] * metrics["batch_size"],
        metrics["layers_per_job"],
    )
    for kind, entry in config["figures"].items():
        if kind in FIGURE_KINDS:
            experiment.figures += plan_figures(kind, entry, {**config, "models": models})
    experiment.baselines = plan_baselines(experiment)
    if pairs:
        experiment.pairs, experiment.analyses = pairs, plan_analyses(config, pairs)
        experiment.excluded_training_data = excluded_training_data(config)
    if "claims" in config:
        experiment.claims = plan_claims(experiment, config)
    return experiment


def leave_out_modalities(config: dict) -> dict:
    """The config without the models that read a modality `modalities` leaves out: gone from `models:` and from every
    figure, and a figure left without models gone too."""
    left_out = {name for name, entry in config["models"].items() if entry["modality"] not in config["modalities"]}
    if not left_out:
        return config
    figures = {}
    for kind, entry in config["figures"].items():
        if kind not in FIGURE_KINDS:
            figures[kind] = entry
            continue
        kept = [
            {**item, "models": [model for model in item["models"] if model not in left_out]}
            if "models" in item
            else item
            for item in (entry if isinstance(entry, list) else [entry])
            if item.get("model") not in left_out
        ]
        kept = [item for item in kept if item.get("models", True)]
        if kept:
            figures[kind] = kept if isinstance(entry, list) else kept[0]
    models = {name: entry for name, entry in config["models"].items() if name not in left_out}
    return {**config, "models": models, "figures": figures}
