import json
from pathlib import Path

import pandas as pd

from shape_of_learning.experiment import layers_in_group
from shape_of_learning.logs import job_logging
from shape_of_learning.metrics.layer import measure_layer

with job_logging(snakemake):
    manifest = json.loads(Path(snakemake.input.manifest).read_text())
    tables = [
        measure_layer(
            Path(snakemake.input.shards) / f"layer_{layer}.parquet",
            manifest,
            layer=layer,
            kind=snakemake.params.kind,
            settings={**snakemake.params.metrics, "device": snakemake.config["metrics"]["device"]},
        )
        for layer in layers_in_group(snakemake.wildcards.layer_group)
    ]
    pd.concat(tables, ignore_index=True).to_parquet(snakemake.output[0], index=False)
