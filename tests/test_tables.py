"""A layer's metrics step, the results tables and the check of a finished run, on data with known answers."""

import copy
import re

import numpy as np
import pandas as pd
import pytest

from shape_of_learning import paths
from shape_of_learning.experiment.config import validate_config
from shape_of_learning.experiment.plan import plan
from shape_of_learning.experiment.verify import problems
from shape_of_learning.metrics.layer import measure_layer
from shape_of_learning.metrics.tables import LAYER_COLUMNS, combine_tables, model_tables
from shard_files import write_shard

MANIFEST = {
    "model": "m",
    "checkpoint": "step2",
    "step": 2,
    "layers": 4,
    "last_layer_after_final_norm": True,
    "dtype": "float32",
}
SETTINGS = {
    "names": ["anisotropy", "avg_cosine", "id_twonn"],
    "batch_size": 128,
    "batches": 2,
    "seed": 0,
    "device": "cpu",
    "settings": {},
}

# The columns docs/outputs.md promises, spelled out here: a change to the tables' constants must change these too.
LAYER = [
    "model",
    "kind",
    "checkpoint",
    "step",
    "random_init",
    "dtype",
    "layer",
    "num_layers",
    "after_final_norm",
    "degenerate",
    "metric",
    "batch",
    "value",
    "duplicates_removed",
]
VALUES = [*LAYER, "health", "drawn_as"]
SUMMARY = [
    "model",
    "kind",
    "checkpoint",
    "step",
    "random_init",
    "dtype",
    "layer",
    "num_layers",
    "after_final_norm",
    "degenerate",
    "metric",
    "health",
    "drawn_as",
    "mean",
    "std",
    "batches",
]


def test_a_layer_on_a_line_has_anisotropy_one_cosine_one_and_dimension_one(tmp_path):
    """Points t * u (t > 0) on a ray in R^32: one direction holds all the variance, every pair has cosine 1, and the
    manifold is 1-dimensional. 6 exact copies are left out of the neighbour search only."""
    rng = np.random.default_rng(0)
    u = rng.normal(size=32)
    t = rng.uniform(1, 2, size=250)
    vectors = np.concatenate([t[:, None] * u, np.repeat(u[None] * 1.5, 6, axis=0)])
    write_shard(tmp_path / "layer_4.parquet", vectors, metadata={}, store_dtype="float32")
    table = measure_layer(tmp_path / "layer_4.parquet", MANIFEST, layer=4, kind="decoder", settings=SETTINGS)
    assert list(table.columns) == LAYER and len(table) == 3 * 2
    means = table.groupby("metric")["value"].mean()
    assert means["anisotropy"] == pytest.approx(1, abs=1e-5)
    assert means["avg_cosine"] == pytest.approx(1, abs=1e-5)
    assert means["id_twonn"] == pytest.approx(1, abs=0.2)
    assert table["after_final_norm"].all() and (table["num_layers"] == 4).all() and (table["step"] == 2).all()
    removed = table.groupby("batch")["duplicates_removed"].first()
    assert removed.sum() == 6 - 2 and removed.min() >= 1  # the 6 copies fall into both batches; one stays in each


def test_only_the_last_layer_of_a_pre_ln_model_is_marked_after_the_final_norm(tmp_path):
    write_shard(tmp_path / "layer_3.parquet", np.random.default_rng(1).normal(size=(256, 8)), metadata={})
    table = measure_layer(tmp_path / "layer_3.parquet", MANIFEST, layer=3, kind="decoder", settings=SETTINGS)
    assert not table["after_final_norm"].any()


def layer_file(path, checkpoint, step, values):
    """A per-layer metrics file as measure_layer writes it: one metric, one value per batch."""
    rows = [
        dict(
            model="m",
            kind="decoder",
            checkpoint=checkpoint,
            step=step,
            dtype="float32",
            layer=0,
            num_layers=1,
            after_final_norm=False,
            metric="anisotropy",
            batch=batch,
            value=value,
            duplicates_removed=0,
        )
        for batch, value in enumerate(values)
    ]
    pd.DataFrame(rows, columns=LAYER_COLUMNS).to_parquet(path)
    return path


def test_tables_carry_each_checkpoint_s_verdict_and_summarise_over_batches(tmp_path):
    files = [
        layer_file(tmp_path / "a.parquet", "step1", 1, [1.0, 3.0]),
        layer_file(tmp_path / "b.parquet", "step2", 2, [5.0]),
        layer_file(tmp_path / "c.parquet", "step3", 3, [2.0, 2.0]),
    ]
    health = tmp_path / "health.parquet"
    pd.DataFrame(
        {
            "model": "m",
            "checkpoint": ["step1", "step2", "step3"],
            "step": [1, 2, 3],
            "health": [None, "out of place", None],
            "drawn_as": [None, None, "step1"],
        }
    ).to_parquet(health)
    values, summary = model_tables(files, health)
    assert len(values) == 5 and list(values.columns) == VALUES
    rows = summary.set_index("checkpoint")
    assert pd.isna(rows.loc["step1", "health"]) and rows.loc["step2", "health"] == "out of place"
    assert rows.loc["step3", "drawn_as"] == "step1"
    assert rows.loc["step1", "mean"] == 2.0 and rows.loc["step1", "std"] == pytest.approx(np.sqrt(2))  # ddof = 1
    assert rows.loc["step3", "std"] == 0.0 and np.isnan(rows.loc["step2", "std"])  # one batch: no spread
    assert rows["batches"].tolist() == [2, 1, 2]


def test_every_model_s_tables_combine_into_one_sorted_table_with_every_checkpoint_s_health(tmp_path):
    health = tmp_path / "health.parquet"
    pd.DataFrame(
        {"model": "m", "checkpoint": ["step1", "step2"], "step": [1, 2], "health": [None, "broken"], "drawn_as": None}
    ).to_parquet(health)
    parts = {
        "checkpoints": model_tables(
            [
                layer_file(tmp_path / "b.parquet", "step2", 2, [5.0]),
                layer_file(tmp_path / "a.parquet", "step1", 1, [1.0, 3.0]),
            ],
            health,
        ),
        "baseline": model_tables([layer_file(tmp_path / "r.parquet", "random-init", -1, [0.5])]),
    }
    for name, (values, summary) in parts.items():
        values.to_parquet(tmp_path / f"{name}.metrics.parquet")
        summary.to_parquet(tmp_path / f"{name}.summary.parquet")
    values, summary, checkpoints = combine_tables(
        [tmp_path / f"{name}.metrics.parquet" for name in parts],
        [tmp_path / f"{name}.summary.parquet" for name in parts],
        [health],
    )
    assert len(values) == 4 and list(summary.columns) == SUMMARY and len(checkpoints) == 2
    assert summary["checkpoint"].tolist() == ["random-init", "step1", "step2"]  # by step, across the parts
    assert summary["health"].isna().tolist() == [True, True, False] and summary["health"].iloc[2] == "broken"


CONFIG = {
    "corpus": {"name": "c"},
    "windows": {},
    "metrics": {"names": ["anisotropy", "avg_cosine"], "batches": 2},
    "figures": {"anisotropy_by_layer": {"models": ["m"]}},
    "models": {"m": {"hub_id": "org/m", "kind": "decoder", "layers": 1, "checkpoints": ["step1", "step2"]}},
}


def finish(config: dict, workdir) -> None:
    """Every final output of the plan, as a finished run leaves it (files of a few bytes), and a complete metrics
    table: one finite value per (model, checkpoint, layer, metric, batch) of the config."""
    for target in plan(config).targets():
        (workdir / target).parent.mkdir(parents=True, exist_ok=True)
        (workdir / target).write_bytes(b"output")
    rows = [
        dict(model="m", checkpoint=c, layer=layer, metric=metric, batch=batch, value=0.5)
        for c in ("step1", "step2")
        for layer in (0, 1)
        for metric in ("anisotropy", "avg_cosine")
        for batch in (0, 1)
    ]
    pd.DataFrame(rows).to_parquet(workdir / paths.METRICS_TABLE)


@pytest.fixture
def finished_run(tmp_path):
    config = validate_config(copy.deepcopy(CONFIG))
    finish(config, tmp_path)
    return config, tmp_path


def break_table(workdir, edit):
    path = workdir / "results/tables/metrics.parquet"
    edit(pd.read_parquet(path)).to_parquet(path)


@pytest.mark.parametrize(
    "damage, message",
    [
        (
            lambda w: (w / "results/figures/anisotropy_by_layer.pdf").unlink(),
            "missing or empty .*anisotropy_by_layer.pdf",
        ),
        (lambda w: (w / "results/figures/anisotropy_by_layer.png").write_bytes(b""), "missing or empty .*png"),
        (
            lambda w: (w / "results/tables/metrics.parquet").unlink(),
            "missing or empty .*results/tables/metrics.parquet",
        ),
        (lambda w: (w / "results/tables/summary.csv").unlink(), "missing or empty .*results/tables/summary.csv"),
        (
            lambda w: break_table(w, lambda t: t.iloc[1:]),
            r"1 missing \(e\.g\. \[\('m', 'step1', 0, 'anisotropy', 0\)\]\), 0 unexpected",
        ),
        (lambda w: break_table(w, lambda t: pd.concat([t, t.iloc[:1]])), "1 duplicate"),
        (lambda w: break_table(w, lambda t: t.assign(value=[np.nan] + [0.5] * (len(t) - 1))), "1 non-finite values"),
        (lambda w: break_table(w, lambda t: pd.concat([t, t.iloc[:1].assign(checkpoint="step9")])), "1 unexpected"),
    ],
)
def test_verify_names_each_kind_of_broken_run(finished_run, damage, message):
    config, workdir = finished_run
    assert problems(config, workdir) == []
    damage(workdir)
    found = problems(config, workdir)
    assert len(found) == 1 and re.search(message, found[0]), found


RAJAEE_PILEHVAR = {
    **CONFIG,
    "models": {
        **CONFIG["models"],
        "enc": {"path": "enc", "kind": "encoder", "layers": 1},
        "enc-tuned": {"finetune": {"base": "enc", "data": "lee/all"}, "kind": "encoder", "layers": 1},
    },
    "rajaee_pilehvar": {
        "pairs": [{"pretrained": "enc", "finetuned": "enc-tuned", "paper": "BERT"}],
        "evaluate": ["lee/all"],
        "datasets": {"lee": {"format": "lee", "gensim": True, "scale": 1, "splits": {"all": ["a", "b"]}}},
    },
}
TABLE_1 = "results/tables/rajaee_pilehvar_table1.csv"


def test_verify_checks_the_rajaee_pilehvar_tables_naming_the_file(tmp_path):
    config = validate_config(copy.deepcopy(RAJAEE_PILEHVAR))
    finish(config, tmp_path)
    for table in (TABLE_1, "results/tables/rajaee_pilehvar_table2.csv"):
        pd.DataFrame({"performance": [70.1], "isotropy": [0.2], "isotropy_notebook": [0.1]}).to_csv(tmp_path / table)
    problems_of = lambda: [p for p in problems(config, tmp_path) if "metrics.parquet" not in p]  # noqa: E731
    assert problems_of() == []  # the encoders' rows are not in this metrics table: only its problems are left out
    pd.DataFrame({"performance": [70.1], "isotropy": [np.inf], "isotropy_notebook": [0.1]}).to_csv(tmp_path / TABLE_1)
    assert problems_of() == [f"{tmp_path / TABLE_1}: empty or non-finite values"]
    (tmp_path / TABLE_1).unlink()
    assert problems_of() == [f"missing or empty {tmp_path / TABLE_1}"]
