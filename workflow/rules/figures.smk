# Figures: one job per planned figure (experiment.plan(config).figures); each reads only the tidy summary table, never
# recomputes a metric. Kinds, captions and labels: shape_of_learning.figures.FIGURE_KINDS.
import re

from shape_of_learning.experiment import Figure

FIGURE_FILES = Figure.files("{figure}")


rule plot_figure:
    input:
        "results/tables/summary.parquet",
    output:
        png=report(FIGURE_FILES["png"], caption="../report/figure.rst", category="Figures",
                   labels=lambda wildcards: EXPERIMENT.figure(wildcards.figure).labels),
        pdf=FIGURE_FILES["pdf"],
    wildcard_constraints:
        figure="|".join(re.escape(figure.name) for figure in EXPERIMENT.figures),
    params:
        figure=lambda wildcards: EXPERIMENT.figure(wildcards.figure),
    log:
        "logs/figures/{figure}.log",
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"
