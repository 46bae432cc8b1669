import json
from pathlib import Path

from shape_of_learning.jobs import job_logging
from shape_of_learning.tables import layer_metrics_table

with job_logging(snakemake):
    layer = int(snakemake.wildcards.layer)
    table = layer_metrics_table(
        Path(snakemake.input.shards) / f"layer_{layer}.parquet",
        json.loads(Path(snakemake.input.manifest).read_text()),
        layer=layer,
        kind=snakemake.params.kind,
        settings=snakemake.params.metrics,
    )
    table.to_parquet(snakemake.output[0], index=False)
