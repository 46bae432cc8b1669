from shape_of_learning import network
from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import read_lock
from shape_of_learning.rajaee_pilehvar import figures

with job_logging(snakemake):
    network.go_offline()  # the tokenizers' files came with the weights' download jobs (models.download)
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
