import json
from pathlib import Path

from shape_of_learning.corpus import read_windows
from shape_of_learning.corpus.media import read_media
from shape_of_learning.extract import extract
from shape_of_learning.logs import job_logging
from shape_of_learning.pinning import evict_weights, read_lock

with job_logging(snakemake):
    # Settings that cannot change a result are read from the config, not params: changing them reruns nothing.
    options = snakemake.params.extraction
    batch_size = snakemake.config["models"][snakemake.wildcards.model]["batch_size"]
    entry = {**snakemake.params.entry, "batch_size": batch_size}
    corpus = Path(snakemake.input.corpus)
    text = entry["modality"] == "text"
    manifest = extract(
        snakemake.params.checkpoint,
        entry,
        read_windows(corpus) if text else read_media(corpus)["data"].tolist(),
        snakemake.params.tokens,
        Path(snakemake.output.shards),
        pin=read_lock(snakemake.input.pin),
        special_tokens=options["special_tokens"],
        store_dtype=options["store_dtype"],
        device=snakemake.config["extraction"]["device"],
        dtype=options["dtype"],
    )
    Path(snakemake.output.manifest).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    if snakemake.config["extraction"]["evict_weights"]:  # the disk of one checkpoint at a time, not of the series
        evict_weights(manifest)
