# Claims: each claim of the three papers judged on the run's own tables (shape_of_learning.claims), one scorecard
# row per claim and group of models. Included where the config has a `claims:` section. It reads the tables of the
# models that can be had; a claim needing one that cannot is "not measurable", so a --keep-going run without a model
# still gets its scorecard.


rule evaluate_claims:
    input:
        EXPERIMENT.claim_inputs(),
    output:
        table=paths.CLAIMS_TABLE,
        html=report(paths.CLAIMS_REPORT, caption="../report/claims.rst", category="Claims",
                    labels={"table": "scorecard: each paper's claims on this run"}),
    params:
        groups=EXPERIMENT.claims,
        settings=result_settings(config["claims"], "claims"),
        unavailable={model: EXPERIMENT.unavailable[model] for model in EXPERIMENT.needs(
            model for group in EXPERIMENT.claims for model in group.models) if model in EXPERIMENT.unavailable},
    localrule: True
    log:
        paths.log("evaluate_claims"),
    conda:
        ENV
    script:
        "../scripts/evaluate_claims.py"
