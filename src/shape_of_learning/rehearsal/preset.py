"""presets/rehearsal.yaml: the paper's config (config.yaml) on tiny twins, written from it when the rehearsal runs
(`python -m shape_of_learning.rehearsal`), not committed.

    python -m shape_of_learning.rehearsal.preset [--configfile config.yaml] [--output presets/rehearsal.yaml]

Every model of the config that a twin can stand for is rehearsed through one representative: the models that load
the same way (same class, features, weight files, branch naming, tokenizer source, gating, input and checkpoint list
form: `variant`) take the same code path, and differ in size only. Each figure keeps its representatives (or its own
first model with a twin, where it would otherwise be empty; one that names only local folders' models is left out),
the Rajaee & Pilehvar pairs keep theirs. Each kept model gets its twin's depth and the twin's branches (2-3 of a
series). `SCALE` shrinks the rest to a 2-core machine. A model whose repository has no row in the model facts has no
twin: writing the preset fails, naming the command that adds it.
"""

import argparse
import collections
import copy
import sys
from pathlib import Path

import yaml
from snakemake.utils import update_config

from shape_of_learning import DEFAULT_CONFIG, REPOSITORY
from shape_of_learning.experiment import results_root
from shape_of_learning.extraction.families import depth
from shape_of_learning.models import facts
from shape_of_learning.rehearsal import structure, twins

PRESET = Path("presets/rehearsal.yaml")
FOLDER = ".rehearsal"  # what the rehearsal builds and serves (shape_of_learning.rehearsal.__main__), gitignored

# What a twin and 2 cores need, over the paper's settings (merged as a --configfile overlay: lists replace)
SCALE = {
    results_root.KEY: "results-rehearsal",
    # gensim's Wikipedia sample (the demo's corpus, MediaWiki XML as enwik8 is) stands in for the 100 MB download
    "corpus": {
        "name": "enwiki-sample",
        "gensim_sample": True,
        "url": None,
        "archive_sha256": None,
        "size": None,
        "md5": None,
        "sha256": "34c1c63050c87cc8477b9ae36b1cb0edf372612c92938b742e579a7109c20fa4",
    },
    # the account-only corpora in their real formats (rehearsal.media). Image twins see 32-pixel images, where
    # SegFormer's last stage is one position: each image gives one position per layer
    "image_corpus": {"local_path": f"{FOLDER}/imagenet/ILSVRC2012_img_val.tar", "count": 600},
    "audio_corpus": {"local_path": f"{FOLDER}/common_voice_en/clips", "count": 20},
    # and every text twin of the Godey figure 16 tokens of each 256-character window, which subword tokenizers cut
    # into about 50
    "extraction": {"positions_per_image": 1, "positions_per_window": 16},
    "windows": {"count": 64, "chars": 256},
    "metrics": {"batch_size": 256, "batches": 2},
    "cost": {"calibration": "cpu", "gpus": 2},
    # random twins' checkpoints may well look broken to the health checks: drawn, marked, not left out
    "figures": {"flagged": "mark"},
    # STS-B's archive format from SimLex-999's ratings (rehearsal.media); the twins are 32 wide
    "rajaee_pilehvar": {
        "seeds": [0, 1],
        "least_directions": [8, 24],
        "figure_tokens": 400,
        "datasets": {"stsb": {"url": None, "local_path": f"{FOLDER}/Stsbenchmark.tar.gz"}},
    },
}


def variant(entry: dict, row: structure.Structure) -> tuple:
    """What decides how a model is pinned, downloaded, loaded and read: models with the same variant differ in size
    only."""
    sharded = any("-of-" in name for name in row.weight_files)
    formats = tuple(sorted({Path(name).suffix for name in row.weight_files}))
    return (
        row.loaded_as,
        row.features,
        formats,
        sharded,
        entry.get("weights", "auto"),
        row.revision_naming,
        row.preprocessor_repo != row.hub_id,
        row.gated,
        entry.get("modality", "text"),
        entry.get("text_unit"),
        _checkpoint_form(entry.get("checkpoints")),
    )


def _checkpoint_form(checkpoints) -> str:
    if isinstance(checkpoints, dict):
        return "schedule"
    if checkpoints:
        return "repositories" if isinstance(checkpoints[0], dict) else "branches"
    return "main"


def _figure_lists(figures: dict):
    """Each list of model names in the figures section: (its figure, the item holding it, the names)."""
    for figure, entry in figures.items():
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, dict) and isinstance(item.get("models"), list):
                yield figure, item, item["models"]
            elif isinstance(item, dict) and isinstance(item.get("model"), str):
                yield figure, item, [item["model"]]


def representatives(models: dict[str, dict], figures: dict, pairs: list[dict]) -> list[str]:
    """The models kept: one per `variant` (a model a figure names first), each figure's first model with a twin where
    none of its own was kept, and the Rajaee & Pilehvar pairs with the bases of their fine-tuned models."""
    if missing := facts.missing(models):
        raise ValueError(
            f"the config names repositories without a row in the model facts ({facts.path()}): {missing}; add them: "
            f"{facts.add_command(missing)}"
        )
    rows = structure.table()
    named = [model for _, _, names in _figure_lists(figures) for model in names]
    order = sorted(models, key=lambda model: named.index(model) if model in named else len(named))
    chosen, seen = set(), set()
    for model in order:
        entry = models[model]
        if entry.get("hub_id") and (key := variant(entry, rows[entry["hub_id"]])) not in seen:
            seen.add(key)
            chosen.add(model)
    for _, _, names in _figure_lists(figures):  # a local folder's model has no twin: its files are here already
        twinned = [model for model in names if model in models and {"hub_id", "finetune"} & set(models[model])]
        if twinned and not chosen.intersection(names):
            chosen.add(twinned[0])
    for pair in pairs:
        chosen |= {pair["pretrained"], pair["finetuned"], models[pair["finetuned"]]["finetune"]["base"]}
    return [model for model in models if model in chosen]


def twin_entry(entry: dict) -> dict:
    """A model entry on its twin: the twin's depth and branches; a series of one repository per checkpoint
    (TinyLlama's) keeps its first, middle and last."""
    entry = copy.deepcopy(entry)
    if "finetune" in entry:
        entry["layers"] = twins.LAYERS
        return entry
    rows = structure.table()
    row = rows[entry["hub_id"]]
    entry["layers"] = depth(structure.transformers_config(row, **twins.tiny(row)))
    checkpoints = entry.get("checkpoints")
    if isinstance(checkpoints, dict) or (checkpoints and isinstance(checkpoints[0], str)):
        entry["checkpoints"] = list(row.revisions)
    elif checkpoints:
        middle = len(checkpoints) // 2
        entry["checkpoints"] = [checkpoints[0], checkpoints[middle], checkpoints[-1]]
    return entry


def rehearsal_config(paper: dict) -> dict:
    """The rehearsal's config from the paper's. A figure (or a figure's item) that names only models of local folders,
    which have no twin, is left out (`left_out_figures`)."""
    config = copy.deepcopy(paper)
    figures = config["figures"]
    kept = representatives(config["models"], figures, config["rajaee_pilehvar"]["pairs"])
    for figure, item, names in list(_figure_lists(figures)):
        if not (twinned := [model for model in names if model in kept]):
            if isinstance(figures[figure], list):
                figures[figure] = [other for other in figures[figure] if other is not item]
            if not figures[figure] or not isinstance(figures[figure], list):
                del figures[figure]
        elif "models" in item:
            item["models"] = twinned
        else:
            item["model"] = twinned[0]
    config["models"] = {model: twin_entry(config["models"][model]) for model in kept}
    update_config(config, copy.deepcopy(SCALE))  # as Snakemake merges a --configfile overlay
    return config


def left_out_figures(paper: dict, rehearsal: dict) -> list[str]:
    """The figures of `paper` of which `rehearsal` keeps fewer items: those naming only models of local folders."""
    paper_items, rehearsal_items = (
        collections.Counter(figure for figure, _, _ in _figure_lists(config["figures"]))
        for config in (paper, rehearsal)
    )
    return [figure for figure, count in paper_items.items() if rehearsal_items[figure] < count]


HEADER = """\
# The rehearsal (`make rehearsal`, docs/rehearsal.md): the paper's run on tiny twins of its models, served by a local
# Hub. WRITTEN by `python -m shape_of_learning.rehearsal` from config.yaml each time it runs (not committed): edit
# config.yaml, or SCALE in src/shape_of_learning/rehearsal/preset.py. One model per way of loading one
# (rehearsal.preset.variant); twins' depths and branches; small samples.
"""


def render(config: dict) -> str:
    return HEADER + yaml.safe_dump(config, sort_keys=False, width=120)


def write(configfile: Path = REPOSITORY / DEFAULT_CONFIG, output: Path = REPOSITORY / PRESET) -> dict:
    """The rehearsal's preset written from `configfile` into `output`; returns it."""
    paper = yaml.safe_load(Path(configfile).read_text())
    config = rehearsal_config(paper)
    Path(output).write_text(render(config))
    print(f"{output}: {len(config['models'])} of {configfile}'s {len(paper['models'])} models, one per way of loading")
    if left_out := left_out_figures(paper, config):
        print(f"left out of the rehearsal (their models are local folders, which have no twins): {left_out}")
    return config


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shape_of_learning.rehearsal.preset", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--configfile", type=Path, default=REPOSITORY / DEFAULT_CONFIG, help="the paper's config")
    parser.add_argument("--output", type=Path, default=REPOSITORY / PRESET, help="the preset to write")
    args = parser.parse_args(argv)
    try:
        write(args.configfile, args.output)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
