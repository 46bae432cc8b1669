from shape_of_learning.claims.scorecard import render, scorecard
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    card = scorecard(snakemake.params.groups, snakemake.config["claims"], snakemake.params.unavailable)
    card.to_csv(snakemake.output.table, index=False)
    with open(snakemake.output.html, "w") as html:
        html.write(render(card, "Each paper's claims, judged on this run's tables"))
