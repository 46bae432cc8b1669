# Models: train the demo's own small models, pin every checkpoint to a commit sha and weight hashes, and download
# what each extraction reads into the Hugging Face cache.


rule train_model:
    input:
        training_corpus,
    output:
        directory(paths.trained_model()),
    params:
        # what training reads of the entry; its checkpoints are the steps it saves
        entry=lambda wildcards: result_settings(
            {key: model_entry(wildcards)[key] for key in ("train", "layers", "max_length", "modality")}, "models.*"),
        steps=lambda wildcards: [ckpt.step for ckpt in EXPERIMENT.checkpoints[wildcards.model]],
    threads: 2  # a workstation's; profiles/slurm sets a cluster's (set-threads)
    log:
        paths.log("train_model", "{model}"),
    benchmark:
        paths.benchmark("train_model", "{model}")
    conda:
        ENV
    script:
        "../scripts/train_model.py"


# Runs where the Hub is reachable (the submit host on a cluster); the lock it writes is read by extraction.
rule pin_checkpoint:
    input:
        trained_model_dir,
    output:
        paths.lock(),
    params:
        checkpoint=lambda wildcards: EXPERIMENT.checkpoint(wildcards.model, wildcards.checkpoint),
        weights=lambda wildcards: model_entry(wildcards)["weights"],
    localrule: True
    log:
        paths.log("pin_checkpoint", "{model}/{checkpoint}"),
    benchmark:
        paths.benchmark("pin_checkpoint", "{model}/{checkpoint}")
    conda:
        ENV
    script:
        "../scripts/pin_checkpoint.py"


# Runs where the Hub is reachable (the submit host on a cluster) while the GPU jobs run: everything a checkpoint's
# extraction (and a Rajaee & Pilehvar job that loads it) reads, its weights verified against its lock, into the HF
# cache that those jobs then read offline (models.download). With extraction.evict_weights it waits for an extraction
# of its lane (`download_gate`).
rule download_weights:
    input:
        pin=paths.lock(),
        after=download_gate,
    output:
        temp(paths.weights_receipt()),
    params:
        # not read by the job: a rerun trigger. Empty while the cache holds what the receipt lists; once a file is
        # gone (evicted by a failed attempt, a cache cleanup), the download runs again (models.download)
        missing_from_cache=lambda wildcards: download.missing_from_cache(
            paths.weights_receipt(wildcards.model, wildcards.checkpoint)),
        # the jobs that load these weights after the extraction (Rajaee & Pilehvar's): eviction leaves them
        read_after_extraction=lambda wildcards: EXPERIMENT.read_after_extraction(wildcards.model, wildcards.checkpoint),
    localrule: True
    log:
        paths.log("download_weights", "{model}/{checkpoint}"),
    benchmark:
        paths.benchmark("download_weights", "{model}/{checkpoint}")
    conda:
        ENV
    script:
        "../scripts/download_weights.py"


# A random-init baseline (EXPERIMENT.baselines; the checkpoint name is reserved for it): the commit of its model's
# last lock, so that both are the same config.json, and its seed (models.pinning.pin_random_init). No Hub access.
ruleorder: pin_random_init > pin_checkpoint


rule pin_random_init:
    input:
        lambda wildcards: last_pin(wildcards.model),
    output:
        paths.lock(checkpoint=RANDOM_INIT),
    params:
        checkpoint=lambda wildcards: EXPERIMENT.baselines[wildcards.model],
    localrule: True
    log:
        paths.log("pin_random_init", "{model}"),
    conda:
        ENV
    script:
        "../scripts/pin_random_init.py"
