"""The figure functions plot exactly the summary's values, write PNG+PDF reproducibly, and reject bad input."""

from pathlib import Path
from types import SimpleNamespace

import jinja2
import numpy as np
import pandas as pd
import pytest

from shape_of_learning.experiment.config import load_config, schemas
from shape_of_learning.experiment.plan import plan
from shape_of_learning.figures import razzhigaev as figures
from shape_of_learning.figures.kinds import FIGURE_KINDS, Figure
from shape_of_learning.figures.loss import loss_across_checkpoints
from shape_of_learning.health.assess import assess

REPO = Path(__file__).resolve().parents[1]

# What the workflow passes (a figure's settings, validated with the schema's defaults): the functions have none.
FIGURE_1 = {"metric": "anisotropy", "flagged": "omit"}
FIGURE_4 = {"metric": "id_twonn", "flagged": "omit", "layer_average_over": {"embedding": True, "final_norm": True}}
FIGURE_5 = {
    "metrics": ["id_twonn", "id_mada", "id_mom"],
    "flagged": "omit",
    "layer_average_over": FIGURE_4["layer_average_over"],
}
DECODER_STEPS = {"step0": 0, "step10": 10, "step100": 100}


def bell(num_layers: int, height: float) -> np.ndarray:
    """A bell-shaped profile over layers 0..num_layers peaking mid-depth, as the paper finds for decoders."""
    depth = np.arange(num_layers + 1) / num_layers
    return 0.05 + height * np.exp(-((depth - 0.5) ** 2) / 0.05)


def rows(model, kind, checkpoint, step, metric, means, std):
    return pd.DataFrame(
        {
            "model": model,
            "kind": kind,
            "checkpoint": checkpoint,
            "step": step,
            "random_init": False,
            "dtype": "float32",
            "layer": np.arange(len(means)),
            "num_layers": len(means) - 1,
            "after_final_norm": False,
            "metric": metric,
            "health": None,
            "drawn_as": None,
            "mean": means,
            "std": std,
            "batches": 4,
        }
    )


@pytest.fixture(scope="module")
def summary() -> pd.DataFrame:
    """A 4-layer decoder at 3 training steps (anisotropy growing, ID rising then falling) plus its step -1 "main";
    an 8-layer decoder at one step; a 6-layer encoder with a flat profile and only a step -1 checkpoint."""
    frames = []
    for (checkpoint, step), height, id_level in zip(DECODER_STEPS.items(), (0.1, 0.4, 0.6), (5.0, 12.0, 8.0)):
        frames.append(rows("dec4", "decoder", checkpoint, step, "anisotropy", bell(4, height), 0.01))
        for offset, metric in enumerate(("id_twonn", "id_mada", "id_mom")):
            frames.append(
                rows("dec4", "decoder", checkpoint, step, metric, id_level + offset + np.arange(5.0), 0.5 + offset)
            )
    frames.append(rows("dec4", "decoder", "main", -1, "anisotropy", bell(4, 0.6), 0.01))
    frames.append(rows("dec8", "decoder", "step50", 50, "anisotropy", bell(8, 0.5), 0.02))
    frames.append(rows("enc6", "encoder", "main", -1, "anisotropy", np.full(7, 0.1), 0.01))
    return pd.concat(frames, ignore_index=True)


def assert_written(tmp_path, name):
    png, pdf = tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    assert pdf.read_bytes()[:4] == b"%PDF" and pdf.stat().st_size > 5_000


def plotted(ax) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {line.get_label(): (line.get_xdata(), line.get_ydata()) for line in ax.lines}


def outputs(tmp_path, name):
    return tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"


def test_anisotropy_by_layer_plots_final_checkpoints(summary, tmp_path):
    figure = figures.anisotropy_by_layer(summary, *outputs(tmp_path, "fig1"), **FIGURE_1)
    assert_written(tmp_path, "fig1")
    encoders, decoders = figure.axes
    assert (encoders.get_title(), decoders.get_title()) == ("Encoders", "Decoders")
    # one encoder: layer index on x; two decoder depths: relative depth; dec4's final checkpoint is step100
    ((x, y),) = plotted(encoders).values()
    np.testing.assert_array_equal(x, np.arange(7))
    np.testing.assert_allclose(y, 0.1)
    lines = plotted(decoders)
    assert sorted(lines) == ["dec4 (step100)", "dec8 (step50)"]
    np.testing.assert_allclose(lines["dec4 (step100)"][0], np.arange(5) / 4)
    np.testing.assert_allclose(lines["dec4 (step100)"][1], bell(4, 0.6))
    np.testing.assert_allclose(lines["dec8 (step50)"][0], np.arange(9) / 8)
    assert "Relative depth" in decoders.get_xlabel() and "Layer" in encoders.get_xlabel()
    assert encoders.get_ylabel().startswith("Anisotropy (") and "uncentred" not in encoders.get_ylabel()


def test_anisotropy_by_layer_single_kind_and_band(summary, tmp_path):
    figure = figures.anisotropy_by_layer(summary, *outputs(tmp_path, "dec"), models=["dec4"], **FIGURE_1)
    (ax,) = figure.axes
    assert ax.get_title() == "Decoders" and list(plotted(ax)) == ["dec4 (step100)"]
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    np.testing.assert_allclose([band.min(), band.max()], [bell(4, 0.6).min() - 0.01, bell(4, 0.6).max() + 0.01])


def test_anisotropy_by_layer_draws_cnns_in_their_own_panel(summary, tmp_path):
    cnn = rows("cnn4", "cnn", "main", -1, "anisotropy", np.linspace(0.2, 0.6, 5), 0.01)
    figure = figures.anisotropy_by_layer(pd.concat([summary, cnn]), *outputs(tmp_path, "all"), **FIGURE_1)
    assert [ax.get_title() for ax in figure.axes] == ["Encoders", "Decoders", "CNNs"]
    np.testing.assert_allclose(plotted(figure.axes[2])["cnn4"][1], np.linspace(0.2, 0.6, 5))
    (alone,) = figures.anisotropy_by_layer(cnn, *outputs(tmp_path, "cnn"), **FIGURE_1).axes
    assert alone.get_title() == "CNNs" and list(plotted(alone)) == ["cnn4"]


def test_profile_across_checkpoints_one_line_per_step(summary, tmp_path, caplog):
    figure = figures.profile_across_checkpoints(summary, "dec4", *outputs(tmp_path, "fig3"), **FIGURE_1)
    assert_written(tmp_path, "fig3")
    assert "main" in caplog.text  # the step -1 checkpoint is skipped, and said so
    ax, colourbar = figure.axes
    lines = plotted(ax)
    assert list(lines) == list(DECODER_STEPS)
    for (checkpoint, (x, y)), height in zip(lines.items(), (0.1, 0.4, 0.6)):
        np.testing.assert_array_equal(x, np.arange(5))
        np.testing.assert_allclose(y, bell(4, height))
    colours = [tuple(line.get_color()) for line in ax.lines]
    assert len(set(colours)) == 3
    assert colourbar.get_ylabel() == "Training step"
    assert "dec4" in ax.get_title()


def test_id_across_checkpoints_averages_layers(summary, tmp_path):
    figure = figures.id_across_checkpoints(summary, ["dec4"], *outputs(tmp_path, "fig4"), **FIGURE_4)
    assert_written(tmp_path, "fig4")
    (ax,) = figure.axes
    x, y = plotted(ax)["dec4"]
    np.testing.assert_array_equal(x, [0, 10, 100])
    np.testing.assert_allclose(y, [5.0 + 2, 12.0 + 2, 8.0 + 2])  # mean of level + 0..4
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    np.testing.assert_allclose([band.min(), band.max()], [7.0 - 0.5, 14.0 + 0.5])  # +- mean per-layer std
    assert ax.get_xscale() == "symlog"


def test_id_estimators_one_panel_per_metric(summary, tmp_path):
    figure = figures.id_estimators(summary, "dec4", *outputs(tmp_path, "fig5"), **FIGURE_5)
    assert_written(tmp_path, "fig5")
    assert [ax.get_title() for ax in figure.axes] == [
        f"Intrinsic dimension ({name})" for name in ("TwoNN", "MADA", "MoM")
    ]
    for offset, ax in enumerate(figure.axes):
        ((x, y),) = plotted(ax).values()
        np.testing.assert_array_equal(x, [0, 10, 100])
        np.testing.assert_allclose(y, np.array([7.0, 14.0, 10.0]) + offset)


def test_output_is_byte_identical_across_runs(summary, tmp_path):
    first, second = outputs(tmp_path, "a"), outputs(tmp_path, "b")
    figures.id_across_checkpoints(summary, ["dec4"], *first, **FIGURE_4)
    figures.id_across_checkpoints(summary, ["dec4"], *second, **FIGURE_4)
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda s, o: figures.profile_across_checkpoints(s, "gpt2", *o, **FIGURE_1),
            r"\['gpt2'\] not in the summary.*dec4",
        ),
        (
            lambda s, o: figures.anisotropy_by_layer(s, *o, **{**FIGURE_1, "metric": "isoscore"}),
            r"\['isoscore'\].*available.*anisotropy",
        ),
        (lambda s, o: figures.id_estimators(s, "enc6", *o, **FIGURE_5), r"enc6/id_twonn.*'enc6': \['anisotropy'\]"),
        (
            lambda s, o: figures.id_across_checkpoints(s.drop(columns="std"), ["dec4"], *o, **FIGURE_4),
            r"lacks column.*'std'",
        ),
        (lambda s, o: figures.anisotropy_by_layer(pd.concat([s, s.head(1)]), *o, **FIGURE_1), "repeated"),
        (lambda s, o: figures.id_across_checkpoints(s[s.layer != 2], ["dec4"], *o, **FIGURE_4), "every layer"),
        (
            lambda s, o: figures.profile_across_checkpoints(s, "enc6", *o, **FIGURE_1),
            r"\['enc6'\] have no training checkpoints",
        ),
    ],
)
def test_bad_input_names_the_problem(summary, tmp_path, call, message):
    with pytest.raises(ValueError, match=message):
        call(summary, outputs(tmp_path, "bad"))


def flag(summary, checkpoint, health=None, drawn_as=None):
    """The summary with dec4's `checkpoint` given a verdict, as `shape_of_learning.health.assess` writes them."""
    flagged = summary.copy()
    rows = (flagged["model"] == "dec4") & (flagged["checkpoint"] == checkpoint)
    flagged.loc[rows, "health"], flagged.loc[rows, "drawn_as"] = health, drawn_as
    return flagged


def footnote_text(figure) -> str:
    return " ".join(text.get_text().replace("\n", " ") for text in figure.texts)


def test_checkpoints_that_are_not_their_step_s_model_are_left_out_and_named_or_marked(summary, tmp_path):
    flagged = flag(
        flag(summary, "step10", health="out of place: loss 2 where its series runs at 5"),
        "step0",
        health="a mixture: shares shard-1.bin=step10",
    )
    figure = figures.profile_across_checkpoints(flagged, "dec4", *outputs(tmp_path, "omit"), **FIGURE_1)
    (ax, _) = figure.axes
    assert list(plotted(ax)) == ["step100"]  # step0 and step10 are not their step's training state
    note = footnote_text(figure)
    assert "Left out, not their step's model" in note and "dec4/step10 (out of place: loss 2 where its" in note
    assert "dec4/step0 (a mixture: shares shard-1.bin=step10)" in note

    figure = figures.id_across_checkpoints(
        flagged, ["dec4"], *outputs(tmp_path, "mark"), **{**FIGURE_4, "flagged": "mark"}
    )
    (ax,) = figure.axes
    np.testing.assert_array_equal(plotted(ax)["dec4"][0], [0, 10, 100])  # all drawn ...
    hollow = ax.collections[-1]
    np.testing.assert_array_equal(hollow.get_offsets()[:, 0], [0, 10])  # ... the flagged ones as hollow markers
    assert "Hollow markers" in footnote_text(figure)

    figure = figures.anisotropy_by_layer(
        flag(summary, "step100", health="out of place"), *outputs(tmp_path, "f1"), models=["dec4"], **FIGURE_1
    )
    assert list(plotted(figure.axes[0])) == ["dec4 (step10)"]  # the last checkpoint that is its step's model
    assert "dec4/step100 (out of place)" in footnote_text(figure)


def test_a_group_that_is_one_model_is_drawn_once_and_labelled_so(summary, tmp_path):
    merged = flag(summary, "step10", drawn_as="step0")  # as Pythia's step0 = step1, their losses fitting
    figure = figures.profile_across_checkpoints(merged, "dec4", *outputs(tmp_path, "once"), **FIGURE_1)
    assert list(plotted(figure.axes[0])) == ["step0 (= step10)", "step100"]
    assert "Drawn once, as the first of their group" in footnote_text(figure)
    assert "dec4/step10 (drawn as step0)" in footnote_text(figure)


def test_a_model_whose_every_checkpoint_is_flagged_is_an_error_that_suggests_mark(summary, tmp_path):
    flagged = summary.assign(health=np.where(summary["model"] == "dec8", "out of place", None))
    with pytest.raises(ValueError, match=r"no checkpoint of \['dec8'\] is its step's model.*figures.flagged: mark"):
        figures.anisotropy_by_layer(flagged, *outputs(tmp_path, "x"), models=["dec8"], **FIGURE_1)


def test_the_loss_figure_draws_each_loss_with_its_margin_and_crosses_out_the_flagged(tmp_path):
    pins = [
        {
            "model": "dec",
            "checkpoint": f"step{step}",
            "step": step,
            "weights_digest": str(step),
            "weights": {"model.safetensors": str(step)},
        }
        for step in (0, 1, 10, 100, 1000)
    ]
    losses = {0: 5.5, 1: 4.0, 10: 1.0, 100: 3.0, 1000: 2.9}  # step10: a later model's loss early
    spread = 2.0  # nats per token, over 4096 tokens: a standard error of 2 / 64
    manifests = [
        {
            "checkpoint": pin["checkpoint"],
            "step": pin["step"],
            "dtype": "float32",
            "fingerprint": {"layers": [[pin["step"]]]},
            "loss": {
                "kind": "next-token",
                "value": losses[pin["step"]],
                "tokens": 4096,
                "sum_squares": 4095 * spread**2 + 4096 * losses[pin["step"]] ** 2,
            },
        }
        for pin in pins
    ]
    health = assess(pins, manifests, load_config(REPO / "config.yaml")["health"])
    figure = loss_across_checkpoints(health, "dec", *outputs(tmp_path, "loss"), standard_errors=3)
    assert_written(tmp_path, "loss")
    (ax,) = figure.axes
    lines = plotted(ax)
    np.testing.assert_array_equal(lines["dec"][0], [0, 1, 100, 1000])  # the line joins the genuine ones only
    np.testing.assert_allclose(lines["dec"][1], [5.5, 4.0, 3.0, 2.9])
    bars = [segment for collection in ax.collections for segment in getattr(collection, "get_segments", list)()]
    np.testing.assert_allclose([b[1][1] - b[0][1] for b in bars], [6 * spread / 64] * 5, rtol=1e-6)  # +- 3 errors
    np.testing.assert_array_equal(ax.collections[-1].get_offsets(), [[10, 1.0]])  # crossed out
    assert ax.get_ylabel() == "Next-token loss (nats)" and "dec/step10 (out of place: loss 1 below" in footnote_text(
        figure
    )
    with pytest.raises(ValueError, match="'enc' has no loss at any training checkpoint.*leave it out of"):
        loss_across_checkpoints(health.assign(model="enc", loss=None), "enc", *outputs(tmp_path, "none"), 3)


def test_layer_average_can_leave_out_the_embedding_and_final_norm_layers(summary, tmp_path):
    with_norm = summary.assign(after_final_norm=(summary["model"] == "dec4") & (summary["layer"] == 4))
    # dec4's id levels are level + layer for layers 0..4: means over 0..4 = level+2, 1..4 = level+2.5, 0..3 = level+1.5
    for over, offset in (
        ({}, 2.0),
        ({"embedding": False}, 2.5),
        ({"final_norm": False}, 1.5),
        ({"embedding": False, "final_norm": False}, 2.0),
    ):
        over = {"embedding": True, "final_norm": True, **over}
        figure = figures.id_across_checkpoints(
            with_norm, ["dec4"], *outputs(tmp_path, "avg"), **{**FIGURE_4, "layer_average_over": over}
        )
        np.testing.assert_allclose(plotted(figure.axes[0])["dec4"][1], np.array([5.0, 12.0, 8.0]) + offset)
    assert "Mean over layers 1..L, the last layer left out" in footnote_text(figure)


def test_every_figure_kind_has_one_schema_entry():
    entries = set(schemas()["config.schema.yaml"]["properties"]["figures"]["properties"]) - {"flagged", "layer_average"}
    assert set(FIGURE_KINDS) == entries


def test_plan_names_every_figure_of_the_demo_and_its_files_arguments_and_labels():
    experiment = plan(load_config(REPO / "presets/demo.yaml"))
    # hand-counted from presets/demo.yaml: Figure 1, Figures 2-3 for demo-pythia and demo-bert, Figure 4, Figure 5
    # for demo-pythia (one per model), the modality figure, the loss of demo-pythia and of demo-bert
    assert sorted(figure.name for figure in experiment.figures) == [
        "anisotropy_by_layer",
        "id_across_checkpoints",
        "id_estimators_demo-pythia",
        "loss_demo-bert",
        "loss_demo-pythia",
        "profile_by_modality",
        "profile_demo-bert_anisotropy",
        "profile_demo-pythia_anisotropy",
    ]
    assert experiment.figure_inputs("loss_demo-bert") == ["results/tables/health/demo-bert.parquet"]
    # its own models' summaries only, and the baseline of MiniLM, the one model without a step0
    assert experiment.figure_inputs("profile_by_modality") == [
        "results/tables/models/demo-pythia/checkpoints.summary.parquet",
        "results/tables/models/demo-bert/checkpoints.summary.parquet",
        "results/tables/models/all-MiniLM-L6-v2/checkpoints.summary.parquet",
        "results/tables/models/all-MiniLM-L6-v2/random-init.summary.parquet",
        "results/tables/models/demo-vit/checkpoints.summary.parquet",
        "results/tables/models/demo-resnet/checkpoints.summary.parquet",
    ]
    assert experiment.figure_inputs("anisotropy_by_layer") == [  # no baseline, though MiniLM has one
        f"results/tables/models/{model}/checkpoints.summary.parquet"
        for model in ("demo-bert", "all-MiniLM-L6-v2", "demo-pythia")
    ]
    # where the entries name none, the paper's numbers (the second profile entry figure3), else the kind's name; and
    # the other deliverables'
    assert {name: len(outputs) for name, outputs in experiment.named_targets().items()} == {
        "figure1": 2,
        "figure2": 2,
        "figure3": 2,
        "figure4": 2,
        "figure5": 2,
        "loss_across_checkpoints": 4,
        "godey": 2,
        "rajaee_pilehvar": 7,
        "tables": 4,
        "claims": 2,
    }
    assert experiment.named_targets()["figure3"] == [
        "results/figures/profile_demo-bert_anisotropy.png",
        "results/figures/profile_demo-bert_anisotropy.pdf",
    ]
    figure5 = experiment.figure("id_estimators_demo-pythia")
    assert figure5.outputs == [
        "results/figures/id_estimators_demo-pythia.png",
        "results/figures/id_estimators_demo-pythia.pdf",
    ]
    assert figure5.arguments == {
        "model": "demo-pythia",
        "metrics": ["id_twonn", "id_mada", "id_mom"],
        "flagged": "omit",
        "layer_average_over": {"embedding": True, "final_norm": True},
    }
    assert figure5.labels == {"figure": "5: three ID estimators", "model": "demo-pythia"}
    assert experiment.figure("profile_demo-bert_anisotropy").labels == {
        "figure": "2-3: profile across checkpoints",
        "model": "demo-bert",
        "metric": "anisotropy",
    }
    profile_by_modality = experiment.figure("profile_by_modality").arguments
    assert profile_by_modality["groups"]["demo-resnet"] == {"modality": "image", "group": "CNN"}
    assert profile_by_modality["groups"]["demo-pythia"] == {"modality": "text", "group": "byte-level"}
    assert "layer_average_over" not in experiment.figure("anisotropy_by_layer").arguments


def caption(figure: Figure, config: dict) -> str:
    """workflow/report/figure.rst rendered for `figure` as Snakemake's report renders a caption."""
    environment = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    template = environment.from_string((REPO / "workflow/report/figure.rst").read_text())
    return " ".join(
        template.render(snakemake=SimpleNamespace(params=SimpleNamespace(figure=figure), config=config)).split()
    )


def test_a_figure_draws_with_its_kind_and_its_caption_says_what_it_shows(summary, tmp_path):
    arguments = {**FIGURE_5, "model": "dec4", "metrics": ["id_twonn", "id_mada"]}
    figure = Figure("id_estimators_dec4", "id_estimators", arguments, "figure5")
    assert [ax.get_title() for ax in figure.draw(summary, *outputs(tmp_path, "f5")).axes] == [
        "Intrinsic dimension (TwoNN)",
        "Intrinsic dimension (MADA)",
    ]
    assert_written(tmp_path, "f5")
    config = load_config(REPO / "presets/demo.yaml")
    config["metrics"]["settings"] = {"id_mada": {"k": 10}}
    text = caption(figure, config)
    assert text.startswith(
        "Figure 5 of the paper: the layer-averaged intrinsic dimension of one model against "
        "training step, one panel per estimator"
    )
    assert "Models: dec4; metrics: id_twonn, id_mada. Bands: mean +- std over 2 shuffled batches of 2048" in text
    assert "Layer average: layers 0 (embedding output) to L, the last layer included where it follows the final" in text
    assert (
        "Estimator settings (``metrics.settings``; defaults: scikit-dimension's): TwoNN: discard_fraction "
        "0.1; MADA: k 10." in text
    )
    text = caption(plan(config).figure("anisotropy_by_layer"), config)
    assert "a bell shape, peaking in the middle layers, for decoders" in text and "Layer average" not in text
    assert "Estimator settings" not in text and "are left out (``figures.flagged: omit``)" in text
