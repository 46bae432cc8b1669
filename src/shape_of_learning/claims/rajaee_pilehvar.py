"""The claims of Rajaee & Pilehvar (2021), "How Does Fine-tuning Affect the Geometry of Embedding Space: A Case Study
on Isotropy" (Findings of EMNLP 2021), each quoted from shared/papers/003_2701bf2652464282.txt beside its predicate,
with the models it concerns: one row per model pair and evaluated split. The checks are in `rajaee_pilehvar_checks`."""

from shape_of_learning import paths
from shape_of_learning.claims.claim import SEED_MARGIN, Claim, Group
from shape_of_learning.claims.inputs import RAJAEE_PILEHVAR, RAJAEE_PILEHVAR_SECTION
from shape_of_learning.claims.rajaee_pilehvar_checks import (
    check_finetuning_improves_upper_layers,
    check_cls_more_anisotropic,
    check_roberta_more_anisotropic,
    check_sts_performance_rises,
    check_enhancement_hurts_finetuned,
    check_finetuned_less_isotropic,
    check_least_directions_cost_less,
    check_least_directions_barely_matter,
)

PAPER, SECTION = RAJAEE_PILEHVAR, RAJAEE_PILEHVAR_SECTION
IN_BOTH_CONVENTIONS = (
    " Judged in both I(W) conventions, sign-free and the notebook's: a verdict that differs between them is "
    "'depends on the I(W) convention'."
)


# --- groups: one per pair and evaluated split ---------------------------------------------------------------------


def _pairs(tables: bool):
    """Per model pair and evaluated split: its per-layer files (pre-trained, each seed's fine-tuned run), or Tables
    1-2."""

    def groups(claim: Claim, experiment, config: dict) -> list[Group]:
        if not experiment.pairs:
            return claim.group(f"{SECTION}.pairs", [], {}, f"the config has no `{SECTION}:` section")
        everything = experiment.needs(job.model for job in experiment.analyses)  # Tables 1-2 need every analysis
        found = []
        for reference in dict.fromkeys(job.reference for job in experiment.analyses):
            for pair in experiment.pairs:
                jobs = [job for job in experiment.analyses if job.reference == reference and job.pair == pair]
                files = (
                    {f"table{n}": (everything, path) for n, path in enumerate(paths.RAJAEE_PILEHVAR_TABLES, 1)}
                    if tables
                    else {f"layers:{job.model}": (experiment.needs([job.model]), job.output("layers")) for job in jobs}
                )
                found += claim.group(
                    f"{pair.label} on {reference}",
                    list(experiment.needs(j.model for j in jobs)),
                    files,
                    "",
                    dataset=reference,
                    pair=pair.label,
                    pretrained=pair.pretrained,
                    runs=pair.finetuned_models,
                    paper=pair.paper,
                )
        return found

    return groups


def _bert_and_roberta(claim: Claim, experiment, config: dict) -> list[Group]:
    """The pairs beside the paper's BERT and RoBERTa, on the first evaluated split (Figure 1's)."""
    jobs = experiment.figure_analyses
    sides = {
        paper: next((pair for pair in experiment.pairs if pair.paper == paper), None) for paper in ("BERT", "RoBERTa")
    }
    chosen = [job for job in jobs if job.pair in sides.values()] if all(sides.values()) else []
    return claim.group(
        f"{SECTION}.pairs of paper BERT and RoBERTa",
        list(experiment.needs(j.model for j in chosen)),
        {f"layers:{job.model}": (experiment.needs([job.model]), job.output("layers")) for job in chosen},
        f"{SECTION}.pairs needs a pair with paper: BERT and one with paper: RoBERTa",
        sides={paper: (pair.pretrained, pair.finetuned_models) for paper, pair in sides.items() if pair},
    )


CLAIMS = [
    Claim(
        "sts_performance_rises",
        PAPER,
        "section 1; section 3.3; Table 1 (Baseline)",
        "The pre-trained BERT and RoBERTa (Liu et al., 2019b) underperform static embeddings on STS, while "
        "fine-tuning significantly boosts their performance (1) | However, fine-tuning, whether with [CLS] token or "
        "mean-pooling method, can dramatically enhance the performance (3.3)",
        "Fine-tuning raises STS performance (Table 1's Baseline: 84.41 against 54.14 for BERT): the premise of the "
        "paper's other claims, which compare a model that does the task with one that does not.",
        f"Table 1, Baseline: the fine-tuned Perf. above the pre-trained one {SEED_MARGIN}.",
        ("margin_std", "spread_floor"),
        _pairs(tables=True),
        check_sts_performance_rises,
        on_paper_values=True,
    ),
    Claim(
        "finetuning_improves_upper_layers",
        PAPER,
        "section 4, Figure 1",
        "Although fine-tuning improves isotropy, specifically in the upper layers, the distribution of embeddings "
        "is still highly non-uniform. (4)",
        "Fine-tuning improves isotropy, mostly in the upper layers, yet the space stays highly anisotropic.",
        "Per seed, ln I(W) of all tokens fine-tuned less pre-trained, averaged over all layers, over the upper "
        f"layers (above half the depth) and the upper less the lower: each above 0 {SEED_MARGIN}; and the "
        f"fine-tuned I(W) (mean over seeds) under {{highly_anisotropic_iw}} {SEED_MARGIN} in every layer. Layers "
        "with a degenerate view are left out." + IN_BOTH_CONVENTIONS,
        ("margin_std", "spread_floor", "highly_anisotropic_iw"),
        _pairs(tables=False),
        check_finetuning_improves_upper_layers,
    ),
    Claim(
        "cls_more_anisotropic",
        PAPER,
        "section 4, Figure 1",
        "Moreover, in most layers, the [CLS] tokens' representations are much more anisotropic than all "
        "representations in the fine-tuned space. (4)",
        "In most layers the fine-tuned [CLS] representations are much more anisotropic than all tokens of the "
        "fine-tuned space.",
        "Per layer of the fine-tuned runs, -ln I(W) of the [CLS] vectors less that of all tokens, mean over seeds, "
        f"exceeds ln({{much_more_anisotropic}}) {SEED_MARGIN}, in more than {{most_layers}} of the layers whose "
        "views are not degenerate." + IN_BOTH_CONVENTIONS,
        ("margin_std", "spread_floor", "much_more_anisotropic", "most_layers"),
        _pairs(tables=False),
        check_cls_more_anisotropic,
    ),
    Claim(
        "roberta_more_anisotropic",
        PAPER,
        "section 4, Figure 1",
        "These patterns hold for both BERT and RoBERTa, while the latter tends to be more anisotropic. (4)",
        "RoBERTa tends to be more anisotropic than BERT.",
        "Pre-trained, and fine-tuned (mean over seeds): -ln I(W) of all tokens of the RoBERTa pair above the BERT "
        f"pair's {SEED_MARGIN} in more than {{most_layers}} of the layers, each." + IN_BOTH_CONVENTIONS,
        ("margin_std", "spread_floor", "most_layers"),
        _bert_and_roberta,
        check_roberta_more_anisotropic,
    ),
    Claim(
        "isotropy_enhancement_hurts_finetuned",
        PAPER,
        "section 4, Table 1",
        "Clearly, as opposed to pre-trained models, increasing isotropy of the fine-tuned embedding space does not "
        "enhance performance. Instead, we observe a drop in performance. (4) | These two settings can improve the "
        "STS performance of the pre-trained model by increasing isotropy. However, applying them to fine-tuned "
        "CWRs leads to performance reduction. (4)",
        "Raising the isotropy of a fine-tuned space lowers its STS performance, while for pre-trained models the "
        "cluster-based settings raise it.",
        "Fine-tuned: Clustering+ZM, Global and Cluster-based each raise I(W) above the Baseline's and lower Perf. "
        f"below it, each {SEED_MARGIN}; pre-trained: Clustering+ZM and Cluster-based raise Perf. above the Baseline's "
        f"{SEED_MARGIN}." + IN_BOTH_CONVENTIONS,
        ("margin_std", "spread_floor"),
        _pairs(tables=True),
        check_enhancement_hurts_finetuned,
        on_paper_values=True,
    ),
    Claim(
        "finetuned_less_isotropic",
        PAPER,
        "section 4, Table 1 (Global, Cluster-based)",
        "The results of Global and Cluster-based approaches in Table 1 reveal that with equal numbers of removed "
        "directions, the fine-tuned embedding space is less isotropic compared to the pre-trained one. (4)",
        "With the same number of directions removed, the fine-tuned space is less isotropic than the pre-trained one.",
        f"Global and Cluster-based: the pre-trained I(W) above the fine-tuned one {SEED_MARGIN}, each."
        + IN_BOTH_CONVENTIONS,
        ("margin_std", "spread_floor"),
        _pairs(tables=True),
        check_finetuned_less_isotropic,
        on_paper_values=True,
    ),
    Claim(
        "least_directions_cost_less",
        PAPER,
        "section 4, Table 2",
        "By eliminating the 100 and 700 least dominant directions from a total of 768 directions, we observe a "
        "slight drop in the performance compared to removing 12 top dominant directions. (4)",
        "Removing the 100 or 700 least dominant directions costs the fine-tuned model less performance than "
        "removing the 12 top ones.",
        "Fine-tuned, Global and Cluster-based: Perf. with each count of least dominant directions removed "
        f"({SECTION}.least_directions, beside the paper's 100 and 700) above Perf. with the top directions removed "
        f"({SECTION}.directions) {SEED_MARGIN}, each.",
        ("margin_std", "spread_floor"),
        _pairs(tables=True),
        check_least_directions_cost_less,
        on_paper_values=True,
    ),
    Claim(
        "least_directions_barely_matter",
        PAPER,
        "Table 2, caption",
        "The results suggest the low sensitivity of the fine-tuned models to eliminating more than 90% of "
        "directions with lower elongations. (Table 2)",
        "Removing the least dominant directions barely moves the fine-tuned model's performance from its Baseline.",
        "Fine-tuned, Global and Cluster-based: Perf. with each count of least dominant directions removed within "
        "{barely_moves} Spearman points (x 100) of the Baseline's, each: the size of the change under "
        f"{{barely_moves}} {SEED_MARGIN}.",
        ("margin_std", "spread_floor", "barely_moves"),
        _pairs(tables=True),
        check_least_directions_barely_matter,
        on_paper_values=True,
        note="the project's reading: 'low sensitivity' as a change of at most claims.barely_moves points from the "
        "Baseline, the column Table 2 sets beside them",
    ),
]
