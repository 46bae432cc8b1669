"""Anisotropy and intrinsic dimension of transformer representations (Razzhigaev et al., EACL 2024)."""

__version__ = "0.1.0"
# The environment variable that carries the config's `results` folder to shape_of_learning.paths, in the Snakemake
# process and every job's (set by experiment.results_root.export; here, so that it is known before paths is imported)
RESULTS_VARIABLE = "SHAPE_OF_LEARNING_RESULTS"
