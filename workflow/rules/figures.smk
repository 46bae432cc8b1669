# Figures: one rule per figure of the paper; each reads only the tidy summary table, never recomputes a metric.


rule figure_anisotropy_by_layer:
    input:
        "results/tables/summary.parquet",
    output:
        **figure_outputs("anisotropy_by_layer", "anisotropy_by_layer.rst", figure="1: anisotropy, encoders vs decoders"),
    params:
        figure=lambda wildcards: figure_spec("anisotropy_by_layer"),
    log:
        "logs/figures/anisotropy_by_layer.log",
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"


rule figure_profile_across_checkpoints:
    input:
        "results/tables/summary.parquet",
    output:
        **figure_outputs("profile_{model}_{metric}", "profile_across_checkpoints.rst",
                         figure="2-3: profile across checkpoints", model="{model}", metric="{metric}"),
    wildcard_constraints:
        metric="|".join(config["metrics"]["names"]),
    params:
        figure=lambda wildcards: figure_spec(f"profile_{wildcards.model}_{wildcards.metric}"),
    log:
        "logs/figures/profile_{model}_{metric}.log",
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"


rule figure_id_across_checkpoints:
    input:
        "results/tables/summary.parquet",
    output:
        **figure_outputs("id_across_checkpoints", "id_across_checkpoints.rst", figure="4: intrinsic dimension vs step"),
    params:
        figure=lambda wildcards: figure_spec("id_across_checkpoints"),
    log:
        "logs/figures/id_across_checkpoints.log",
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"


rule figure_id_estimators:
    input:
        "results/tables/summary.parquet",
    output:
        **figure_outputs("id_estimators_{model}", "id_estimators.rst", figure="5: three ID estimators", model="{model}"),
    params:
        figure=lambda wildcards: figure_spec(f"id_estimators_{wildcards.model}"),
    log:
        "logs/figures/id_estimators_{model}.log",
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"


rule figure_by_modality:
    input:
        "results/tables/summary.parquet",
    output:
        **figure_outputs("by_modality", "by_modality.rst", figure="Godey et al.: anisotropy by modality"),
    params:
        figure=lambda wildcards: figure_spec("by_modality"),
    log:
        "logs/figures/by_modality.log",
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"
