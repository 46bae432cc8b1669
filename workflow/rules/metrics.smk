# Metrics: one job per (model, checkpoint, layer) or per metrics.layers_per_job layers, then each model's tables
# (what its figures read), then every model's in one. A metrics job runs in a worker process, as an extraction does
# (`run_in_worker`).


rule measure_layers:
    input:
        shards=SHARDS,
        manifest=paths.manifest(),
        in_threads=jobs_in_threads,  # no file: lets Snakemake run it in a thread, waiting on its worker
    output:
        paths.layer_metrics(),
    params:
        metrics=result_settings(config["metrics"], "metrics"),
        kind=lambda wildcards: model_entry(wildcards)["kind"],  # a column of the table
        layers=lambda wildcards: layers_in_group(wildcards.layer_group),
        # every metrics file of the checkpoint: the job that finds them all evicts its weights
        checkpoint_metrics=lambda wildcards: checkpoint_metrics(EXPERIMENT.checkpoint(wildcards.model,
                                                                                      wildcards.checkpoint)),
    resources:
        runtime=lambda wildcards, attempt: attempt * job_runtime_min(wildcards.model, "metrics"),  # a cluster's --time
        constraint=lambda wildcards: gpu_type_request(wildcards.model),  # the larger cards, where needed (large_gpu)
        slurm_extra=lambda wildcards: node_disk_request(wildcards.model),  # its extraction's, in one group job
    log:
        paths.log("measure_layers", "{model}/{checkpoint}/layer_{layer_group}"),
    benchmark:
        paths.benchmark("measure_layers", "{model}/{checkpoint}/layer_{layer_group}")
    run:
        run_in_worker("shape_of_learning.metrics.job:measure_layers", rule, input, output, params, wildcards, threads,
                      log)


rule tabulate_model_metrics:
    input:
        metrics=lambda wildcards: [paths.layer_metrics(wildcards.model, ckpt.name, group)
                                   for ckpt in EXPERIMENT.series(wildcards.model, wildcards.series)
                                   for group in EXPERIMENT.layer_groups(wildcards.model)],
        health=lambda wildcards: paths.health(wildcards.model) if wildcards.series == SERIES[0] else [],
    output:
        values=paths.model_table(part="metrics"),
        summary=paths.model_table(part="summary"),
    wildcard_constraints:
        series="|".join(SERIES),
    localrule: True
    log:
        paths.log("tabulate_model_metrics", "{model}/{series}"),
    conda:
        ENV
    script:
        "../scripts/tabulate_model_metrics.py"


rule tabulate_metrics:
    input:
        values=[paths.model_table(model, series, "metrics") for model, series in EXPERIMENT.model_series()],
        summaries=[paths.model_table(model, series, "summary") for model, series in EXPERIMENT.model_series()],
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
