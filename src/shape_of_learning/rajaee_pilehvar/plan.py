"""The Rajaee & Pilehvar analysis planned from the validated config: its (pre-trained, fine-tuned) pairs, one
fine-tuned model per seed, and its analysis jobs, every cross-reference a schema cannot check (a pair's models, a
dataset split) checked here. `shape_of_learning.experiment.plan` adds them to the experiment."""

from dataclasses import dataclass

from shape_of_learning import paths
from shape_of_learning.rajaee_pilehvar.datasets import split_names


def seed_model(model: str, seed: int) -> str:
    """The model of one fine-tuning run: a `finetune:` entry of the config, run with one of `rajaee_pilehvar.seeds`."""
    return f"{model}-seed{seed}"


@dataclass(frozen=True)
class Pair:
    """A pre-trained model and its fine-tuned copies, one per seed (Rajaee & Pilehvar), and the paper's row to
    compare them with."""

    pretrained: str
    finetuned: str  # the config's `finetune:` entry; the run of each seed is the model `seed_model(finetuned, seed)`
    paper: str | None  # BERT, RoBERTa or None
    seeds: tuple[int, ...]

    @property
    def label(self) -> str:
        return f"{self.pretrained} -> {self.finetuned}"

    @property
    def finetuned_models(self) -> list[str]:
        return [seed_model(self.finetuned, seed) for seed in self.seeds]


@dataclass(frozen=True)
class Analysis:
    """One `measure_isotropy_settings` job: a model in one state on one evaluated dataset split, and the seeds of its
    k-means runs: a fine-tuned model's own run's seed, every seed for any other model."""

    reference: str  # dataset/split
    model: str
    state: str  # pre-trained | fine-tuned | already sentence-tuned (rajaee_pilehvar.sentence_tuned)
    seeds: tuple[int, ...]
    pair: Pair | None = None  # None for a model measured as it is (rajaee_pilehvar.sentence_tuned)

    @property
    def row(self) -> str:
        """The model as Tables 1-2 name it: a fine-tuned run by its `finetune:` entry, its seeds averaged."""
        return self.pair.finetuned if self.state == "fine-tuned" else self.model

    @property
    def label(self) -> str:
        """The block of Tables 1-2 and the panel of Figures 1-2 it belongs to: its pair, or the model alone."""
        return self.pair.label if self.pair else self.model

    def output(self, part: str) -> str:
        """settings, layers or view: the Parquet file of that part (`paths.isotropy_settings`)."""
        return paths.isotropy_settings(*parse_reference(self.reference), self.model, part)


def parse_reference(reference: str) -> tuple[str, str]:
    """A dataset split as the config names it: "stsb/dev" -> ("stsb", "dev")."""
    name, _, split = reference.partition("/")
    return name, split


def split_reference(reference: str, datasets: dict, where: str) -> tuple[str, str]:
    """`parse_reference`, checked against `rajaee_pilehvar.datasets`."""
    name, split = parse_reference(reference)
    if name not in datasets or split not in split_names(name, datasets[name]):
        known = [f"{n}/{s}" for n, spec in datasets.items() for s in split_names(n, spec)]
        raise ValueError(
            f"{where}: {reference!r} is not a configured dataset split (rajaee_pilehvar.datasets); known: {known}"
        )
    return name, split


def plan_pairs(config: dict) -> list[Pair]:
    """The configured (pre-trained, fine-tuned) pairs of the Rajaee & Pilehvar analysis, every cross-reference
    checked: every pair and every `sentence_tuned` model names models of the registry, every fine-tuned model a
    configured dataset split, every evaluation a configured split."""
    models = config["models"]
    if "rajaee_pilehvar" not in config:
        if tuned := [name for name, entry in models.items() if "finetune" in entry]:
            raise ValueError(
                f"models {tuned} are `finetune:` entries, whose data comes from the `rajaee_pilehvar:` "
                "section; add it (see config.yaml) or remove them"
            )
        return []
    section = config["rajaee_pilehvar"]
    found = [Pair(p["pretrained"], p["finetuned"], p["paper"], tuple(section["seeds"])) for p in section["pairs"]]
    if unknown := [name for name in section["sentence_tuned"] if name not in models]:
        raise ValueError(f"rajaee_pilehvar.sentence_tuned names {unknown}, which are not in `models:`; add them")
    if tuned := [name for name in section["sentence_tuned"] if "finetune" in models[name]]:
        raise ValueError(
            f"rajaee_pilehvar.sentence_tuned names `finetune:` entries {tuned}, whose runs a pair "
            "measures; name them in rajaee_pilehvar.pairs instead"
        )
    for pair in found:
        for name in (pair.pretrained, pair.finetuned):
            if name not in models:
                raise ValueError(f"rajaee_pilehvar.pairs names model {name!r}, which is not in `models:`; add it")
        spec = models[pair.finetuned].get("finetune")
        if spec is None or spec["base"] != pair.pretrained:
            raise ValueError(
                f"rajaee_pilehvar.pairs: model {pair.finetuned!r} must be a `finetune:` entry with "
                f"base: {pair.pretrained}"
            )
    for name, entry in models.items():
        if "finetune" in entry:
            base = entry["finetune"]["base"]
            if base not in models:
                raise ValueError(f"model {name!r}: finetune.base {base!r} is not in `models:`")
            if "finetune" in models[base]:
                raise ValueError(
                    f"model {name!r}: finetune.base {base!r} is a `finetune:` entry, one model per seed; "
                    "fine-tune a model that is not"
                )
            split_reference(entry["finetune"]["data"], section["datasets"], f"model {name!r}: finetune.data")
    for reference in section["evaluate"]:
        split_reference(reference, section["datasets"], "rajaee_pilehvar.evaluate")
    return found


def seed_models(config: dict) -> dict[str, dict]:
    """The model registry with each `finetune:` entry replaced, in place, by one entry per seed of
    `rajaee_pilehvar.seeds`, named `seed_model(name, seed)` and fine-tuned with that seed (`finetune.seed`)."""
    models, found = config["models"], {}
    for name, entry in models.items():
        if "finetune" not in entry:
            found[name] = entry
            continue
        for seed in config["rajaee_pilehvar"]["seeds"]:
            if (run := seed_model(name, seed)) in models:
                raise ValueError(
                    f"model {run!r} of `models:` has the name of the seed-{seed} run of `finetune:` entry "
                    f"{name!r}; rename one of them"
                )
            found[run] = {**entry, "finetune": {**entry["finetune"], "seed": seed}}
    return found


def plan_analyses(config: dict, pairs: list[Pair]) -> list[Analysis]:
    """The `measure_isotropy_settings` jobs, on every evaluated split: each pair's pre-trained model and each seed's
    fine-tuned run, then each `sentence_tuned` model as it is."""
    section, seeds = config["rajaee_pilehvar"], tuple(config["rajaee_pilehvar"]["seeds"])
    analyses = []
    for reference in section["evaluate"]:
        for pair in pairs:
            analyses.append(Analysis(reference, pair.pretrained, "pre-trained", seeds, pair))
            analyses += [
                Analysis(reference, model, "fine-tuned", (seed,), pair)
                for seed, model in zip(pair.seeds, pair.finetuned_models)
            ]
        analyses += [Analysis(reference, model, "already sentence-tuned", seeds) for model in section["sentence_tuned"]]
    return analyses


def excluded_training_data(config: dict) -> list[str]:
    """The dataset splits fine-tuned on, whose pairs every evaluation leaves out (rajaee_pilehvar.drop_training_pairs)."""
    if not config["rajaee_pilehvar"]["drop_training_pairs"]:
        return []
    return list(dict.fromkeys(entry["finetune"]["data"] for entry in config["models"].values() if "finetune" in entry))
