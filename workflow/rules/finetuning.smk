# Rajaee & Pilehvar (2022), how fine-tuning changes isotropy: rated-pair datasets, Siamese fine-tuning, the five
# isotropy settings on pre-trained and fine-tuned token spaces (Tables 1-2) and Figures 1-2. The fine-tuned model is
# a `finetune:` entry of the registry, so extraction and the per-layer metrics treat it like any other model.
from shape_of_learning.finetuning import plan as finetuning_plan

FINETUNING = config.get("finetuning")
FINETUNING_TARGETS = finetuning_plan.targets(config)
FINETUNING_PAIRS = finetuning_plan.pairs(config)  # checks every cross-reference before any job runs


wildcard_constraints:
    dataset=r"[A-Za-z0-9._-]+",
    split=r"[A-Za-z0-9._-]+",


rule obtain_rated_pairs:
    output:
        directory("results/datasets/{dataset}"),
    params:
        spec=lambda wildcards: result_settings(FINETUNING["datasets"][wildcards.dataset]),
    localrule: True
    retries: 2
    log:
        "logs/datasets/{dataset}.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}.tsv"
    conda:
        ENV
    script:
        "../scripts/obtain_rated_pairs.py"


rule finetune_model:
    input:
        unpack(finetune_inputs),
    output:
        directory("results/finetuned/{model}"),
    params:
        spec=lambda wildcards: result_settings(EXPERIMENT.models[wildcards.model]["finetune"]),
        base=lambda wildcards: last_checkpoint(EXPERIMENT.models[wildcards.model]["finetune"]["base"]),
        scale=finetune_scale,
    threads: 2  # a workstation's; profiles/slurm sets a cluster's (set-threads)
    resources:
        gpu=1,
    log:
        "logs/finetuned/{model}.log",
    benchmark:
        "results/benchmarks/finetuned/{model}.tsv"
    conda:
        ENV
    script:
        "../scripts/finetune_model.py"


rule measure_isotropy_settings:
    input:
        pairs="results/datasets/{dataset}",
        pin=lambda wildcards: f"results/lock/{wildcards.model}/{last_checkpoint(wildcards.model).name}.json",
        trained=trained_model_dir,
    output:
        settings="results/rajaee_pilehvar/{dataset}/{split}/{model}/settings.parquet",
        layers="results/rajaee_pilehvar/{dataset}/{split}/{model}/layers.parquet",
        view="results/rajaee_pilehvar/{dataset}/{split}/{model}/view.parquet",
    params:
        checkpoint=lambda wildcards: last_checkpoint(wildcards.model),
        entry=lambda wildcards: result_settings(model_entry(wildcards), "batch_size"),
        options=result_settings(FINETUNING or {}, "device", "batch_size", "pairs", "evaluate", "datasets"),
    threads: 2  # a workstation's; profiles/slurm sets a cluster's (set-threads)
    resources:
        gpu=1,
    retries: 2  # downloads the weights from the Hub
    log:
        "logs/rajaee_pilehvar/{dataset}/{split}/{model}.log",
    benchmark:
        "results/benchmarks/rajaee_pilehvar/{dataset}/{split}/{model}.tsv"
    conda:
        ENV
    script:
        "../scripts/measure_isotropy_settings.py"


rule tabulate_rajaee_pilehvar:
    input:
        [job.output("settings") for job in finetuning_plan.analyses(config)],
    output:
        table1=finetuning_plan.TABLES[0],
        table2=finetuning_plan.TABLES[1],
        html=report(finetuning_plan.REPORT_TABLE, caption="../report/rajaee_pilehvar_tables.rst",
                    category="Rajaee & Pilehvar", labels={"table": "1-2: settings, ours beside the paper's"}),
    params:
        jobs=finetuning_plan.analyses(config),
    localrule: True
    log:
        "logs/tables/rajaee_pilehvar.log",
    conda:
        ENV
    script:
        "../scripts/tabulate_rajaee_pilehvar.py"


rule plot_rajaee_pilehvar_figure1:
    input:
        [job.output("layers") for job in finetuning_plan.analyses(config, first_only=True)],
    output:
        png=report(finetuning_plan.FIGURES["figure1"][0], caption="../report/rajaee_pilehvar_figure1.rst",
                   category="Rajaee & Pilehvar", labels={"figure": "1: -log I(W) per layer"}),
        pdf=finetuning_plan.FIGURES["figure1"][1],
    params:
        jobs=finetuning_plan.analyses(config, first_only=True),
    log:
        "logs/figures/rajaee_pilehvar_figure1.log",
    conda:
        ENV
    script:
        "../scripts/plot_rajaee_pilehvar_figures.py"


rule plot_rajaee_pilehvar_figure2:
    input:
        views=[job.output("view") for job in finetuning_plan.analyses(config, first_only=True)],
        corpus=f"{CORPUS}/clean.txt",
        pins=[f"results/lock/{p.pretrained}/{last_checkpoint(p.pretrained).name}.json" for p in FINETUNING_PAIRS],
    output:
        png=report(finetuning_plan.FIGURES["figure2"][0], caption="../report/rajaee_pilehvar_figure2.rst",
                   category="Rajaee & Pilehvar", labels={"figure": "2: PCA view by corpus frequency"}),
        pdf=finetuning_plan.FIGURES["figure2"][1],
    params:
        jobs=finetuning_plan.analyses(config, first_only=True),
        checkpoints=[last_checkpoint(p.pretrained) for p in FINETUNING_PAIRS],
        entries=[EXPERIMENT.models[p.pretrained] for p in FINETUNING_PAIRS],
    log:
        "logs/figures/rajaee_pilehvar_figure2.log",
    conda:
        ENV
    script:
        "../scripts/plot_rajaee_pilehvar_figures.py"
