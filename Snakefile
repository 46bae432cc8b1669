# The Shape of Learning (Razzhigaev et al., EACL 2024) as a Snakemake workflow.
#   snakemake --cores 2 --configfile presets/demo.yaml      # the offline demo
#   snakemake --cores N                                     # the paper's experiment (config.yaml)
import os
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

# Rule scripts import the project's package from src/ without an install step (local, conda and SLURM jobs alike):
# exported to every job's environment, not read from it.
SRC = str(Path(workflow.basedir) / "src")
os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])))
sys.path.insert(0, SRC)


# A preset given with --configfile replaces config.yaml instead of merging into it, so that the paper's models never
# leak into a demo run. Several --configfile files merge, later ones win (presets/ci.yaml is an overlay on
# presets/demo.yaml); --config key=value still tweaks whichever files are in use.
from shape_of_learning import DEFAULT_CONFIG

if not workflow.config_settings.configfiles:
    configfile: Path(workflow.basedir) / DEFAULT_CONFIG


include: "workflow/rules/common.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/extraction.smk"
include: "workflow/rules/health.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/figures.smk"


if EXPERIMENT.pairs:  # the Rajaee & Pilehvar analysis, where the config has a `rajaee_pilehvar:` section

    include: "workflow/rules/rajaee_pilehvar.smk"


if EXPERIMENT.claims:  # the claims scorecard, where the config has a `claims:` section

    include: "workflow/rules/claims.smk"


report: "workflow/report/workflow.rst"


rule all:
    input:
        targets(),
    default_target: True


# One target per paper figure and companion analysis, as the config names them (a figure entry's `target:`, else its
# kind), and `tables`: `snakemake --cores N figure3` makes that figure and only what it needs.
for target in EXPERIMENT.named_targets():
    if target in {existing.name for existing in workflow.rules}:
        raise ValueError(f"figure target {target!r} is the name of a rule of the workflow; give the figure entry "
                         "another `target:`")

    rule:
        name:
            target
        input:
            targets(target),
        localrule: True


# Any other name is no target of this config (every output lies under results/): instead of Snakemake's bare "No rule
# to produce", an error that lists the targets there are.
rule name_the_targets:
    input:
        no_such_target,
    output:
        "{target}",
    wildcard_constraints:
        target="[A-Za-z_][A-Za-z0-9_]*",
    localrule: True


onstart:
    claim_results_root()


# Every run ends naming what it could not make and why, and each failed job by its message and log.
onsuccess:
    report_outcome()


onerror:
    report_outcome()
