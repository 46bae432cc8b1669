"""The claims of Godey et al. (2023), "Is Anisotropy Inherent to Transformers?" (arXiv 2306.07656). Only its
abstract is in shared/papers/001_58a00226b66f63db.txt: each claim quotes it, and where a predicate goes beyond it the
row's `note` says "the project's reading"."""

from shape_of_learning.claims.claim import MARGIN, Claim, Group, each_model, figure_models, layer_mean, summaries
from shape_of_learning.claims.inputs import final_profile, initial_profile
from shape_of_learning.claims.predicates import NotMeasurable, Verdict, above, every, groups_apart, judged, num
from shape_of_learning.figures.profile_by_modality import model_group

PAPER = "Godey et al. (2023)"
FIGURE = "profile_by_modality"  # the figure kind of the paper's models: the claims' one reference to it
COSINE = "avg_cosine"  # the paper's measure of anisotropy: the average cosine between token vectors
CENTRED = "avg_cosine_centred"  # the same after removing the mean vector: what a ReLU's positive mean cannot lift
ABSTRACT = (
    "We show in this paper that anisotropy can also be observed empirically in language models with specific "
    "objectives that should not suffer directly from the same consequences. We also show that the anisotropy "
    "problem extends to Transformers trained on other modalities. Our observations tend to demonstrate that "
    "anisotropy might actually be inherent to Transformers-based models. (abstract)"
)


def _beyond_subword_groups(claim: Claim, experiment, config: dict) -> list[Group]:
    """Character- and byte-level text models, image and speech transformers of the figure, each a row."""
    models = figure_models(experiment, FIGURE)
    where = {model: model_group(experiment.models[model]) for model in models}
    found = []
    for label, keep in (
        ("character- and byte-level text models", lambda g: g["modality"] == "text" and g["group"] != "subword-level"),
        ("image transformers", lambda g: g == {"modality": "image", "group": "transformer"}),
        ("speech transformers", lambda g: g == {"modality": "audio", "group": "transformer"}),
    ):
        chosen = [model for model in models if keep(where[model])]
        found += claim.group(
            f"{label} of figures.{FIGURE}",
            chosen,
            summaries(experiment, chosen, baselines=True),
            f"no {label.removesuffix(' models')} among the models of figures.{FIGURE}",
        )
    return found


def _image_models(claim: Claim, experiment, config: dict) -> list[Group]:
    models = figure_models(experiment, FIGURE, lambda entry: entry["modality"] == "image")
    groups = {model: model_group(experiment.models[model])["group"] for model in models}
    both = {"transformer", "CNN"} <= set(groups.values())
    return claim.group(
        f"image transformers and CNNs of figures.{FIGURE}",
        models if both else [],
        summaries(experiment, models, baselines=True),
        f"figures.{FIGURE} needs an image transformer and a CNN",
        groups=groups,
    )


def _trained(summary, model: str, metric: str) -> tuple[float, float]:
    """The model's mean over layers at its final checkpoint, (mean, mean batch-to-batch std)."""
    return layer_mean(final_profile(summary, model, metric))


def _trained_and_floor(summary, model: str, metric: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """The model's mean over layers at its final checkpoint and at its initialisation (its untrained floor)."""
    final, initial = final_profile(summary, model, metric), initial_profile(summary, model, metric)
    if set(final["checkpoint"]) == set(initial["checkpoint"]):
        raise NotMeasurable(f"{model}'s final checkpoint is its initialisation: nothing trained to judge")
    return layer_mean(final), layer_mean(initial)


def _check_anisotropy_appears(group: Group, reader, settings: dict) -> Verdict:
    def one(model: str) -> Verdict:
        trained, floor = _trained_and_floor(reader.summary(group, model), model, COSINE)
        over = above(trained, floor, margin=settings["margin_std"], what="final over untrained")
        reasons = [] if over.holds else [over.reason]
        if trained[0] < settings["anisotropic_cosine"]:
            reasons.append(f"final {num(trained[0])} under {settings['anisotropic_cosine']}")
        return Verdict(not reasons, over.measured, "; ".join(reasons))

    return each_model(group, one)


def _levels(group: Group, reader, settings: dict, metric: str) -> Verdict:
    """In `metric`: the transformers above the CNNs at the final checkpoint; each CNN not above its untrained floor."""
    kinds = group.arguments["groups"]
    levels = {model: _trained(reader.summary(group, model), model, metric) for model in group.models}
    side = {
        kind: {model: level for model, level in levels.items() if kinds[model] == kind}
        for kind in ("transformer", "CNN")
    }
    parts = {"final checkpoints": groups_apart(side["transformer"], side["CNN"], margin=settings["margin_std"])}
    for model in side["CNN"]:
        trained, floor = _trained_and_floor(reader.summary(group, model), model, metric)
        over = above(trained, floor, margin=settings["margin_std"], what="final over untrained")
        parts[f"{model} against its floor"] = Verdict(
            not over.holds, over.measured, "training raises it" if over.holds else ""
        )
    return every(parts)


def _check_transformers_exceed_cnns(group: Group, reader, settings: dict) -> Verdict:
    return every({metric: judged(_levels, group, reader, settings, metric) for metric in (COSINE, CENTRED)})


CLAIMS = [
    Claim(
        "anisotropy_beyond_subword_text",
        PAPER,
        "abstract",
        ABSTRACT,
        "Anisotropy appears in language models that should not suffer from rare subword tokens (character- and "
        "byte-level) and in transformers of other modalities (speech, vision).",
        "At its final checkpoint each model's average cosine between token vectors (avg_cosine), mean over its "
        f"layers, is at least {{anisotropic_cosine}} and above the same architecture's untrained floor (its step "
        f"0, else its random-init baseline) {MARGIN}.",
        ("anisotropic_cosine", "margin_std"),
        _beyond_subword_groups,
        _check_anisotropy_appears,
        note="the project's reading: the abstract names no model; its 'language models with specific objectives' "
        "are read as the character- and byte-level models of its references (CANINE, ByT5), and 'observed' "
        "as a level that training raised above the architecture's untrained floor",
    ),
    Claim(
        "transformers_exceed_cnns",
        PAPER,
        "abstract",
        ABSTRACT,
        "Anisotropy is a property of transformers, not of the modality: vision transformers are more anisotropic "
        "than CNNs.",
        "At the final checkpoints, in the average cosine (avg_cosine) and in the centred one (avg_cosine_centred), "
        f"each a mean over layers: the lowest image transformer above the highest CNN {MARGIN}; and no CNN above "
        "its own untrained floor (its step 0, else its random-init baseline) by as much.",
        ("margin_std",),
        _image_models,
        _check_transformers_exceed_cnns,
        note="the project's reading: the abstract gives no figure for the CNNs; 'inherent to Transformers' is read "
        "as the image transformers above the CNNs in both cosines, raw and centred (ResNet's post-ReLU states "
        "have positive cosines untrained: docs/godey.md), and no CNN made more anisotropic by training",
    ),
]
