from shape_of_learning.finetuning import figures
from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import read_lock

with job_logging(snakemake):
    analyses, pretrained = snakemake.params.analyses, snakemake.params.checkpoints
    frequencies = {
        job.pair.label: figures.corpus_frequencies(snakemake.config["models"][checkpoint.model], checkpoint,
                                                   read_lock(pin), snakemake.input.corpus)
        for job, checkpoint, pin in zip(analyses[::2], pretrained, snakemake.input.pins)
    }
    figures.frequency_view(figures.labelled(snakemake.input.views, analyses), frequencies, snakemake.output.png,
                           snakemake.output.pdf)
