"""Every claim of the three papers, stated once (`CLAIMS`): the paper and its section or figure, the claim in a
sentence, the models it concerns (from the config's figures and pairs: `Claim.groups`, one scorecard row each), the
predicate it is judged by, in words with the config's thresholds (`Claim.predicate`) and in code (`Claim.check`,
built from shape_of_learning.claims.predicates), and the thresholds it reads (the config's `claims:`, defaults and
rationale in workflow/schemas/config.schema.yaml; docs/claims.md).

A claim's groups are planned from the planned experiment (shape_of_learning.experiment.dag.Experiment, passed in:
this package sits below the planning layer): its figures, model registry, random-init baselines and Rajaee & Pilehvar
analyses. A group lists the files it reads, each with the models whose jobs make it (`Group.files`), so that a run
without a model still judges every claim that does not need it.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from shape_of_learning import paths
from shape_of_learning.claims.inputs import ONE_SEED, final_profile, initial_profile, losses, training_series
from shape_of_learning.claims.predicates import (NotMeasurable, Verdict, at_least, clears, every, falls_steadily,
                                                 groups_apart, grows_then_stabilises, interior_peak, judged, majority,
                                                 num, separation, spread_ratio, std_units)
from shape_of_learning.figures.profile_by_modality import model_group
from shape_of_learning.finetuning import CITATION as RAJAEE_PILEHVAR
from shape_of_learning.finetuning.tables import SETTING_NAMES
from shape_of_learning.models.checkpoints import RANDOM_INIT, SERIES

RAZZHIGAEV = "Razzhigaev et al. (2024)"
GODEY = "Godey et al. (2023)"
ANISOTROPY = "anisotropy"  # the main paper's measure (section 2.3)
COSINE = "avg_cosine"  # Godey et al.'s measure of anisotropy: the average cosine between token vectors
ISOTROPY = "isotropy_u_only"  # Rajaee & Pilehvar's I(W), each eigenvector once, as the paper computes it


@dataclass(frozen=True)
class Group:
    """One row of the scorecard: a claim (its name in `CLAIMS`) and the models it is judged on, labelled; the files it
    reads, by name ("summary:gpt2", "table1", ...), each with the models whose jobs make it and its path; the
    settings of its figure it reads; and, where the config gives the claim no models, why (`empty`)."""

    claim: str
    label: str
    models: tuple[str, ...] = ()
    files: dict = field(default_factory=dict)
    arguments: dict = field(default_factory=dict)
    empty: str = ""


@dataclass(frozen=True)
class Claim:
    """A claim of a paper: where the paper makes it, the claim paraphrased, the predicate it is judged by in words
    (formatted with the config's `claims:`), the thresholds of `claims:` it reads, its groups (planned from the
    experiment and the config) and its check (a group, a reader of the run's files, the thresholds -> a Verdict).
    `on_paper_values`: the check can also judge the paper's own numbers (Rajaee & Pilehvar's Tables 1-2). `note`:
    where the reading is the project's own."""

    name: str
    paper: str
    source: str
    statement: str
    predicate: str
    thresholds: tuple[str, ...]
    groups: Callable[..., list[Group]]
    check: Callable[..., Verdict]
    on_paper_values: bool = False
    note: str = ""


# --- groups: the models a claim concerns, from the config's figures and pairs ------------------------------------

def _figure_models(experiment, kind: str, keep: Callable[[dict], bool] = lambda entry: True) -> list[str]:
    return list(dict.fromkeys(model for figure in experiment.figures if figure.kind == kind
                              for model in figure.models if keep(experiment.models[model])))


def _summaries(experiment, models, baselines: bool = False) -> dict:
    """The summary tables of `models` (their training checkpoints), and of their random-init baselines."""
    files = {f"summary:{model}": ((model,), paths.model_table(model, SERIES[0], "summary")) for model in models}
    if baselines:
        files |= {f"baseline:{model}": ((model,), paths.model_table(model, RANDOM_INIT, "summary"))
                  for model in models if model in experiment.baselines}
    return files


def _group(claim: str, label: str, models: list[str], files: dict, empty: str, **arguments) -> list[Group]:
    return [Group(claim, label, tuple(models), files if models else {}, arguments, "" if models else empty)]


def _is(kind: str) -> Callable[[dict], bool]:
    return lambda entry: entry["kind"] == kind


def _figure_1_decoders(experiment, config: dict) -> list[Group]:
    models = _figure_models(experiment, "anisotropy_by_layer", _is("decoder"))
    return _group("decoder_bell", "decoders of figures.anisotropy_by_layer", models, _summaries(experiment, models),
                  "no decoder among the models of figures.anisotropy_by_layer")


def _figure_1_models(experiment, config: dict) -> list[Group]:
    models = _figure_models(experiment, "anisotropy_by_layer", lambda entry: entry["kind"] in ("encoder", "decoder"))
    kinds = {model: experiment.models[model]["kind"] for model in models}
    both = {"encoder", "decoder"} <= set(kinds.values())
    return _group("encoder_uniform", "encoders and decoders of figures.anisotropy_by_layer", models if both else [],
                  _summaries(experiment, models), "figures.anisotropy_by_layer needs an encoder and a decoder",
                  kinds=kinds)


def _series_decoders(claim: str, kind: str, read_health: bool = False):
    """The decoders of the figures of `kind` (the training-dynamics claims are the decoders'), each with the metric
    that figure draws, their layer average as figures.layer_average sets it."""

    def groups(experiment, config: dict) -> list[Group]:
        metrics = {}
        for figure in experiment.figures:
            if figure.kind == kind:
                for model in figure.models:
                    if experiment.models[model]["kind"] == "decoder":
                        metrics.setdefault(model, [])
                        metrics[model] += [m for m in figure.metrics if m not in metrics[model]]
        if read_health:  # the loss claim: the models of both the loss figure and Figure 4
            losses_of = set(_figure_models(experiment, "loss_across_checkpoints"))
            metrics = {model: found for model, found in metrics.items() if model in losses_of}
        files = _summaries(experiment, metrics)
        if read_health:
            files |= {f"health:{model}": ((model,), paths.health(model)) for model in metrics}
        label = (f"decoders of figures.{kind}" if not read_health else
                 f"decoders of figures.{kind} and figures.loss_across_checkpoints")
        return _group(claim, label, list(metrics), files, f"no decoder in {label.removeprefix('decoders of ')}",
                      metrics=metrics, layer_average=config["figures"]["layer_average"])

    return groups


def _modality_groups(experiment, config: dict) -> list[Group]:
    """Godey et al.'s models beyond subword text: character- and byte-level text models, image and speech
    transformers, each a row."""
    models = _figure_models(experiment, "profile_by_modality")
    where = {model: model_group(experiment.models[model]) for model in models}
    found = []
    for label, keep in (("character- and byte-level text models",
                         lambda g: g["modality"] == "text" and g["group"] != "subword-level"),
                        ("image transformers", lambda g: g == {"modality": "image", "group": "transformer"}),
                        ("speech transformers", lambda g: g == {"modality": "audio", "group": "transformer"})):
        chosen = [model for model in models if keep(where[model])]
        found += _group("anisotropy_beyond_subword_text", f"{label} of figures.profile_by_modality", chosen,
                        _summaries(experiment, chosen), f"no {label.removesuffix(' models')} among the models of "
                        "figures.profile_by_modality")
    return found


def _image_models(experiment, config: dict) -> list[Group]:
    models = _figure_models(experiment, "profile_by_modality", lambda entry: entry["modality"] == "image")
    groups = {model: model_group(experiment.models[model])["group"] for model in models}
    both = {"transformer", "CNN"} <= set(groups.values())
    return _group("transformers_exceed_cnns", "image transformers and CNNs of figures.profile_by_modality",
                  models if both else [], _summaries(experiment, models, baselines=True),
                  "figures.profile_by_modality needs an image transformer and a CNN", groups=groups)


def _pairs(claim: str, tables: bool):
    """Rajaee & Pilehvar: one row per model pair and evaluated split: its per-layer files (pre-trained, each seed's
    fine-tuned run), or Tables 1-2."""

    def groups(experiment, config: dict) -> list[Group]:
        if not experiment.pairs:
            return _group(claim, "finetuning.pairs", [], {}, "the config has no `finetuning:` section")
        everything = experiment.needs(job.model for job in experiment.analyses)  # Tables 1-2 need every analysis
        found = []
        for reference in dict.fromkeys(job.reference for job in experiment.analyses):
            for pair in experiment.pairs:
                jobs = [job for job in experiment.analyses if job.reference == reference and job.pair == pair]
                if tables:
                    files = {f"table{n}": (everything, path) for n, path in enumerate(paths.RAJAEE_PILEHVAR_TABLES, 1)}
                else:
                    files = {f"layers:{job.model}": (experiment.needs([job.model]), job.output("layers"))
                             for job in jobs}
                models = list(experiment.needs(job.model for job in jobs))
                found += _group(claim, f"{pair.label} on {reference}", models, files, "", dataset=reference,
                                pair=pair.label, pretrained=pair.pretrained, finetuned=pair.finetuned,
                                runs=pair.finetuned_models, paper=pair.paper)
        return found

    return groups


# --- checks: a group, a reader of the run's files, the thresholds -> a Verdict ------------------------------------

def _each_model(group: Group, check: Callable[[str], Verdict]) -> Verdict:
    return every({model: judged(check, model) for model in group.models})


def _check_bell(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        profile = final_profile(reader.summary(group, model), model, ANISOTROPY)
        return interior_peak(profile["layer"], profile["mean"], profile["std"], margin=settings["margin_std"],
                             within=tuple(settings["middle"]), name=lambda layer: f"layer {layer:g}")

    return _each_model(group, one)


def _check_uniform(group: Group, reader, settings: dict) -> Verdict:
    ranges = {}
    for model in group.models:
        profile = final_profile(reader.summary(group, model), model, ANISOTROPY)
        ranges[model] = float(profile["mean"].max() - profile["mean"].min())
    kinds = group.arguments["kinds"]
    side = {kind: {model: value for model, value in ranges.items() if kinds[model] == kind}
            for kind in ("encoder", "decoder")}
    verdict = spread_ratio(side["encoder"], side["decoder"], max_ratio=settings["uniform_ratio"])
    listed = "; ".join(f"{kind}s' ranges " + ", ".join(f"{model} {num(value)}" for model, value in found.items())
                       for kind, found in side.items())
    return Verdict(verdict.holds, f"{listed}; {verdict.measured}", verdict.reason)


def _check_grows(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        line = training_series(reader.summary(group, model), model, ANISOTROPY, group.arguments["layer_average"])
        return grows_then_stabilises(line["step"], line["mean"], line["std"], margin=settings["margin_std"],
                                     stable_from=settings["stable_from"], stable_share=settings["stable_share"])

    return _each_model(group, one)


def _rise_and_fall(reader, group: Group, model: str, metric: str, settings: dict) -> Verdict:
    line = training_series(reader.summary(group, model), model, metric, group.arguments["layer_average"])
    return interior_peak(line["step"], line["mean"], line["std"], margin=settings["margin_std"],
                         within=(0.0, settings["early"]), name=lambda step: f"step {step:g}")


def _check_rises_then_falls(group: Group, reader, settings: dict) -> Verdict:
    """Each (model, metric) of the group: Figure 4's metric, or each estimator of Figure 5."""
    metrics = group.arguments["metrics"]
    return every({f"{model} {metric}" if len(found) > 1 else model:
                  judged(_rise_and_fall, reader, group, model, metric, settings)
                  for model, found in metrics.items() for metric in found})


def _check_loss_while_id_falls(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        metric = group.arguments["metrics"][model][0]
        line = training_series(reader.summary(group, model), model, metric, group.arguments["layer_average"])
        peak = line["step"].iloc[int(np.argmax(line["mean"]))]
        if peak == line["step"].iloc[-1]:
            raise NotMeasurable(f"its {metric} does not fall: its maximum is at the last checkpoint, step {peak:g}")
        falling = losses(reader.frame(group, f"health:{model}"), since=peak)
        verdict = falls_steadily(falling["step"], falling["loss"], tolerance=settings["loss_tolerance"])
        return Verdict(verdict.holds, f"{metric} peaks at step {peak:g}; {verdict.measured}", verdict.reason)

    return _each_model(group, one)


def _layer_mean(profile: pd.DataFrame) -> tuple[float, float]:
    """A profile's mean over layers, with the mean of its per-layer batch-to-batch std (the figures' band)."""
    return float(profile["mean"].mean()), float(profile["std"].mean())


def _check_anisotropy_appears(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        mean, _ = _layer_mean(final_profile(reader.summary(group, model), model, COSINE))
        return at_least({"mean over layers": mean}, level=settings["anisotropic_cosine"])

    return _each_model(group, one)


def _check_transformers_exceed_cnns(group: Group, reader, settings: dict) -> Verdict:
    """Each model's rise over its own floor: its final checkpoint's mean over layers less its initialisation's."""
    rise = {}
    for model in group.models:
        summary = reader.summary(group, model)
        trained, initial = _layer_mean(final_profile(summary, model, COSINE)), _layer_mean(
            initial_profile(summary, model, COSINE))
        rise[model] = (trained[0] - initial[0], math.hypot(trained[1], initial[1]))
    side = {kind: {model: value for model, value in rise.items() if group.arguments["groups"][model] == kind}
            for kind in ("transformer", "CNN")}
    verdict = groups_apart(side["transformer"], side["CNN"], margin=settings["margin_std"])
    listed = "; ".join(f"{kind}s' rise over initialisation " + ", ".join(
        f"{model} {num(value[0])}" for model, value in found.items()) for kind, found in side.items())
    return Verdict(verdict.holds, f"{listed}; {verdict.measured}", verdict.reason)


def _per_layer(reader, group: Group) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The per-layer I(W) of the pair's pre-trained model and of each seed's fine-tuned run."""
    pretrained = reader.frame(group, f"layers:{group.arguments['pretrained']}")
    runs = {run: reader.frame(group, f"layers:{run}") for run in group.arguments["runs"]}
    if len(runs) < 2:
        raise NotMeasurable(ONE_SEED)
    return pretrained, runs


def _tokens(layers: pd.DataFrame, tokens: str) -> pd.DataFrame:
    return layers[layers["tokens"] == tokens].set_index("layer").sort_index()


def _over_seeds(values: list) -> tuple[float, float]:
    return float(np.mean(values, axis=0)), float(np.std(values, axis=0, ddof=1))


def _check_finetuning_improves_upper_layers(group: Group, reader, settings: dict) -> Verdict:
    pretrained, runs = _per_layer(reader, group)
    before = _tokens(pretrained, "all")
    after = {run: _tokens(layers, "all") for run, layers in runs.items()}
    keep = ~before["degenerate"]
    for layers in after.values():
        keep &= ~layers["degenerate"]
    layers = before.index[keep]
    upper, lower = layers[layers > before.index.max() / 2], layers[layers <= before.index.max() / 2]
    if not len(upper) or not len(lower):
        raise NotMeasurable("no upper or no lower layer whose views are not degenerate")
    gains = [np.log(found[ISOTROPY]) - np.log(before[ISOTROPY]) for found in after.values()]
    upper_gain = _over_seeds([gain[upper].mean() for gain in gains])
    ahead = _over_seeds([gain[upper].mean() - gain[lower].mean() for gain in gains])
    isotropy = pd.concat([found[ISOTROPY] for found in after.values()], axis=1).mean(axis=1)
    most = isotropy.idxmax()
    parts = {}
    apart = separation(upper_gain, (0.0, 0.0))
    parts["improves in the upper layers"] = Verdict(
        clears(apart, settings["margin_std"]),
        f"ln I(W) gain over layers {upper[0]}-{upper[-1]} {num(upper_gain[0])} +- {num(upper_gain[1])}",
        f"{std_units(apart)}, under {settings['margin_std']}")
    apart = separation(ahead, (0.0, 0.0))
    parts["mostly there"] = Verdict(clears(apart, settings["margin_std"]),
                                    f"upper less lower gain {num(ahead[0])} +- {num(ahead[1])}",
                                    f"{std_units(apart)}, under {settings['margin_std']}")
    parts["stays highly anisotropic"] = Verdict(
        isotropy[most] < settings["highly_anisotropic_iw"], f"largest fine-tuned I(W) {num(isotropy[most])} at layer "
        f"{most}", f"not under {settings['highly_anisotropic_iw']}")
    return every(parts)


def _check_cls_more_anisotropic(group: Group, reader, settings: dict) -> Verdict:
    _, runs = _per_layer(reader, group)
    gaps, degenerate = [], set()
    for layers in runs.values():
        every_token, cls = _tokens(layers, "all"), _tokens(layers, "cls")
        degenerate |= set(cls.index[cls["degenerate"]]) | set(every_token.index[every_token["degenerate"]])
        gaps.append(np.log(every_token[ISOTROPY]) - np.log(cls[ISOTROPY]))
    counted = {}
    for layer in gaps[0].index:
        if layer not in degenerate:
            apart = separation(_over_seeds([gap[layer] for gap in gaps]),
                               (math.log(settings["much_more_anisotropic"]), 0.0))
            counted[f"layer {layer}"] = clears(apart, settings["margin_std"])
    if not counted:
        raise NotMeasurable("every [CLS] view is degenerate (fewer distinct texts than dimensions)")
    verdict = majority(counted, share=settings["most_layers"])
    mean_gap = np.mean(gaps, axis=0)
    measured = (f"-log I(W) of [CLS] less that of all tokens, mean over seeds: {num(mean_gap.min())} to "
                f"{num(mean_gap.max())}; layers counted: {verdict.measured}")
    if degenerate:
        measured += f"; left out as degenerate: layers {', '.join(map(str, sorted(degenerate)))}"
    return Verdict(verdict.holds, measured, verdict.reason)


def _cells(reader, group: Group, table: str, state: str) -> dict[tuple, dict]:
    """(setting, which, removed) -> {"performance": (mean, std), "isotropy": (mean, std)}: one state of the pair's
    block of Table 1 or 2."""
    found = reader.frame(group, table)
    found = found[(found["dataset"] == group.arguments["dataset"]) & (found["pair"] == group.arguments["pair"])
                  & (found["state"] == state)]
    if found.empty:
        raise NotMeasurable(f"no {state} rows of {group.label} in {table}")
    spreads = found[["performance_std", "isotropy_u_only_std"]]
    if spreads.isna().any().any():
        raise NotMeasurable(ONE_SEED)
    return {(row.setting, row.which, int(row.removed)): {
        "performance": (row.performance, row.performance_std), "isotropy": (row.isotropy_u_only,
                                                                           row.isotropy_u_only_std)}
            for row in found.itertuples()}


def _setting(cells: dict, setting: str, which: str = "top") -> list[tuple[int, dict]]:
    return [(removed, value) for (name, kind, removed), value in sorted(cells.items()) if (name, kind) == (setting,
                                                                                                            which)]


def _top(cells: dict, setting: str) -> dict:
    return _setting(cells, setting)[0][1]


def _check_enhancement_hurts_finetuned(group: Group, reader, settings: dict) -> Verdict:
    margin, parts = settings["margin_std"], {}
    tuned, pretrained = _cells(reader, group, "table1", "fine-tuned"), _cells(reader, group, "table1", "pre-trained")
    base = _top(tuned, "baseline")
    for setting in ("cluster_zero_mean", "global", "cluster_based"):
        value = _top(tuned, setting)
        lower = separation(base["performance"], value["performance"])
        raised = value["isotropy"][0] > base["isotropy"][0]
        measured = (f"I(W) {num(base['isotropy'][0])} to {num(value['isotropy'][0])}, Perf. "
                    f"{num(base['performance'][0])} to {num(value['performance'][0])} ({std_units(-lower)})")
        failures = [] if raised else ["I(W) not raised"]
        if not clears(lower, margin):
            failures.append(f"Perf. {std_units(-lower)}, not {margin} lower")
        parts[f"fine-tuned {SETTING_NAMES[setting]}"] = Verdict(not failures, measured, "; ".join(failures))
    base = _top(pretrained, "baseline")
    for setting in ("cluster_zero_mean", "cluster_based"):
        value = _top(pretrained, setting)
        higher = separation(value["performance"], base["performance"])
        parts[f"pre-trained {SETTING_NAMES[setting]}"] = Verdict(
            clears(higher, margin), f"Perf. {num(base['performance'][0])} to {num(value['performance'][0])} "
            f"({std_units(higher)})", f"Perf. {std_units(higher)}, not {margin} higher")
    return every(parts)


def _check_finetuned_less_isotropic(group: Group, reader, settings: dict) -> Verdict:
    tuned, pretrained = _cells(reader, group, "table1", "fine-tuned"), _cells(reader, group, "table1", "pre-trained")
    parts = {}
    for setting in ("global", "cluster_based"):
        before, after = _top(pretrained, setting)["isotropy"], _top(tuned, setting)["isotropy"]
        apart = separation(before, after)
        parts[SETTING_NAMES[setting]] = Verdict(
            clears(apart, settings["margin_std"]),
            f"I(W) pre-trained {num(before[0])}, fine-tuned {num(after[0])} ({std_units(apart)})",
            f"{std_units(apart)}, under {settings['margin_std']}")
    return every(parts)


def _check_least_directions_cost_less(group: Group, reader, settings: dict) -> Verdict:
    top, least = _cells(reader, group, "table1", "fine-tuned"), _cells(reader, group, "table2", "fine-tuned")
    parts = {}
    for setting in ("global", "cluster_based"):
        removed_top, top_cell = _setting(top, setting)[0]
        for removed, cell in _setting(least, setting, "least"):
            apart = separation(cell["performance"], top_cell["performance"])
            parts[f"{SETTING_NAMES[setting]}, {removed} least vs {removed_top} top"] = Verdict(
                clears(apart, settings["margin_std"]),
                f"Perf. {num(cell['performance'][0])} against {num(top_cell['performance'][0])} ({std_units(apart)})",
                f"{std_units(apart)}, under {settings['margin_std']}")
    return every(parts)


MARGIN = "by at least {margin_std} batch-to-batch std of the difference"
SEED_MARGIN = "by at least {margin_std} std over seeds of the difference"

CLAIMS: dict[str, Claim] = {claim.name: claim for claim in [
    Claim("decoder_bell", RAZZHIGAEV, "abstract; section 4.1; Figure 1",
          "Decoders' anisotropy across layers is bell-shaped, highest in the middle layers.",
          "At its final checkpoint each decoder's anisotropy peaks at an interior layer, at a relative depth (layer / "
          f"layers) within {{middle}}, above layer 0 and above its last layer {MARGIN} each.",
          ("margin_std", "middle"), _figure_1_decoders, _check_bell),
    Claim("encoder_uniform", RAZZHIGAEV, "abstract; section 4.1; Figure 1",
          "Encoders' anisotropy is more uniform across layers than decoders'.",
          "At the final checkpoints, the encoders' median range of anisotropy across layers (max - min of the "
          "per-layer means) is at most {uniform_ratio} x the decoders' median range.",
          ("uniform_ratio",), _figure_1_models, _check_uniform),
    Claim("anisotropy_grows_then_stabilises", RAZZHIGAEV, "section 4.2; Figures 2-3",
          "Decoders' anisotropy grows during training, then stabilises.",
          "Each decoder's anisotropy, mean over layers (figures.layer_average), lies higher at its last checkpoint "
          f"than at its first {MARGIN}, and from {{stable_from}} x its last step on moves (max - min) by at most "
          "{stable_share} x that rise.",
          ("margin_std", "stable_from", "stable_share"), _series_decoders(
              "anisotropy_grows_then_stabilises", "profile_across_checkpoints"), _check_grows),
    Claim("id_rises_then_falls", RAZZHIGAEV, "abstract; section 4.3; Figure 4",
          "The layer-averaged intrinsic dimension rises early in training, then falls.",
          "Each decoder's intrinsic dimension (the figure's estimator), mean over layers (figures.layer_average), "
          "peaks at an interior checkpoint, at a step at most {early} x its last step, above its first and its last "
          f"checkpoint {MARGIN} each.",
          ("margin_std", "early"), _series_decoders("id_rises_then_falls", "id_across_checkpoints"),
          _check_rises_then_falls),
    Claim("id_estimators_agree", RAZZHIGAEV, "section 2.4; appendix A, Figure 5",
          "The rise and fall of the intrinsic dimension holds for all three estimators (TwoNN, MADA, MoM).",
          "The predicate of id_rises_then_falls holds for every estimator the figure draws, for each of its decoders.",
          ("margin_std", "early"), _series_decoders("id_estimators_agree", "id_estimators"), _check_rises_then_falls),
    Claim("loss_improves_while_id_falls", RAZZHIGAEV, "section 3.3 (citing section 4.3 and Figure 5)",
          "Performance improves steadily while the intrinsic dimension falls.",
          "From the checkpoint where each decoder's intrinsic dimension (Figure 4's estimator, mean over layers) "
          "peaks to its last, its loss on the corpus windows (extraction.loss) ends lower by more than "
          "{loss_tolerance} nats and never rises from one checkpoint to the next by more than {loss_tolerance} nats.",
          ("loss_tolerance",), _series_decoders("loss_improves_while_id_falls", "id_across_checkpoints",
                                                read_health=True), _check_loss_while_id_falls),
    Claim("anisotropy_beyond_subword_text", GODEY, "abstract",
          "Anisotropy appears in character-level language models and in transformers of other modalities (speech, "
          "vision).",
          "At its final checkpoint each model's average cosine between token vectors (avg_cosine), mean over its "
          "layers, is at least {anisotropic_cosine}.",
          ("anisotropic_cosine",), _modality_groups, _check_anisotropy_appears),
    Claim("transformers_exceed_cnns", GODEY, "abstract; its vision transformers beside ResNet, EfficientNet, ConvNeXt",
          "Anisotropy is a property of transformers rather than of the modality: vision transformers are more "
          "anisotropic than CNNs.",
          "Each image model's average cosine (avg_cosine), mean over layers, at its final checkpoint less at its "
          "initialisation (its step 0, else its random-init baseline): the lowest transformer's above the highest "
          f"CNN's {MARGIN}.",
          ("margin_std",), _image_models, _check_transformers_exceed_cnns,
          note="the project's reading: the abstract gives no figure for the CNNs, so 'the transformers exceed the "
               "CNNs' is read against each architecture's own random-initialisation floor (ResNet's post-ReLU "
               "states have positive cosines untrained: docs/godey.md)"),
    Claim("finetuning_improves_upper_layers", RAJAEE_PILEHVAR, "section 4, Figure 1; section 5",
          "Fine-tuning improves isotropy, mostly in the upper layers, yet the space stays highly anisotropic.",
          "Per seed, ln I(W) of all tokens (each eigenvector once, the paper's convention) fine-tuned less "
          "pre-trained, averaged over the upper layers (above half the depth) and over the lower ones: the upper "
          f"gain above 0, and above the lower gain, {SEED_MARGIN} each; and the fine-tuned I(W) (mean over seeds) "
          "under {highly_anisotropic_iw} in every layer. Layers with a degenerate view are left out.",
          ("margin_std", "highly_anisotropic_iw"), _pairs("finetuning_improves_upper_layers", tables=False),
          _check_finetuning_improves_upper_layers),
    Claim("cls_more_anisotropic", RAJAEE_PILEHVAR, "section 4, Figure 1",
          "In most layers the fine-tuned [CLS] representations are much more anisotropic than all tokens of the "
          "fine-tuned space.",
          "Per layer of the fine-tuned runs, -log I(W) of the [CLS] vectors less that of all tokens (natural log), "
          f"mean over seeds, exceeds ln({{much_more_anisotropic}}) {SEED_MARGIN}, in more than {{most_layers}} of "
          "the layers whose views are not degenerate.",
          ("margin_std", "much_more_anisotropic", "most_layers"), _pairs("cls_more_anisotropic", tables=False),
          _check_cls_more_anisotropic),
    Claim("isotropy_enhancement_hurts_finetuned", RAJAEE_PILEHVAR, "section 4, Table 1; section 5",
          "Raising the isotropy of a fine-tuned space lowers its STS performance, while for pre-trained models the "
          "cluster-based settings raise it.",
          "Fine-tuned: Clustering+ZM, Global and Cluster-based each raise I(W) above the Baseline's and lower Perf. "
          f"below it {SEED_MARGIN}; pre-trained: Clustering+ZM and Cluster-based raise Perf. above the Baseline's "
          f"{SEED_MARGIN}.",
          ("margin_std",), _pairs("isotropy_enhancement_hurts_finetuned", tables=True),
          _check_enhancement_hurts_finetuned, on_paper_values=True),
    Claim("finetuned_less_isotropic", RAJAEE_PILEHVAR, "section 4, Table 1 (Global, Cluster-based)",
          "With the same number of directions removed, the fine-tuned space is less isotropic than the pre-trained "
          "one.",
          f"Global and Cluster-based: the pre-trained I(W) above the fine-tuned one {SEED_MARGIN}, each.",
          ("margin_std",), _pairs("finetuned_less_isotropic", tables=True), _check_finetuned_less_isotropic,
          on_paper_values=True),
    Claim("least_directions_cost_less", RAJAEE_PILEHVAR, "section 4, Table 2",
          "Removing the 100 or 700 least dominant directions costs the fine-tuned model less performance than "
          "removing the 12 top ones.",
          "Fine-tuned, Global and Cluster-based: Perf. with each count of least dominant directions removed "
          "(finetuning.least_directions, beside the paper's 100 and 700) above Perf. with the top directions removed "
          f"(finetuning.directions) {SEED_MARGIN}, each.",
          ("margin_std",), _pairs("least_directions_cost_less", tables=True), _check_least_directions_cost_less,
          on_paper_values=True),
]}


def plan_claims(experiment, config: dict) -> list[Group]:
    """Every claim's groups, in the order of `CLAIMS`: the rows of the scorecard."""
    low, high = config["claims"]["middle"]
    if not low < high:
        raise ValueError(f"claims.middle: [{low}, {high}] is no interval; give [low, high] with low < high, e.g. "
                         "[0.2, 0.8]")
    return [group for claim in CLAIMS.values() for group in claim.groups(experiment, config)]
