"""The checks of Razzhigaev et al.'s claims (`razzhigaev`): each reads a group's files and judges its models with
the predicates (`predicates`, `series`) and the config's thresholds. Each names, in what it measured, the
checkpoints health left out of the rows it judged (`inputs`)."""

import math

from shape_of_learning.claims.claim import Group, each_model
from shape_of_learning.claims.inputs import final_profile, is_id_estimator, loss_series, training_series
from shape_of_learning.claims.predicates import Margin, NotMeasurable, Verdict, above, every, judged, num, spread_ratio
from shape_of_learning.claims.series import (
    Series,
    falls_from_peak,
    falls_steadily,
    grows_then_stabilises,
    interior_peak,
)

ANISOTROPY = "anisotropy"  # the paper's measure (section 2.3), whatever metric a figure draws


# --- checks: a group, a reader of the run's files, the thresholds -> a Verdict ------------------------------------


def _layer_profile(reader, group: Group, model: str, shape: str) -> tuple[Series, str]:
    """The model's anisotropy per layer at its final checkpoint (`shape` says what needs three layers), and which
    checkpoints health left out of it, with why."""
    profile, note = final_profile(reader.summary(group, model), model, ANISOTROPY)
    return Series.of(profile["layer"], profile["mean"], profile["std"], "layer", least=3, shape=shape), note


def check_bell(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        profile, note = _layer_profile(reader, group, model, "a bell")
        verdict = interior_peak(
            profile, margin=Margin.of(settings), min_change=settings["min_change"], within=tuple(settings["middle"])
        )
        return verdict.noting(note)

    return each_model(group, one)


def _relative_range(profile: Series, model: str) -> tuple[float, float]:
    """A profile's range across layers as a share of its peak, (max - min) / max of the per-layer means, so that an
    encoder's own small bell counts; with its std, hypot(std at the max layer, std at the min layer) / max."""
    high, low = int(profile.means.argmax()), int(profile.means.argmin())
    if profile.means[high] <= 0:
        raise NotMeasurable(f"{model}'s anisotropy is nowhere above 0: no share of its peak to take")
    share = (profile.means[high] - profile.means[low]) / profile.means[high]
    return float(share), float(math.hypot(profile.stds[high], profile.stds[low]) / profile.means[high])


def check_uniform(group: Group, reader, settings: dict) -> Verdict:
    """The decoders' median range across layers above the encoders' / uniform_ratio by the margin
    (`predicates.spread_ratio`), each model's range and its std as `_relative_range` takes them."""
    ranges, notes = {}, []
    for model in group.models:
        profile, note = _layer_profile(reader, group, model, "a range across layers")
        ranges[model] = _relative_range(profile, model)
        notes += [f"{model}: {note}"] if note else []
    side = {
        kind: {model: value for model, value in ranges.items() if group.arguments["kinds"][model] == kind}
        for kind in ("encoder", "decoder")
    }
    ratio = settings["uniform_ratio"]
    verdict = spread_ratio(
        side["encoder"],
        side["decoder"],
        max_ratio=ratio,
        margin=Margin.of(settings),
        what=f"decoders' median over the encoders' / {ratio}",
    )
    listed = "; ".join(
        f"{kind}s' (max - min) / max "
        + ", ".join(f"{model} {num(value)} (std {num(std)})" for model, (value, std) in found.items())
        for kind, found in side.items()
    )
    return Verdict(verdict.holds, f"{listed}; {verdict.measured}", verdict.reason).noting("; ".join(notes))


def _id_series(reader, group: Group, model: str, metric: str, least: int = 3) -> tuple[Series, str]:
    """The model's layer-averaged intrinsic dimension per checkpoint, and which checkpoints health left out."""
    if not is_id_estimator(metric):
        raise NotMeasurable(f"{metric} is no intrinsic-dimension estimator")
    line, note = training_series(reader.summary(group, model), model, metric, group.arguments["layer_average"])
    return Series.of(line["step"], line["mean"], line["std"], "step", least=least, shape="a rise then a fall"), note


def check_grows(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        line, note = training_series(reader.summary(group, model), model, ANISOTROPY, group.arguments["layer_average"])
        series = Series.of(line["step"], line["mean"], line["std"], "step", least=2, shape="growing then stabilising")
        verdict = grows_then_stabilises(
            series,
            margin=Margin.of(settings),
            stable_from=settings["stable_from"],
            stable_share=settings["stable_share"],
        )
        return verdict.noting(note)

    return each_model(group, one)


def _rises_then_falls(group: Group, reader, settings: dict, model: str, metric: str) -> Verdict:
    dimension, note = _id_series(reader, group, model, metric)
    verdict = interior_peak(
        dimension,
        margin=Margin.of(settings),
        min_change=settings["min_change"],
        within=(0.0, settings["early"]),
    )
    return verdict.noting(note)


def check_rises_then_falls(group: Group, reader, settings: dict) -> Verdict:
    """Each decoder of Figure 4, with its estimator."""
    return every(
        {
            model: judged(_rises_then_falls, group, reader, settings, model, metrics[0])
            for model, metrics in group.arguments["metrics"].items()
        }
    )


def check_estimators_agree(group: Group, reader, settings: dict) -> Verdict:
    """Each decoder of Figure 5 with each of its intrinsic-dimension estimators; another metric is none, and said."""
    parts, refused = {}, []
    for model, metrics in group.arguments["metrics"].items():
        estimators = [metric for metric in metrics if is_id_estimator(metric)]
        refused += [f"{model} {metric}" for metric in metrics if metric not in estimators]
        if len(estimators) < 2:
            parts[model] = Verdict(
                None,
                "",
                f"{len(estimators)} intrinsic-dimension estimator(s) among "
                f"{', '.join(metrics)}: agreement needs 2 or more",
            )
        for metric in estimators if len(estimators) > 1 else ():
            parts[f"{model} {metric}"] = judged(_rises_then_falls, group, reader, settings, model, metric)
    verdict = every(parts)
    note = f"refused, no intrinsic-dimension estimator: {', '.join(refused)}" if refused else ""
    return Verdict(verdict.holds, "; ".join(filter(None, [note, verdict.measured])), verdict.reason)


def check_loss_while_id_falls(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        metric = group.arguments["metrics"][model][0]
        dimension, note = _id_series(reader, group, model, metric, least=2)
        fall, peak = falls_from_peak(dimension, margin=Margin.of(settings), min_change=settings["min_change"])
        if not fall.holds:
            verdict = Verdict(False, f"{metric} {fall.measured}", f"its {metric} does not fall: {fall.reason}")
            return verdict.noting(note)
        losses, left_out = loss_series(reader.frame(group, f"health:{model}"), since=dimension.positions[peak])
        verdict = falls_steadily(losses["step"], losses["loss"], losses["loss_se"], margin=Margin.of(settings))
        measured = f"{metric} {fall.measured}; {verdict.measured}"
        if left_out:
            measured += f"; read although health leaves them out of the figures: {left_out}"
        return Verdict(verdict.holds, measured, verdict.reason).noting(note)

    return each_model(group, one)


def check_tinyllama_above_bloom(group: Group, reader, settings: dict) -> Verdict:
    (tinyllama, tinyllama_note), (bloom, bloom_note) = (
        _id_series(reader, group, model, group.arguments["metric"], least=2) for model in group.models
    )
    parts = {}
    for when, index in (
        ("at the end of training", lambda series: len(series.means) - 1),
        ("at its peak", lambda series: int(series.means.argmax())),
    ):
        parts[when] = above(
            tinyllama.point(index(tinyllama)),
            bloom.point(index(bloom)),
            margin=Margin.of(settings),
            what=f"{group.models[0]} over {group.models[1]}",
        )
    notes = (f"{model}: {note}" for model, note in zip(group.models, (tinyllama_note, bloom_note)) if note)
    return every(parts).noting("; ".join(notes))
