import json
from pathlib import Path

import pandas as pd

from shape_of_learning import paths
from shape_of_learning.experiment.plan import layers_in_group
from shape_of_learning.logs import job_logging
from shape_of_learning.metrics.layer import measure_layer

with job_logging(snakemake):
    manifest = json.loads(Path(snakemake.input.manifest).read_text())
    tables = [
        measure_layer(
            Path(snakemake.input.shards, paths.shard_name(layer)),
            manifest,
            layer=layer,
            kind=snakemake.config["models"][snakemake.wildcards.model]["kind"],
            settings=snakemake.config["metrics"],
        )
        for layer in layers_in_group(snakemake.wildcards.layer_group)
    ]
    pd.concat(tables, ignore_index=True).to_parquet(snakemake.output[0], index=False)
