from pathlib import Path

from shape_of_learning.corpus.media import sample_media, write_media
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    modality = snakemake.wildcards.modality
    write_media(sample_media(snakemake.config[f"{modality}_corpus"], modality), Path(snakemake.output[0]))
