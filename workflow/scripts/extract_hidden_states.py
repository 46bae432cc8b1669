import json
from pathlib import Path

from shape_of_learning.corpus import read_windows
from shape_of_learning.corpus.media import read_media
from shape_of_learning.extract import extract
from shape_of_learning.logs import job_logging

with job_logging(snakemake):
    options = snakemake.params.extraction
    corpus = Path(snakemake.input.corpus)
    text = snakemake.params.entry["modality"] == "text"
    manifest = extract(
        snakemake.params.checkpoint,
        snakemake.params.entry,
        read_windows(corpus) if text else read_media(corpus)["data"].tolist(),
        snakemake.params.tokens,
        Path(snakemake.output.shards),
        pin=json.loads(Path(snakemake.input.pin).read_text()),
        special_tokens=options["special_tokens"],
        store_dtype=options["store_dtype"],
        device=options["device"],
        dtype=options["dtype"],
    )
    Path(snakemake.output.manifest).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
