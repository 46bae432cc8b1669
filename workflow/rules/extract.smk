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
        # Not the entry's checkpoint list: a checkpoint added to it must not rerun the others (`checkpoint` is this).
        entry=lambda wildcards: result_settings(model_entry(wildcards), "batch_size", "checkpoints"),
        checkpoint=lambda wildcards: EXPERIMENT.checkpoint(wildcards.model, wildcards.checkpoint),
        tokens=config["metrics"]["batches"] * config["metrics"]["batch_size"],
        extraction=result_settings(config["extraction"], "device", "keep_embeddings", "evict_weights"),
    threads: 1  # a workstation's; profiles/slurm sets a cluster's (set-threads)
    resources:
        gpu=1,  # one accelerator (or CPU slot): profiles/default lets one such job run at a time on a workstation
    retries: 2  # downloads the weights from the Hub
    log:
        "logs/extract/{model}/{checkpoint}.log",
    benchmark:
        "results/benchmarks/extract/{model}/{checkpoint}.tsv"
    conda:
        ENV
    script:
        "../scripts/extract_hidden_states.py"
