# Metrics: one job per (model, checkpoint, layer) or per metrics.layers_per_job layers, then one tidy table.


rule measure_layers:
    input:
        shards="results/embeddings/{model}/{checkpoint}",
        manifest="results/manifests/{model}/{checkpoint}.json",
    output:
        "results/metrics/{model}/{checkpoint}/layer_{layer_group}.parquet",
    params:
        metrics=result_settings(config["metrics"], "device"),
        kind=lambda wildcards: EXPERIMENT.models[wildcards.model]["kind"],
    log:
        "logs/metrics/{model}/{checkpoint}/layer_{layer_group}.log",
    benchmark:
        "results/benchmarks/metrics/{model}/{checkpoint}/layer_{layer_group}.tsv"
    conda:
        ENV
    script:
        "../scripts/measure_layers.py"


rule tabulate_metrics:
    input:
        metrics=LAYER_METRICS,
        pins=PINS,
    output:
        values="results/tables/metrics.parquet",
        summary="results/tables/summary.parquet",
        summary_csv="results/tables/summary.csv",
    localrule: True
    log:
        "logs/tables/tabulate_metrics.log",
    conda:
        ENV
    script:
        "../scripts/tabulate_metrics.py"
