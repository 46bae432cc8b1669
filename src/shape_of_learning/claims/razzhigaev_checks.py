"""The checks of Razzhigaev et al.'s claims (`razzhigaev`): each reads a group's files and judges its models with
the predicates (`predicates`, `series`) and the config's thresholds."""

from shape_of_learning.claims.claim import Group, each_model, positions_named
from shape_of_learning.claims.inputs import final_profile, is_id_estimator, loss_series, training_series
from shape_of_learning.claims.predicates import NotMeasurable, Verdict, above, every, judged, num, spread_ratio
from shape_of_learning.claims.series import (
    Series,
    falls_from_peak,
    falls_steadily,
    grows_then_stabilises,
    interior_peak,
)

ANISOTROPY = "anisotropy"  # the paper's measure (section 2.3), whatever metric a figure draws


# --- checks: a group, a reader of the run's files, the thresholds -> a Verdict ------------------------------------


def _layer_profile(reader, group: Group, model: str, shape: str) -> Series:
    """The model's anisotropy per layer at its final checkpoint; `shape` says what needs three layers."""
    profile = final_profile(reader.summary(group, model), model, ANISOTROPY)
    return Series.of(profile["layer"], profile["mean"], profile["std"], positions_named("layer"), least=3, shape=shape)


def check_bell(group: Group, reader, settings: dict) -> Verdict:
    return each_model(
        group,
        lambda model: interior_peak(
            _layer_profile(reader, group, model, "a bell"),
            margin=settings["margin_std"],
            min_change=settings["min_change"],
            within=tuple(settings["middle"]),
        ),
    )


def check_uniform(group: Group, reader, settings: dict) -> Verdict:
    """Each model's range across layers as a share of its peak, so that an encoder's own small bell counts."""
    ranges = {}
    for model in group.models:
        means = _layer_profile(reader, group, model, "a range across layers").means
        if means.max() <= 0:
            raise NotMeasurable(f"{model}'s anisotropy is nowhere above 0: no share of its peak to take")
        ranges[model] = float((means.max() - means.min()) / means.max())
    side = {
        kind: {model: value for model, value in ranges.items() if group.arguments["kinds"][model] == kind}
        for kind in ("encoder", "decoder")
    }
    verdict = spread_ratio(side["encoder"], side["decoder"], max_ratio=settings["uniform_ratio"])
    listed = "; ".join(
        f"{kind}s' (max - min) / max " + ", ".join(f"{model} {num(value)}" for model, value in found.items())
        for kind, found in side.items()
    )
    return Verdict(verdict.holds, f"{listed}; {verdict.measured}", verdict.reason)


def _id_series(reader, group: Group, model: str, metric: str, least: int = 3) -> Series:
    if not is_id_estimator(metric):
        raise NotMeasurable(f"{metric} is no intrinsic-dimension estimator")
    line = training_series(reader.summary(group, model), model, metric, group.arguments["layer_average"])
    return Series.of(
        line["step"], line["mean"], line["std"], positions_named("step"), least=least, shape="a rise then a fall"
    )


def check_grows(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        line = training_series(reader.summary(group, model), model, ANISOTROPY, group.arguments["layer_average"])
        return grows_then_stabilises(
            Series.of(
                line["step"],
                line["mean"],
                line["std"],
                positions_named("step"),
                least=2,
                shape="growing then stabilising",
            ),
            margin=settings["margin_std"],
            stable_from=settings["stable_from"],
            stable_share=settings["stable_share"],
        )

    return each_model(group, one)


def _rises_then_falls(group: Group, reader, settings: dict, model: str, metric: str) -> Verdict:
    return interior_peak(
        _id_series(reader, group, model, metric),
        margin=settings["margin_std"],
        min_change=settings["min_change"],
        within=(0.0, settings["early"]),
    )


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
        dimension = _id_series(reader, group, model, metric, least=2)
        fall, peak = falls_from_peak(dimension, margin=settings["margin_std"], min_change=settings["min_change"])
        if not fall.holds:
            return Verdict(False, f"{metric} {fall.measured}", f"its {metric} does not fall: {fall.reason}")
        losses, left_out = loss_series(reader.frame(group, f"health:{model}"), since=dimension.positions[peak])
        verdict = falls_steadily(losses["step"], losses["loss"], tolerance=settings["loss_tolerance"])
        measured = f"{metric} {fall.measured}; {verdict.measured}"
        if left_out:
            measured += f"; read although health leaves them out of the figures: {left_out}"
        return Verdict(verdict.holds, measured, verdict.reason)

    return each_model(group, one)


def check_tinyllama_above_bloom(group: Group, reader, settings: dict) -> Verdict:
    tinyllama, bloom = (_id_series(reader, group, model, group.arguments["metric"], least=2) for model in group.models)
    parts = {}
    for when, index in (
        ("at the end of training", lambda series: len(series.means) - 1),
        ("at its peak", lambda series: int(series.means.argmax())),
    ):
        parts[when] = above(
            tinyllama.point(index(tinyllama)),
            bloom.point(index(bloom)),
            margin=settings["margin_std"],
            what=f"{group.models[0]} over {group.models[1]}",
        )
    return every(parts)
