# Figures: one job per planned figure (EXPERIMENT.figures); each reads only its own models' summary tables (or their
# health tables), never recomputes a metric. Kinds, captions and labels: shape_of_learning.figures.kinds.FIGURE_KINDS.
# On a cluster a figure is drawn on the submit host (`localrule`): seconds of matplotlib, less than one job's queueing.
import re


rule plot_figure:
    input:
        lambda wildcards: EXPERIMENT.figure_inputs(wildcards.figure),
    output:
        png=report(paths.figure("{figure}", "png"), caption="../report/figure.rst", category="Figures",
                   labels=lambda wildcards: EXPERIMENT.figure(wildcards.figure).labels),
        pdf=paths.figure("{figure}", "pdf"),
    wildcard_constraints:
        figure="|".join(re.escape(figure.name) for figure in EXPERIMENT.figures),
    params:
        figure=lambda wildcards: EXPERIMENT.figure(wildcards.figure),
    localrule: True
    log:
        paths.log("plot_figure", "{figure}"),
    conda:
        ENV
    script:
        "../scripts/plot_figure.py"
