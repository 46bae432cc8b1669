# Health: is each checkpoint its step's model? One job per model, from its locks (weight hashes) and manifests (loss,
# fingerprint): the verdict every table and figure follows.


rule assess_checkpoints:
    input:
        pins=lambda wildcards: [paths.lock(wildcards.model, ckpt.name)
                                for ckpt in EXPERIMENT.checkpoints[wildcards.model]],
        manifests=lambda wildcards: [paths.manifest(wildcards.model, ckpt.name)
                                     for ckpt in EXPERIMENT.checkpoints[wildcards.model]],
    output:
        paths.health(),
    params:
        settings=result_settings(config["health"], "health"),
    localrule: True
    log:
        paths.log("assess_checkpoints", "{model}"),
    conda:
        ENV
    script:
        "../scripts/assess_checkpoints.py"
