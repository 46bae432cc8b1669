import pandas as pd

from shape_of_learning import paths
from shape_of_learning.rajaee_pilehvar.plan import parse_reference
from shape_of_learning.logs import job_logging
from shape_of_learning.models.download import read_cache_only
from shape_of_learning.models.pinning import read_lock
from shape_of_learning.rajaee_pilehvar.analysis import analyse
from shape_of_learning.rajaee_pilehvar.datasets import drop_training_pairs

with job_logging(snakemake):
    read_cache_only(snakemake.input.get("weights"))  # a download job put the model's files into the HF cache
    options, wildcards = snakemake.config["rajaee_pilehvar"], snakemake.wildcards
    pairs, dropped = drop_training_pairs(
        pd.read_parquet(paths.dataset_split(wildcards.dataset, wildcards.split)),
        [pd.read_parquet(paths.dataset_split(*parse_reference(reference))) for reference in snakemake.params.training],
    )
    table, layers, view = analyse(
        snakemake.params.checkpoint,
        snakemake.config["models"][wildcards.model],
        read_lock(snakemake.input.pin),
        pairs,
        seeds=snakemake.params.seeds,
        kmeans=options["kmeans"],
        clusters=options["clusters"],
        directions=options["directions"],
        least=options["least_directions"],
        table_layer=options["table_layer"],
        figure_tokens=options["figure_tokens"],
        batch_size=options["batch_size"],
        device=options["device"],
        dtype=snakemake.config["extraction"]["dtype"],
    )
    table.assign(dropped_pairs=dropped).to_parquet(snakemake.output.settings, index=False)
    layers.to_parquet(snakemake.output.layers, index=False)
    view.to_parquet(snakemake.output.view, index=False)
