from shape_of_learning.logs import job_logging
from shape_of_learning.rajaee_pilehvar import figures

with job_logging(snakemake):
    analyses = snakemake.params.analyses
    figures.isotropy_by_layer(
        figures.labelled(snakemake.input, analyses),
        snakemake.output.png,
        snakemake.output.pdf,
        dataset=analyses[0].reference,
    )
