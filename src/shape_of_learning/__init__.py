"""Anisotropy and intrinsic dimension of transformer representations (Razzhigaev et al., EACL 2024)."""

from pathlib import Path

__version__ = "0.1.0"


def _repository() -> Path:
    """The checkout the package runs from (installed editable by `make`): the nearest folder above it that holds the
    workflow's Snakefile, beside its schemas and the paper's config."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "Snakefile").is_file() and (folder / "workflow" / "schemas").is_dir():
            return folder
    raise ImportError(
        f"shape_of_learning runs from a checkout of its repository, which holds the workflow's schemas; "
        f"no folder above {Path(__file__).parent} holds a Snakefile and workflow/schemas/: clone the "
        "repository and install it editable (`make`, or `pip install -e .`)"
    )


REPOSITORY = _repository()
DEFAULT_CONFIG = "config.yaml"  # the paper's, in REPOSITORY: what runs without --configfile
# The environment variable that carries the config's `results` folder to shape_of_learning.paths, in the Snakemake
# process and every job's (set by experiment.results_root.export; here, so that it is known before paths is imported)
RESULTS_VARIABLE = "SHAPE_OF_LEARNING_RESULTS"
