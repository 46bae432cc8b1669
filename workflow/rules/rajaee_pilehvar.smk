# Rajaee & Pilehvar (Findings of EMNLP 2021), how fine-tuning changes isotropy: rated-pair datasets, Siamese
# fine-tuning, the five isotropy settings on pre-trained and fine-tuned token spaces (Tables 1-2) and Figures 1-2.
# The fine-tuned models are the runs of a `finetune:` entry, one per seed of rajaee_pilehvar.seeds, each a model of the
# planned registry, so extraction and the per-layer metrics treat them like any other model. Included where the
# config has a `rajaee_pilehvar:` section; its jobs are EXPERIMENT.analyses.
from shape_of_learning.paths import RAJAEE_PILEHVAR_FIGURES, RAJAEE_PILEHVAR_REPORT, RAJAEE_PILEHVAR_TABLES


wildcard_constraints:
    dataset=r"[A-Za-z0-9._-]+",
    split=r"[A-Za-z0-9._-]+",


rule obtain_rated_pairs:
    output:
        directory(paths.dataset()),
    params:
        settings=lambda wildcards: result_settings(config["rajaee_pilehvar"]["datasets"][wildcards.dataset],
                                                   "rajaee_pilehvar.datasets.*"),
    localrule: True
    log:
        paths.log("obtain_rated_pairs", "{dataset}"),
    benchmark:
        paths.benchmark("obtain_rated_pairs", "{dataset}")
    conda:
        ENV
    script:
        "../scripts/obtain_rated_pairs.py"


rule finetune_model:
    input:
        unpack(finetuning_data),
    output:
        directory(paths.finetuned_model()),
    params:
        settings=lambda wildcards: result_settings(model_entry(wildcards)["finetune"], "models.*.finetune"),
        base=lambda wildcards: EXPERIMENT.last_checkpoint(model_entry(wildcards)["finetune"]["base"]),
    threads: 1  # a workstation's, as extraction's; profiles/slurm sets a cluster's (set-threads)
    resources:
        gpu=DEVICE_SLOT,
    log:
        paths.log("finetune_model", "{model}"),
    benchmark:
        paths.benchmark("finetune_model", "{model}")
    conda:
        ENV
    script:
        "../scripts/finetune_model.py"


rule measure_isotropy_settings:
    input:
        pairs=paths.dataset(),
        training=[paths.dataset(parse_reference(reference)[0]) for reference in EXPERIMENT.excluded_training_data],
        pin=lambda wildcards: last_pin(wildcards.model),
        weights=lambda wildcards: last_weights(wildcards.model),
        trained=trained_model_dir,
    output:
        settings=paths.isotropy_settings(part="settings"),
        layers=paths.isotropy_settings(part="layers"),
        view=paths.isotropy_settings(part="view"),
    params:
        checkpoint=lambda wildcards: EXPERIMENT.last_checkpoint(wildcards.model),
        entry=lambda wildcards: result_settings(model_entry(wildcards), "models.*"),
        settings=result_settings(config["rajaee_pilehvar"], "rajaee_pilehvar"),
        seeds=lambda wildcards: EXPERIMENT.analysis_seeds(wildcards.model),
        training=EXPERIMENT.excluded_training_data,  # splits whose pairs are left out of every evaluation
        dtype=config["extraction"]["dtype"],  # the forward pass's, as extraction's (a model entry's `dtype` wins)
    threads: 1  # a workstation's, as extraction's; profiles/slurm sets a cluster's (set-threads)
    resources:
        gpu=DEVICE_SLOT,
    log:
        paths.log("measure_isotropy_settings", "{dataset}/{split}/{model}"),
    benchmark:
        paths.benchmark("measure_isotropy_settings", "{dataset}/{split}/{model}")
    conda:
        ENV
    script:
        "../scripts/measure_isotropy_settings.py"


rule tabulate_rajaee_pilehvar:
    input:
        [job.output("settings") for job in EXPERIMENT.analyses],
    output:
        table1=RAJAEE_PILEHVAR_TABLES[0],
        table2=RAJAEE_PILEHVAR_TABLES[1],
        html=report(RAJAEE_PILEHVAR_REPORT, caption="../report/rajaee_pilehvar_tables.rst",
                    category="Rajaee & Pilehvar (2021)", labels={"table": "1-2: settings, ours beside the paper's"}),
    params:
        analyses=EXPERIMENT.analyses,
        pairs=EXPERIMENT.pairs,  # for the caption
    localrule: True
    log:
        paths.log("tabulate_rajaee_pilehvar"),
    conda:
        ENV
    script:
        "../scripts/tabulate_rajaee_pilehvar.py"


rule plot_rajaee_pilehvar_figure1:
    input:
        [job.output("layers") for job in EXPERIMENT.figure_analyses],
    output:
        png=report(RAJAEE_PILEHVAR_FIGURES[1][0], caption="../report/rajaee_pilehvar_figure1.rst",
                   category="Rajaee & Pilehvar (2021)", labels={"figure": "1: -log I(W) per layer"}),
        pdf=RAJAEE_PILEHVAR_FIGURES[1][1],
    params:
        analyses=EXPERIMENT.figure_analyses,
    localrule: True
    log:
        paths.log("plot_rajaee_pilehvar_figure1"),
    conda:
        ENV
    script:
        "../scripts/plot_rajaee_pilehvar_figure1.py"


rule plot_rajaee_pilehvar_figure2:
    input:
        views=[job.output("view") for job in EXPERIMENT.view_analyses],
        corpus=paths.clean_corpus(CORPUS),
        pins=[last_pin(pair.pretrained) for pair in EXPERIMENT.pairs],
    output:
        png=report(RAJAEE_PILEHVAR_FIGURES[2][0], caption="../report/rajaee_pilehvar_figure2.rst",
                   category="Rajaee & Pilehvar (2021)", labels={"figure": "2: PCA view by corpus frequency"}),
        pdf=RAJAEE_PILEHVAR_FIGURES[2][1],
    params:
        analyses=EXPERIMENT.view_analyses,
        pairs=EXPERIMENT.pairs,
        checkpoints=[EXPERIMENT.last_checkpoint(pair.pretrained) for pair in EXPERIMENT.pairs],
    # not a localrule: it tokenizes the clean corpus once per pair, minutes of a core on enwik8 (docs/cluster.md)
    log:
        paths.log("plot_rajaee_pilehvar_figure2"),
    conda:
        ENV
    script:
        "../scripts/plot_rajaee_pilehvar_figure2.py"
