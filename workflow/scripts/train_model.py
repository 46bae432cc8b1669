from pathlib import Path

from shape_of_learning.logs import job_logging
from shape_of_learning.models.training import train

with job_logging(snakemake):
    entry = snakemake.config["models"][snakemake.wildcards.model]
    options = {key: value for key, value in entry["train"].items() if key not in ("arch", "steps")}
    # The registry entry is the single source of the depth and context length that extraction will expect.
    options.update(num_layers=entry["layers"])
    if entry["modality"] == "text":
        options.update(seq_len=entry["max_length"])
    train(
        entry["train"]["arch"],
        Path(snakemake.input[0]),
        Path(snakemake.output[0]),
        snakemake.params.steps,
        threads=snakemake.threads,
        **options,
    )
