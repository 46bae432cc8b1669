from pathlib import Path

from shape_of_learning.finetuning.datasets import obtain_archive, read_split
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    name, spec = snakemake.wildcards.dataset, snakemake.params.spec
    archive = None if spec["gensim"] else obtain_archive(name, spec, Path("results/downloads", name),
                                                         Path(f"results/lock/dataset-{name}.json"))
    out = Path(snakemake.output[0])
    out.mkdir(parents=True, exist_ok=True)
    for split in spec["splits"]:
        read_split(name, spec, split, archive).to_parquet(out / f"{split}.parquet", index=False)
