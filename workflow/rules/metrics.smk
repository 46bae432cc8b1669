# Metrics: one job per (model, checkpoint, layer) or per metrics.layers_per_job layers, then one tidy table.


rule measure_layers:
    input:
        shards=paths.shards(),
        manifest=paths.manifest(),
    output:
        paths.layer_metrics(),
    params:
        metrics=result_settings(config["metrics"], "metrics"),
        kind=lambda wildcards: model_entry(wildcards)["kind"],  # a column of the table
    log:
        paths.log("measure_layers", "{model}/{checkpoint}/layer_{layer_group}"),
    benchmark:
        paths.benchmark("measure_layers", "{model}/{checkpoint}/layer_{layer_group}")
    conda:
        ENV
    script:
        "../scripts/measure_layers.py"


rule tabulate_metrics:
    input:
        metrics=[paths.layer_metrics(model, ckpt.name, group) for model in EXPERIMENT.checkpoints
                 for ckpt in EXPERIMENT.measured(model) for group in EXPERIMENT.layer_groups(model)],
        health=[paths.health(model) for model in EXPERIMENT.checkpoints],
    output:
        values=paths.METRICS_TABLE,
        summary=paths.SUMMARY,
        summary_csv=paths.SUMMARY_CSV,
        checkpoints=paths.CHECKPOINTS_TABLE,
    localrule: True
    log:
        paths.log("tabulate_metrics"),
    conda:
        ENV
    script:
        "../scripts/tabulate_metrics.py"
