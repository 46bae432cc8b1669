"""The claims of Godey et al. (2023), "Is Anisotropy Inherent to Transformers?" (arXiv 2306.07656). Only its
abstract is in shared/papers/001_58a00226b66f63db.txt: each claim quotes it, and where a predicate goes beyond it the
row's `note` says "the project's reading"."""

import pandas as pd

from shape_of_learning.claims.claim import MARGIN, Claim, Group, each_model, figure_models, layer_mean, summaries
from shape_of_learning.claims.inputs import final_profile, initial_profile
from shape_of_learning.claims.predicates import Margin, NotMeasurable, Verdict, above, every, groups_apart, judged
from shape_of_learning.claims.profiles import Profile, exceeds, nowhere_above
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


def _final_and_floor(summary, model: str, metric: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The model's profile at its final checkpoint and at its initialisation (its untrained floor), and which
    checkpoints health left out of them, with why."""
    (final, note), (initial, floor_note) = (
        final_profile(summary, model, metric),
        initial_profile(summary, model, metric),
    )
    if set(final["checkpoint"]) == set(initial["checkpoint"]):
        raise NotMeasurable(f"{model}'s final checkpoint is its initialisation: nothing trained to judge")
    return final, initial, "; ".join(filter(None, [note, floor_note and f"untrained floor: {floor_note}"]))


def _profile(rows: pd.DataFrame) -> Profile:
    return Profile.of(rows["layer"], rows["mean"], rows["std"], rows["num_layers"].iloc[0])


def _check_anisotropy_appears(group: Group, reader, settings: dict) -> Verdict:
    margin, level = Margin.of(settings), settings["anisotropic_cosine"]

    def one(model: str) -> Verdict:
        final, initial, note = _final_and_floor(reader.summary(group, model), model, COSINE)
        trained = layer_mean(final)
        parts = (
            above(trained, layer_mean(initial), margin=margin, what="final over untrained"),
            above(trained, (level, 0.0), margin=margin, what=f"final over {level}"),
        )
        return Verdict(
            all(part.holds for part in parts),
            "; ".join(part.measured for part in parts),
            "; ".join(part.reason for part in parts if part.reason),
        ).noting(note)

    return each_model(group, one)


def _levels(group: Group, reader, settings: dict, metric: str) -> Verdict:
    """In `metric`: every image transformer's final profile above every CNN's at every relative depth
    (`profiles.exceeds`); each CNN's final profile above its untrained floor at no layer (`profiles.nowhere_above`)."""
    margin, kinds = Margin.of(settings), group.arguments["groups"]
    finals, floors, notes = {}, {}, {}
    for model in group.models:
        summary = reader.summary(group, model)
        if kinds[model] == "CNN":
            final, initial, notes[model] = _final_and_floor(summary, model, metric)
            floors[model] = _profile(initial)
        else:
            final, notes[model] = final_profile(summary, model, metric)
        finals[model] = _profile(final)
    side = {kind: {model: finals[model] for model in finals if kinds[model] == kind} for kind in ("transformer", "CNN")}
    parts = {
        "final checkpoints": groups_apart(
            side["transformer"], side["CNN"], lambda high, low: exceeds(high, low, margin=margin)
        )
    }
    for model, floor in floors.items():
        raised = nowhere_above(finals[model], floor, margin=margin)
        parts[f"{model} against its floor"] = Verdict(
            raised.holds, raised.measured, f"training raises it: {raised.reason}" if raised.reason else ""
        )
    return every(parts).noting("; ".join(f"{model}: {note}" for model, note in notes.items() if note))


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
        "layers (its std the mean of the per-layer stds), lies above {anisotropic_cosine} and above the same "
        f"architecture's untrained floor (its step 0, else its random-init baseline), each {MARGIN}.",
        ("anisotropic_cosine", "margin_std", "spread_floor"),
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
        "At the final checkpoints, in the average cosine (avg_cosine) and in the centred one (avg_cosine_centred): "
        f"every image transformer's profile across layers above every CNN's {MARGIN} at every relative depth "
        "(layer / layers) of either model, the other's per-layer mean and std linearly interpolated to it; and no "
        "CNN's profile above its own untrained floor (its step 0, else its random-init baseline) by as much at "
        "any layer.",
        ("margin_std", "spread_floor"),
        _image_models,
        _check_transformers_exceed_cnns,
        note="the project's reading: the abstract gives no figure for the CNNs; 'inherent to Transformers' is read "
        "as the image transformers above the CNNs at every depth in both cosines, raw and centred (ResNet's "
        "post-ReLU states have positive cosines untrained: docs/godey.md), and no CNN made more anisotropic by "
        "training",
    ),
]
