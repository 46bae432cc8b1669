"""The Rajaee & Pilehvar analysis as the workflow sees it: its jobs and outputs, planned from `finetuning:` alone.

Cross-references the schema cannot check fail here, before any job runs: every pair names models of the registry,
every fine-tuned model a configured dataset split, every evaluation a configured split.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

TABLES = ["results/tables/rajaee_pilehvar_table1.csv", "results/tables/rajaee_pilehvar_table2.csv"]
REPORT_TABLE = "results/tables/rajaee_pilehvar_tables.html"
FIGURES = {name: [f"results/figures/rajaee_pilehvar_{name}.{ext}" for ext in ("png", "pdf")]
           for name in ("figure1", "figure2")}


@dataclass(frozen=True)
class Pair:
    pretrained: str
    finetuned: str
    paper: str | None  # the paper's row to compare with: BERT, RoBERTa or None


def split_reference(reference: str, datasets: dict, where: str) -> tuple[str, str]:
    """"stsb/dev" -> ("stsb", "dev"), checked against `finetuning.datasets`."""
    name, _, split = reference.partition("/")
    if name not in datasets or split not in datasets[name]["splits"]:
        known = [f"{n}/{s}" for n, spec in datasets.items() for s in spec["splits"]]
        raise ValueError(f"{where}: {reference!r} is not a configured dataset split (finetuning.datasets); "
                         f"known: {known}")
    return name, split


def pairs(config: dict) -> list[Pair]:
    """The configured (pre-trained, fine-tuned) pairs, every cross-reference of the analysis checked."""
    models = config["models"]
    if "finetuning" not in config:
        if tuned := [name for name, entry in models.items() if "finetune" in entry]:
            raise ValueError(f"models {tuned} are `finetune:` entries, whose data comes from the `finetuning:` "
                             "section; add it (see config.yaml) or remove them")
        return []
    section = config["finetuning"]
    found = [Pair(p["pretrained"], p["finetuned"], p["paper"]) for p in section["pairs"]]
    for pair in found:
        for name in (pair.pretrained, pair.finetuned):
            if name not in models:
                raise ValueError(f"finetuning.pairs names model {name!r}, which is not in `models:`; add it")
        spec = models[pair.finetuned].get("finetune")
        if spec is None or spec["base"] != pair.pretrained:
            raise ValueError(f"finetuning.pairs: model {pair.finetuned!r} must be a `finetune:` entry with "
                             f"base: {pair.pretrained}")
    for name, entry in models.items():
        if "finetune" in entry:
            if entry["finetune"]["base"] not in models:
                raise ValueError(f"model {name!r}: finetune.base {entry['finetune']['base']!r} is not in `models:`")
            split_reference(entry["finetune"]["data"], section["datasets"], f"model {name!r}: finetune.data")
    for reference in section["evaluate"]:
        split_reference(reference, section["datasets"], "finetuning.evaluate")
    return found


@dataclass(frozen=True)
class Analysis:
    """One `measure_isotropy_settings` job: a model of a pair, in one state, on one evaluated dataset split."""

    reference: str  # dataset/split
    pair: Pair
    state: str  # pre-trained | fine-tuned

    @property
    def model(self) -> str:
        return self.pair.pretrained if self.state == "pre-trained" else self.pair.finetuned

    def output(self, kind: str) -> str:
        """settings, layers or view: the Parquet file of that kind."""
        return f"results/rajaee_pilehvar/{self.reference}/{self.model}/{kind}.parquet"


def analyses(config: dict, first_only: bool = False) -> list[Analysis]:
    """Every analysis job, or those on the first evaluated split (the one Figures 1-2 show)."""
    if "finetuning" not in config:
        return []
    references = config["finetuning"]["evaluate"][:1 if first_only else None]
    return [Analysis(reference, pair, state) for reference in references
            for pair in pairs(config) for state in ("pre-trained", "fine-tuned")]


def targets(config: dict) -> list[str]:
    if "finetuning" not in config:
        return []
    return [*TABLES, REPORT_TABLE, *FIGURES["figure1"], *FIGURES["figure2"]]


def problems(config: dict, workdir) -> list[str]:
    """What is missing or non-finite among the analysis outputs in `workdir`; empty when complete."""
    found = [f"missing {path}" for path in targets(config) if not (workdir / path).is_file()]
    for path in TABLES:
        if (workdir / path).is_file():
            table = pd.read_csv(workdir / path)
            values = table[["performance", "isotropy", "isotropy_u_only"]].to_numpy(float)
            if table.empty or not np.isfinite(values).all():
                found.append(f"{path}: empty or non-finite values")
    return found
