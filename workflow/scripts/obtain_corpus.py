from pathlib import Path

from shape_of_learning import corpus
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    spec = snakemake.config["corpus"]
    corpus.obtain(
        Path(snakemake.output[0]),
        url=spec["url"],
        local_path=corpus.gensim_sample_path() if spec["gensim_sample"] else spec["local_path"],
        size=spec["size"],
        md5=spec["md5"],
        sha256=spec["sha256"],
        archive_sha256=spec["archive_sha256"],
    )
