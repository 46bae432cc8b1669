from pathlib import Path

from shape_of_learning.corpus.media import sample_media, write_media
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    write_media(sample_media(snakemake.params.spec, snakemake.wildcards.modality), Path(snakemake.output[0]))
