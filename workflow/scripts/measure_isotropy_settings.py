import pandas as pd

from shape_of_learning import paths
from shape_of_learning.finetuning.analysis import analyse
from shape_of_learning.logs import job_logging
from shape_of_learning.models.pinning import read_lock

with job_logging(snakemake):
    options, wildcards = snakemake.config["finetuning"], snakemake.wildcards
    pairs = pd.read_parquet(paths.dataset_split(wildcards.dataset, wildcards.split))
    table, layers, view = analyse(
        snakemake.params.checkpoint, snakemake.config["models"][wildcards.model], read_lock(snakemake.input.pin),
        pairs, clusters=options["clusters"], directions=options["directions"], least=options["least_directions"],
        table_layer=options["table_layer"], figure_tokens=options["figure_tokens"], seed=options["seed"],
        batch_size=options["batch_size"], device=options["device"])
    table.to_parquet(snakemake.output.settings, index=False)
    layers.to_parquet(snakemake.output.layers, index=False)
    view.to_parquet(snakemake.output.view, index=False)
