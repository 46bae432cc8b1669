"""The `extract_hidden_states` job (workflow/rules/extraction.smk): one checkpoint's forward pass into its shards and
manifest, run in a worker (shape_of_learning.worker)."""

import json
import logging
from pathlib import Path

from shape_of_learning.corpus import read_windows
from shape_of_learning.corpus.media import read_media
from shape_of_learning.extraction import POSITIONS_PER_ITEM
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.logs import filesystem
from shape_of_learning.models.download import read_cache_only
from shape_of_learning.models.pinning import read_lock


def extract_hidden_states(job) -> None:
    receipt = job.input.get("weights")
    read_cache_only(receipt)  # the download job put every file it reads into the HF cache (models.download)
    model = job.wildcards.model
    entry = job.config["models"][model]
    modality = entry["modality"]
    options = job.config["extraction"]
    corpus = Path(job.input.corpus)
    # where the shards go: on a cluster, the node's own disk where the config has `scratch` (docs/cluster.md)
    logging.getLogger("shape_of_learning").info("shards in %s: %s", job.output.shards, filesystem(job.output.shards))
    manifest = extract(
        job.params.checkpoint,
        entry,
        read_windows(corpus) if modality == "text" else read_media(corpus)["data"].tolist(),
        job.params.tokens,
        Path(job.output.shards),
        pin=read_lock(job.input.pin),
        special_tokens=options["special_tokens"],
        store_dtype=options["store_dtype"],
        device=options["device"],
        dtype=options["dtype"],
        loss=options["loss"],
        # k per item: its params hold the one setting that is its k, if any (experiment.config.extraction_settings);
        # audio has none
        positions_per_item=job.params.extraction.get(POSITIONS_PER_ITEM.get(modality)),
    )
    # what eviction (the checkpoint's last metrics job) leaves: the weights the cache held before this run's download
    # job, and all of them where a job of the run loads them after the extraction
    downloaded = json.loads(Path(receipt).read_text()) if receipt else {}
    manifest["weights_cached_before"] = downloaded.get("cached_before", [])
    manifest["weights_read_after_extraction"] = downloaded.get("read_after_extraction", [])
    Path(job.output.manifest).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
