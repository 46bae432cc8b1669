# Two commands set up everything on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= 2
# An extra package index for torch's build: https://download.pytorch.org/whl/cpu on a machine without a GPU, where
# PyPI's Linux wheel is the CUDA build with gigabytes of NVIDIA packages (README). Read when .venv is created.
TORCH_INDEX ?=
# the tests on CORES workers (pytest-xdist), a module per worker: its module fixtures, e.g. the end-to-end run, run once
PYTEST := $(BIN)/pytest -q -n $(CORES) --dist loadscope

.PHONY: demo test check lint format check-dry-run-demo check-dry-run-paper paper dry-run report rehearsal slurm-test clean

$(BIN)/snakemake: requirements/*.txt pyproject.toml  ## the package, editable, with every pin of requirements/
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -e ".[demo,test]"
	touch $@

demo: $(BIN)/snakemake  ## the whole DAG, offline, on the demo preset: results/figures/, results/tables/
	$(BIN)/snakemake --cores $(CORES) --configfile presets/demo.yaml

test: $(BIN)/snakemake  ## unit tests and the end-to-end run of the real DAG on the CI preset
	$(PYTEST)

# Lint and dry runs write nothing: in a results folder of their own, `check` passes whichever config wrote results/
CHECK_ROOT := --config results=results-check

check: $(BIN)/snakemake  ## the fast loop (~1 min): unit tests without the DAG runs, lint and format, dry runs of the demo and the paper
	$(PYTEST) -m "not slow" -p no:cacheprovider
	$(MAKE) --no-print-directory -j $(CORES) --output-sync check-dry-run-paper lint check-dry-run-demo

# check's Snakemake runs side by side (make -j), the longest first; dry runs and lint take no lock
lint: $(BIN)/snakemake  ## Snakemake's lint of the workflow, and every Python file as `ruff format` writes it
	$(BIN)/ruff format --check --quiet
	$(BIN)/snakemake --lint --configfile presets/demo.yaml $(CHECK_ROOT)

format: $(BIN)/snakemake  ## format every Python file (`make check` fails where one is not)
	$(BIN)/ruff format

check-dry-run-demo: $(BIN)/snakemake
	$(BIN)/snakemake -n --quiet rules --configfile presets/demo.yaml $(CHECK_ROOT) > /dev/null

check-dry-run-paper: $(BIN)/snakemake
	$(BIN)/snakemake -n --quiet rules $(CHECK_ROOT) > /dev/null

paper: $(BIN)/snakemake  ## the paper's experiment (config.yaml): needs the Hub and, realistically, GPUs
	$(BIN)/snakemake --cores $(CORES)

dry-run: $(BIN)/snakemake
	$(BIN)/snakemake -n --quiet rules

report: $(BIN)/snakemake  ## the demo's report, in its results folder
	report=$$($(BIN)/python -m shape_of_learning path REPORT presets/demo.yaml) && \
	$(BIN)/snakemake --cores 1 --configfile presets/demo.yaml --report $$report

rehearsal: $(BIN)/snakemake  ## the paper's run on tiny twins of its models, offline, through a local Hub (docs/rehearsal.md)
	$(BIN)/python -m shape_of_learning.rehearsal --cores $(CORES)

slurm-test: $(BIN)/snakemake  ## the demo (CI overlay; PRESET=...) locally, then on a one-node SLURM cluster here: the ratio
	bash tests/slurm/run_demo_on_local_slurm.sh

clean:
	rm -rf results logs .snakemake results-rehearsal .rehearsal
