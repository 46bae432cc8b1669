"""The claims stage (claims.smk): each claim of the three papers checked on the run's own tables, a scorecard.

Every claim is stated once, in its paper's catalogue (`razzhigaev`, `godey`, `rajaee_pilehvar`; all of them in
`catalogue.CLAIMS`): its paper, section and own words, the claim in a sentence, the models it concerns (from the
config's figures and pairs), and a predicate with thresholds from the config's `claims:` (`predicates`, `series`: a
bell is one interior peak clearing both ends by a margin in batch-to-batch standard deviations and a share of its
height, not a bare argmax). `scorecard` judges each claim and group of models on the run's files (`inputs`): yes, no, not
measurable with the reason, or error where a check raised, written to results/tables/claims.csv and the report's
claims page, and printed by `python -m shape_of_learning verify`. docs/claims.md says how to read it.
"""
