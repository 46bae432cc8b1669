from pathlib import Path

from shape_of_learning import paths
from shape_of_learning.logs import job_logging
from shape_of_learning.rajaee_pilehvar.datasets import obtain_archive, read_splits

with job_logging(snakemake):
    name = snakemake.wildcards.dataset
    spec = snakemake.config["rajaee_pilehvar"]["datasets"][name]
    archive = (
        None
        if spec["gensim"]
        else obtain_archive(name, spec, Path(paths.dataset_download(name)), Path(paths.dataset_lock(name)))
    )
    Path(snakemake.output[0]).mkdir(parents=True, exist_ok=True)
    for split, pairs in read_splits(name, spec, archive).items():
        pairs.to_parquet(paths.dataset_split(name, split), index=False)
