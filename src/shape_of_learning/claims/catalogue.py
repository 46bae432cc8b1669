"""Every claim of the three papers, stated once (`CLAIMS`), one module per paper: `razzhigaev`, `godey`,
`rajaee_pilehvar` (the two larger ones with their checks beside them, in `razzhigaev_checks` and
`rajaee_pilehvar_checks`). Each `claim.Claim` gives the paper, its section, figure or table and its own words
(`quote`), the claim in a sentence, the models it concerns (from the config's figures and pairs: one scorecard row per
`Group`), the predicate it is judged by, in words with the config's thresholds and in code (built from
shape_of_learning.claims.predicates and shape_of_learning.claims.series), and the thresholds it reads (the config's `claims:`, defaults and rationale in
workflow/schemas/config.schema.yaml; docs/claims.md).

A claim's groups are planned from the planned experiment (shape_of_learning.experiment.plan.Experiment, passed in:
this package sits below the planning layer): its figures, model registry, random-init baselines and Rajaee & Pilehvar
analyses. A group lists the files it reads, each with the models whose jobs make it (`Group.files`), so that a run
without a model still judges every claim that does not need it.
"""

from shape_of_learning.claims import godey, rajaee_pilehvar, razzhigaev
from shape_of_learning.claims.claim import Claim, Group

CLAIMS: dict[str, Claim] = {claim.name: claim for claim in [*razzhigaev.CLAIMS, *godey.CLAIMS, *rajaee_pilehvar.CLAIMS]}
__all__ = ["CLAIMS", "Claim", "Group", "plan_claims"]


def plan_claims(experiment, config: dict) -> list[Group]:
    """Every claim's groups, in the order of `CLAIMS`: the rows of the scorecard."""
    low, high = config["claims"]["middle"]
    if not low < high:
        raise ValueError(
            f"claims.middle: [{low}, {high}] is no interval; give [low, high] with low < high, e.g. [0.2, 0.8]"
        )
    return [group for claim in CLAIMS.values() for group in claim.groups(claim, experiment, config)]
