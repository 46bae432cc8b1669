from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import read_lock
from shape_of_learning.rajaee_pilehvar import figures

with job_logging(snakemake):
    frequencies = {
        pair.label: figures.corpus_frequencies(
            snakemake.config["models"][pair.pretrained], checkpoint, read_lock(pin), snakemake.input.corpus
        )
        for pair, checkpoint, pin in zip(snakemake.params.pairs, snakemake.params.checkpoints, snakemake.input.pins)
    }
    figures.frequency_view(
        figures.labelled(snakemake.input.views, snakemake.params.analyses),
        frequencies,
        snakemake.output.png,
        snakemake.output.pdf,
    )
