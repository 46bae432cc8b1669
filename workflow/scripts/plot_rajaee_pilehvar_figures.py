import json
from pathlib import Path

import pandas as pd

from shape_of_learning.finetuning import figures
from shape_of_learning.logs import job_logging
from shape_of_learning.registry import tokenizer_location


def labelled(paths, jobs):
    return pd.concat([pd.read_parquet(path).assign(pair=f"{job.pair.pretrained} -> {job.pair.finetuned}",
                                                   model=job.model, state=job.state)
                      for job, path in zip(jobs, paths)])


with job_logging(snakemake):
    jobs = snakemake.params.jobs
    if snakemake.rule == "plot_rajaee_pilehvar_figure1":
        figures.isotropy_by_layer(labelled(snakemake.input, jobs), snakemake.output.png, snakemake.output.pdf,
                                  dataset=jobs[0].reference)
    else:
        from transformers import AutoTokenizer

        frequencies = {}
        for job, checkpoint, entry, pin in zip(jobs[::2], snakemake.params.checkpoints, snakemake.params.entries,
                                               snakemake.input.pins):
            location = tokenizer_location(entry, checkpoint)
            revision = json.loads(Path(pin).read_text())["commit_sha"] if location == checkpoint.location else None
            tokenizer = AutoTokenizer.from_pretrained(location, revision=revision)
            frequencies[f"{job.pair.pretrained} -> {job.pair.finetuned}"] = figures.corpus_frequencies(
                tokenizer, snakemake.input.corpus)
        figures.frequency_view(labelled(snakemake.input.views, jobs), frequencies, snakemake.output.png,
                               snakemake.output.pdf)
