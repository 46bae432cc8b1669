"""The claims stage (claims.smk): each claim of the three papers checked on the run's own tables, a scorecard.

Every claim is stated once (`catalogue.CLAIMS`): its paper and section or figure, the claim paraphrased, the models
it concerns (from the config's figures and pairs), and a predicate with thresholds from the config's `claims:`
(`predicates`: a bell is an interior maximum clearing both ends by a margin in batch-to-batch standard deviations,
not a bare argmax). `scorecard` judges each claim and group of models on the run's files (`inputs`): yes, no, or
not measurable with the reason, written to results/tables/claims.csv and the report's claims page, and printed by
`python -m shape_of_learning verify`. docs/claims.md says how to read it.
"""
