"""The layer above every stage: the config validated (`config`), the experiment planned from it (`plan`), checked
before it starts (`preflight`), its results folder claimed (`results_root`), and a finished run checked (`verify`).
common.smk and `python -m shape_of_learning` use it; no stage imports it. What a run costs: `shape_of_learning.cost`."""
