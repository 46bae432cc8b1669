# Extraction: one job per (model, checkpoint); one forward pass writes one Parquet shard per layer.


rule extract_hidden_states:
    input:
        corpus=model_corpus,
        pin="results/lock/{model}/{checkpoint}.json",
        trained=trained_model_dir,
    output:
        shards=shards_dir(directory("results/embeddings/{model}/{checkpoint}")),
        manifest="results/manifests/{model}/{checkpoint}.json",
    params:
        entry=model_entry,
        checkpoint=lambda wildcards: EXPERIMENT.checkpoint(wildcards.model, wildcards.checkpoint),
        tokens=config["metrics"]["batches"] * config["metrics"]["batch_size"],
        extraction=config["extraction"],
    threads: 2
    resources:
        mem_mb=resource("extract", "mem_mb"),
        runtime=resource("extract", "runtime"),
        gpu=resource("extract", "gpus"),
    log:
        "logs/extract/{model}/{checkpoint}.log",
    benchmark:
        "results/benchmarks/extract/{model}/{checkpoint}.tsv"
    conda:
        ENV
    script:
        "../scripts/extract_hidden_states.py"
