"""The layer above every stage: the config validated (`config`), the experiment planned from it (`plan`), what a run costs on
disk (`disk`), and a finished run checked (`verify`). common.smk and `python -m shape_of_learning` use it; no stage
imports it."""
