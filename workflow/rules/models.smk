# Models: train the demo's own small models, and pin every checkpoint to a commit sha and weight hashes.


rule train_model:
    input:
        lambda wildcards: model_corpus(wildcards, text=f"{CORPUS}/clean.txt"),
    output:
        directory("results/models/{model}"),
    params:
        entry=lambda wildcards: result_settings(
            {key: model_entry(wildcards)[key] for key in ("train", "layers", "max_length", "modality")}),
        steps=lambda wildcards: [ckpt.step for ckpt in EXPERIMENT.checkpoints[wildcards.model]],
    threads: 2  # a workstation's; profiles/slurm sets a cluster's (set-threads)
    log:
        "logs/models/train_{model}.log",
    benchmark:
        "results/benchmarks/models/train_{model}.tsv"
    conda:
        ENV
    script:
        "../scripts/train_model.py"


# Runs where the Hub is reachable (the submit host on a cluster); the lock it writes is read by extraction.
rule pin_checkpoint:
    input:
        trained_model_dir,
    output:
        "results/lock/{model}/{checkpoint}.json",
    params:
        checkpoint=lambda wildcards: EXPERIMENT.checkpoint(wildcards.model, wildcards.checkpoint),
        weights=lambda wildcards: EXPERIMENT.models[wildcards.model]["weights"],
    localrule: True
    retries: 2
    log:
        "logs/lock/{model}/{checkpoint}.log",
    benchmark:
        "results/benchmarks/lock/{model}/{checkpoint}.tsv"
    conda:
        ENV
    script:
        "../scripts/pin_checkpoint.py"
