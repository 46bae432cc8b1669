"""The claims of Razzhigaev et al. (2024), "The Shape of Learning: Anisotropy and Intrinsic Dimensions in
Transformer-Based Models" (EACL 2024), each quoted from shared/papers/000_be8d91d811304a80.txt beside its predicate,
with the models it concerns; the checks are in `razzhigaev_checks`."""

from shape_of_learning import paths
from shape_of_learning.claims.claim import (
    CHANGE,
    MARGIN,
    Claim,
    Group,
    figure_models,
    is_kind,
    not_measurable,
    summaries,
)
from shape_of_learning.claims.razzhigaev_checks import (
    check_bell,
    check_uniform,
    check_grows,
    check_rises_then_falls,
    check_estimators_agree,
    check_loss_while_id_falls,
    check_tinyllama_above_bloom,
)

PAPER = "Razzhigaev et al. (2024)"
# Section 4.4's pair, as the registry may name them (its key or its Hub repository)
TINYLLAMA, BLOOM_1B1 = "tinyllama-1.1b", "bloom-1b1"


# --- groups: the models a claim concerns, from the config's figures ---------------------------------------------


def _figure_1_decoders(claim: Claim, experiment, config: dict) -> list[Group]:
    models = figure_models(experiment, "anisotropy_by_layer", is_kind("decoder"))
    return claim.group(
        "decoders of figures.anisotropy_by_layer",
        models,
        summaries(experiment, models),
        "no decoder among the models of figures.anisotropy_by_layer",
    )


def _figure_1_models(claim: Claim, experiment, config: dict) -> list[Group]:
    models = figure_models(experiment, "anisotropy_by_layer", is_kind("encoder", "decoder"))
    kinds = {model: experiment.models[model]["kind"] for model in models}
    both = {"encoder", "decoder"} <= set(kinds.values())
    return claim.group(
        "encoders and decoders of figures.anisotropy_by_layer",
        models if both else [],
        summaries(experiment, models),
        "figures.anisotropy_by_layer needs an encoder and a decoder",
        kinds=kinds,
    )


def _series_decoders(kind: str, read_health: bool = False):
    """The decoders of the figures of `kind` (the training-dynamics claims are the decoders'), each with the metrics
    that figure draws, their layer average as figures.layer_average sets it; with `read_health`, those of the loss
    figure too, with their health tables (their losses)."""

    def groups(claim: Claim, experiment, config: dict) -> list[Group]:
        metrics = {}
        for figure in experiment.figures:
            for model in figure.models if figure.kind == kind else ():
                if experiment.models[model]["kind"] == "decoder":
                    metrics[model] = list(dict.fromkeys([*metrics.get(model, []), *figure.metrics]))
        if read_health:
            losses_of = set(figure_models(experiment, "loss_across_checkpoints"))
            metrics = {model: found for model, found in metrics.items() if model in losses_of}
        files = summaries(experiment, metrics)
        if read_health:
            files |= {f"health:{model}": ((model,), paths.health(model)) for model in metrics}
        where = f"figures.{kind}" + (" and figures.loss_across_checkpoints" if read_health else "")
        return claim.group(
            f"decoders of {where}",
            list(metrics),
            files,
            f"no decoder in {where}",
            metrics=metrics,
            layer_average=config["figures"]["layer_average"],
        )

    return groups


def _section_4_4_pair(claim: Claim, experiment, config: dict) -> list[Group]:
    """TinyLlama-1.1B and Bloom-1.1B among the models of Figure 4, by registry key or Hub repository."""
    models = figure_models(experiment, "id_across_checkpoints")

    def named(token: str) -> list[str]:
        return [model for model in models if token in f"{model} {experiment.models[model].get('hub_id')}".lower()]

    found = {token: named(token)[:1] for token in (TINYLLAMA, BLOOM_1B1)}
    pair = found[TINYLLAMA] + found[BLOOM_1B1] if all(found.values()) else []
    metric = next((figure.metrics[0] for figure in experiment.figures if figure.kind == "id_across_checkpoints"), "")
    return claim.group(
        "TinyLlama-1.1B and Bloom-1.1B of figures.id_across_checkpoints",
        pair,
        summaries(experiment, pair),
        "figures.id_across_checkpoints needs TinyLlama-1.1B and "
        f"Bloom-1.1B (a model whose key or hub_id names {TINYLLAMA}, and one {BLOOM_1B1})",
        metric=metric,
        layer_average=config["figures"]["layer_average"],
    )


STEADILY = (
    "ends lower by at least {margin_std} standard errors of the difference (from each loss's own, loss_se, and taken "
    "as no less than {spread_floor} x the larger loss) and over no stretch of checkpoints rises by as much"
)

CLAIMS = [
    Claim(
        "decoder_bell",
        PAPER,
        "abstract; section 4.1; Figure 1",
        "Our findings reveal that anisotropy profile in transformer decoders exhibits a distinct bell-shaped curve, "
        "with the highest anisotropy concentrations in the middle layers. (abstract) | Decoders: In contrast to the "
        "encoders, decoders showcase a unique bell-shaped structure, indicating that the middle layers tend to have "
        "a higher anisotropy concentration among all examined models. (4.1)",
        "Decoders' anisotropy across layers is bell-shaped, highest in the middle layers.",
        "At its final checkpoint each decoder's anisotropy has one interior peak: above layer 0 and its last layer "
        f"{CHANGE} each, rising up to it and falling after it (no second peak by as much), and resolved to the "
        "middle: every layer the peak does not exceed by as much, its own included, at a relative depth (layer / "
        "layers) strictly between {middle[0]} and {middle[1]}; where every interior layer lies between them (4 "
        "layers or fewer for 0.2 and 0.8), not measurable.",
        ("margin_std", "spread_floor", "min_change", "middle"),
        _figure_1_decoders,
        check_bell,
    ),
    Claim(
        "encoder_uniform",
        PAPER,
        "abstract; Figure 1",
        "This pattern diverges from the more uniformly distributed anisotropy observed in encoders. (abstract)",
        "Encoders' anisotropy is more uniform across layers than decoders'.",
        "At the final checkpoints, each model's range of anisotropy across layers as a share of its peak ((max - "
        "min) / max of the per-layer means), with its std (hypot(std at the max layer, std at the min layer) / max), "
        "medians over models of both: the decoders' median range above the encoders' / {uniform_ratio} "
        f"{MARGIN}.",
        ("margin_std", "spread_floor", "uniform_ratio"),
        _figure_1_models,
        check_uniform,
    ),
    Claim(
        "anisotropy_grows_then_stabilises",
        PAPER,
        "section 4.2; Figures 2-3",
        "The consistent growth pattern, followed by stabilization, is observed across various models, suggesting "
        "an inherent characteristic of the language modeling training dynamics of decoders. (4.2)",
        "Decoders' anisotropy grows during training, then stabilises.",
        "Each decoder's anisotropy, mean over layers (figures.layer_average), rises from its first checkpoint to "
        f"its last {MARGIN}; once that far above its first checkpoint it never falls below an "
        "earlier checkpoint by as much and by more than {stable_share} x its rise; and from {stable_from} x its "
        "last step on it moves (max - min) by at most {stable_share} x its rise, or by less than the margin.",
        ("margin_std", "spread_floor", "stable_from", "stable_share"),
        _series_decoders("profile_across_checkpoints"),
        check_grows,
    ),
    Claim(
        "id_rises_then_falls",
        PAPER,
        "abstract; section 4.3; Figure 4",
        "The initial stages exhibit a sharp rise, indicating the model's attempt to map the information to higher "
        "dimensional spaces. However, as training progresses, there is a notable decline, suggesting a subsequent "
        "phase where the model compresses this information, refining more compact concepts. (4.3)",
        "The layer-averaged intrinsic dimension rises early in training, then falls.",
        "Each decoder's intrinsic dimension (the figure's estimator), mean over layers (figures.layer_average), has "
        f"one interior peak over its checkpoints: above its first and its last {CHANGE} each, rising up to it and "
        "falling after it (no second peak by as much), and resolved to early training: every checkpoint the peak "
        "does not exceed by as much, its own included, at a step before {early} x its last step.",
        ("margin_std", "spread_floor", "min_change", "early"),
        _series_decoders("id_across_checkpoints"),
        check_rises_then_falls,
    ),
    Claim(
        "id_estimators_agree",
        PAPER,
        "section 2.4; appendix A, Figure 5",
        "All three local methods show correlating results in our experiments. (2.4)",
        "The rise and fall of the intrinsic dimension holds for all three estimators (TwoNN, MADA, MoM).",
        "The predicate of id_rises_then_falls holds for every intrinsic-dimension estimator the figure draws, for "
        "each of its decoders; fewer than 2 estimators (another metric is none) is not measurable.",
        ("margin_std", "spread_floor", "min_change", "early"),
        _series_decoders("id_estimators"),
        check_estimators_agree,
    ),
    Claim(
        "loss_improves_while_id_falls",
        PAPER,
        "section 3.3 (citing section 4.3 and Figure 5)",
        "This findings is on par with our observations regarding the two-phase training of the language models, "
        "where the intrinsic dimension experiences initial growth followed by a subsequent decline. Notably, during "
        "this phase, the model's performance exhibits steady improvement (3.3)",
        "Performance improves steadily while the intrinsic dimension falls.",
        "Each decoder's intrinsic dimension (Figure 4's estimator, mean over layers) falls from its peak to its "
        f"last checkpoint {CHANGE}; and from that peak on, its loss on the corpus windows (extraction.loss), at "
        f"every checkpoint with a loss whatever its health, {STEADILY}.",
        ("margin_std", "spread_floor", "min_change"),
        _series_decoders("id_across_checkpoints", read_health=True),
        check_loss_while_id_falls,
        note="the project's reading: the 'performance' of section 3.3 is the loss on the corpus windows, the "
        "pipeline's one measure of it",
    ),
    Claim(
        "tinyllama_id_above_bloom",
        PAPER,
        "section 4.4",
        "It is noteworthy that there is a considerable difference among models with the same number of parameters "
        "(Bloom-1.1B and TinyLlama-1.1B), each featuring distinct architectural configurations. The intrinsic "
        "dimension of the latter is higher both at the end of training and at its peak. (4.4)",
        "TinyLlama-1.1B's intrinsic dimension is higher than Bloom-1.1B's, at the end of training and at its peak.",
        "TinyLlama-1.1B's intrinsic dimension (Figure 4's estimator, mean over layers) above Bloom-1.1B's at their "
        f"last checkpoints and at their peaks {MARGIN}, each.",
        ("margin_std", "spread_floor"),
        _section_4_4_pair,
        check_tinyllama_above_bloom,
    ),
    Claim(
        "id_unlinked_to_warmup",
        PAPER,
        "section 4.4",
        "The obtained results also lead to the conclusion that the growth and the decline of the intrinsic "
        "dimension do not show correlation with the warmup period in the learning rate scheduler. (4.4)",
        "The rise and fall of the intrinsic dimension is not linked to the learning-rate warm-up.",
        "None: the run does not know the models' learning-rate schedules.",
        (),
        not_measurable(
            "the run records no learning-rate schedule: the warm-up of each model's pre-training is "
            "none of its inputs, so a correlation with it cannot be measured"
        ),
    ),
]
