import json
import logging
from pathlib import Path

from shape_of_learning.corpus import read_windows
from shape_of_learning.corpus.media import read_media
from shape_of_learning.experiment.config import positions_setting
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.logs import filesystem, job_logging
from shape_of_learning.models.download import read_cache_only
from shape_of_learning.models.pinning import read_lock

with job_logging(snakemake):
    receipt = snakemake.input.get("weights")
    read_cache_only(receipt)  # the download job put every file it reads into the HF cache (models.download)
    model = snakemake.wildcards.model
    entry = snakemake.config["models"][model]
    modality = entry["modality"]
    options = snakemake.config["extraction"]
    corpus = Path(snakemake.input.corpus)
    # where the shards go: on a cluster, the node's own disk where the config has `scratch` (docs/cluster.md)
    logging.getLogger("shape_of_learning").info(
        "shards in %s: %s", snakemake.output.shards, filesystem(snakemake.output.shards)
    )
    manifest = extract(
        snakemake.params.checkpoint,
        entry,
        read_windows(corpus) if modality == "text" else read_media(corpus)["data"].tolist(),
        snakemake.params.tokens,
        Path(snakemake.output.shards),
        pin=read_lock(snakemake.input.pin),
        special_tokens=options["special_tokens"],
        store_dtype=options["store_dtype"],
        device=options["device"],
        dtype=options["dtype"],
        loss=options["loss"],
        # k per item: its params hold the one setting that is its k, if any
        positions_per_item=snakemake.params.extraction.get(positions_setting(snakemake.config, model, modality)),
    )
    # what eviction (the checkpoint's last metrics job) leaves: the weights the cache held before this run's download
    # job, and all of them where a job of the run loads them after the extraction
    downloaded = json.loads(Path(receipt).read_text()) if receipt else {}
    manifest["weights_cached_before"] = downloaded.get("cached_before", [])
    manifest["weights_read_after_extraction"] = downloaded.get("read_after_extraction", [])
    Path(snakemake.output.manifest).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
