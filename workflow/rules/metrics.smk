# Metrics: one job per (model, checkpoint, layer) or per metrics.layers_per_job layers, then one tidy table.


rule layer_metrics:
    input:
        shards="results/embeddings/{model}/{checkpoint}",
        manifest="results/manifests/{model}/{checkpoint}.json",
    output:
        "results/metrics/{model}/{checkpoint}/layer_{layers}.parquet",
    params:
        metrics=config["metrics"],
        kind=lambda wildcards: EXPERIMENT.models[wildcards.model]["kind"],
    threads: 1
    resources:
        mem_mb=resource("metrics", "mem_mb"),
        runtime=resource("metrics", "runtime"),
        gpu=resource("metrics", "gpus"),
    log:
        "logs/metrics/{model}/{checkpoint}/layer_{layers}.log",
    benchmark:
        "results/benchmarks/metrics/{model}/{checkpoint}/layer_{layers}.tsv"
    conda:
        ENV
    script:
        "../scripts/layer_metrics.py"


rule metrics_table:
    input:
        metrics=LAYER_METRICS,
        pins=PINS,
    output:
        values="results/tables/metrics.parquet",
        summary="results/tables/summary.parquet",
        summary_csv="results/tables/summary.csv",
    localrule: True
    log:
        "logs/tables/metrics_table.log",
    conda:
        ENV
    script:
        "../scripts/metrics_table.py"
