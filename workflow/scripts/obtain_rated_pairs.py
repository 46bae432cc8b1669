from pathlib import Path

from shape_of_learning import paths
from shape_of_learning.rajaee_pilehvar.datasets import obtain_archive, read_split
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    name = snakemake.wildcards.dataset
    spec = snakemake.config["rajaee_pilehvar"]["datasets"][name]
    archive = None if spec["gensim"] else obtain_archive(name, spec, Path(paths.dataset_download(name)),
                                                         Path(paths.dataset_lock(name)))
    Path(snakemake.output[0]).mkdir(parents=True, exist_ok=True)
    for split in spec["splits"]:
        read_split(name, spec, split, archive).to_parquet(paths.dataset_split(name, split), index=False)
