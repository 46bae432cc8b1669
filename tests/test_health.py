"""Checkpoint health, on series with known answers: byte and behavioural duplicates, the two rules (broken, holds
its own step), and the verdicts the tables and figures follow; upstream's defects spliced into the demo's real
measured losses (tests/data/demo_losses.json)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shape_of_learning.experiment.config import load_config
from shape_of_learning.figures.rows import apply_health
from shape_of_learning.health.assess import COLUMNS, assess
from shape_of_learning.health.duplicates import fingerprint_distance, identical_files, same_behaviour
from shape_of_learning.health.own_step import FITS, MISFITS, UNKNOWN, place, standard_error
from shape_of_learning.health.loss_trend import non_increasing_fit, out_of_place

REPO = Path(__file__).resolve().parents[1]
DEMO = json.loads((REPO / "tests" / "data" / "demo_losses.json").read_text())
DEMO_HEALTH = load_config(REPO / "presets" / "demo.yaml")["health"]  # the schema's defaults and the demo's choices
SETTINGS = load_config(REPO / "config.yaml")["health"]  # the paper's
SPREAD = 2.5  # a per-token loss's standard deviation in the synthetic series, nats (the demo's: tests/data)


def pin(checkpoint, step, digest, model="m", weights=None):
    return {
        "model": model,
        "checkpoint": checkpoint,
        "step": step,
        "weights_digest": digest,
        "weights": weights or {"model.safetensors": digest},
    }


def manifest(checkpoint, step, loss, fingerprint, dtype="float32", kind="next-token", tokens=512, vocab_size=256):
    """A manifest whose loss averages `tokens` per-token losses spread by SPREAD nats."""
    record = (
        {"kind": None, "value": None, "tokens": 0, "reason": "no head"}
        if loss is None
        else {
            "kind": kind,
            "value": loss,
            "tokens": tokens,
            "vocab_size": vocab_size,
            "sum_squares": (tokens - 1) * SPREAD**2 + tokens * loss**2,
        }
    )
    return {
        "checkpoint": checkpoint,
        "step": step,
        "dtype": dtype,
        "fingerprint": {"layers": fingerprint},
        "loss": record,
    }


def layers(seed, scale=1.0):
    """A fingerprint of 3 layers x 8 numbers, distinct for each seed."""
    return (np.random.default_rng(seed).normal(size=(3, 8)) * scale).tolist()


# ------------------------------------------------------------------------------------------------ byte duplicates


def test_identical_files_names_every_other_member_earliest_first():
    pins = [pin("step3", 3, "A"), pin("step0", 0, "A"), pin("step2", 2, "B"), pin("step1", 1, "A")]
    assert identical_files(pins) == {
        "step0": {"identical_to": ["step1", "step3"], "shared_files": {}},
        "step1": {"identical_to": ["step0", "step3"], "shared_files": {}},
        "step3": {"identical_to": ["step0", "step1"], "shared_files": {}},
    }
    with pytest.raises(ValueError, match=r"one model; got \['m', 'other'\]"):
        identical_files([*pins, pin("step0", 0, "A", model="other")])


def test_a_checkpoint_sharing_one_shard_is_a_partial_duplicate():
    def sharded(name, step, first, second):
        return pin(
            name,
            step,
            first + second,
            model="pythia-12b",
            weights={"pytorch_model-00001-of-00002.bin": first, "pytorch_model-00002-of-00002.bin": second},
        )

    # EleutherAI/pythia#206: step50000 serves the final model's first shard, its second shard is its own
    pins = [
        sharded("step49000", 49000, "a", "b"),
        sharded("step50000", 50000, "f", "c"),
        sharded("step143000", 143000, "f", "g"),
    ]
    assert identical_files(pins) == {
        "step50000": {"identical_to": [], "shared_files": {"pytorch_model-00001-of-00002.bin": "step143000"}},
        "step143000": {"identical_to": [], "shared_files": {"pytorch_model-00001-of-00002.bin": "step50000"}},
    }


# ------------------------------------------------------------------------------------------ behavioural duplicates


def test_fingerprints_within_the_dtype_s_tolerance_are_the_same_behaviour():
    base = np.array(layers(0))
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": base.tolist()}) == 0
    nudged = base.copy()
    nudged[2] *= 1 + 3e-5  # one layer off by 3e-5, relative
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": nudged.tolist()}) == pytest.approx(3e-5, rel=1e-3)
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": base[:2].tolist()}) == float("inf")
    manifests = [
        manifest("a", 0, 5.0, base.tolist()),
        manifest("b", 1, 5.0, nudged.tolist()),
        manifest("c", 2, 4.0, layers(1)),
        manifest("d", 3, 4.0, base.tolist(), dtype="bfloat16"),
    ]
    found = same_behaviour(manifests, SETTINGS["same_behaviour"])
    assert {name: [other for other, _ in others] for name, others in found.items()} == {"a": ["b"], "b": ["a"]}
    assert found["a"][0][1] == pytest.approx(3e-5, rel=1e-3)  # d ran in another dtype: never compared


# ------------------------------------------------------------------------------------------------ out of place


@pytest.mark.parametrize(
    "values, fit",
    [
        ([5, 4, 3], [5, 4, 3]),
        ([5, 4, 4, 3], [5, 4, 4, 3]),  # ties are non-increasing
        ([5, 2, 4, 3], [5, 3, 3, 3]),  # the pool (2, 4) at its median 3, then 3 joins it
        ([3, 4], [3.5, 3.5]),  # two that disagree, nothing else to tell which is right
        ([], []),
    ],
)
def test_the_non_increasing_fit_pools_adjacent_violators_at_their_median(values, fit):
    np.testing.assert_allclose(non_increasing_fit(values), fit)


def test_out_of_place_at_the_end_and_at_the_start():
    # bloom-560m-intermediate: perplexity ~50 at 500000, 320,322 at 600000 (its discussion #2)
    losses = np.exp([6.9, 4.8, 4.2, 4.0, 3.95, 3.9, 12.68])
    fit, flagged = out_of_place(losses, 0.25)
    assert flagged.tolist() == [False] * 6 + [True] and fit[-1] == pytest.approx(np.exp(3.9))  # at most its predecessor
    # pythia#205: step0 serving the final model, far below the losses after it
    fit, flagged = out_of_place(np.exp([0.69, 1.72, 1.61, 1.1, 0.7]), 0.25)
    assert flagged.tolist() == [True, False, False, False, False] and fit[0] == pytest.approx(np.exp(1.72))


def test_two_defects_in_a_steep_stretch_flag_only_themselves():
    """The losses of tests/test_hub_checkpoints.py's trained series: the final model as step2 and a broken step30. One
    fit pools step2..step30 into one flat stretch and flags step20 with them; trimming the worst first does not."""
    losses = [5.568, 5.568, 2.897, 5.296, 4.710, 3.636, 16.489, 2.988, 2.988, 2.928, 2.897]
    assert np.abs(np.log(losses[5] / np.median(losses[2:7]))) > 0.25  # what one fit would flag
    fit, flagged = out_of_place(losses, 0.25)
    assert np.flatnonzero(flagged).tolist() == [2, 6]
    np.testing.assert_allclose(fit[[2, 6]], [5.296, 3.636])  # the nearest values a falling series allows


def test_a_contradicting_pair_is_decided_by_its_neighbours_or_not_at_all():
    fit, flagged = out_of_place(np.exp([3.0, 2.5, 2.0, 2.9, 1.5, 1.4]), 0.25)  # the pair 2.0, 2.9 pools at 2.45
    assert flagged.tolist() == [False, False, False, True, False, False] and fit[3] == pytest.approx(np.exp(2.5))
    fit, flagged = out_of_place(np.exp([1.0, 2.0]), 0.25)  # nothing to decide by
    assert flagged.tolist() == [True, True]
    fit, flagged = out_of_place(np.exp([2.0, 1.3, 1.7, 1.0]), 0.25)  # 0.4 apart: within noise of their midpoint
    assert not flagged.any()


# ------------------------------------------------------------------------------------------- holds its own step


def test_the_standard_error_of_a_loss_comes_from_its_sum_of_squares():
    losses = np.random.default_rng(0).gamma(2.0, 1.5, size=512)  # per-token losses, skewed as real ones are
    assert standard_error(512, losses.sum(), np.square(losses).sum()) == pytest.approx(
        np.std(losses, ddof=1) / np.sqrt(512), rel=1e-9
    )
    assert np.isnan(standard_error(512, losses.sum(), None))  # a manifest written before sums of squares were kept
    assert np.isnan(standard_error(1, 3.0, 9.0))


def neighbours(*rows):
    return pd.DataFrame(rows, columns=["step", "loss", "loss_se"])


def test_a_member_is_placed_between_its_neighbours_by_its_step_s_share_of_their_log_distance():
    # ln(1 + step): 0, 1, 3 -> step e - 1 lies at a third of the way from step 0 to step e^3 - 1
    around = neighbours((0, np.exp(3.0), 0.0), (np.exp(3) - 1, np.exp(0.0), 0.0))
    step = round(np.e - 1, 6)
    expected = np.exp(3.0 - 3.0 * np.log1p(step) / 3.0)
    se = 0.01 * expected  # 0.01 in ln(loss), the neighbours exact: a tolerance of 3 x 0.01
    assert place(step, expected * np.exp(0.029), se, around, 3).verdict == FITS
    assert place(step, expected * np.exp(-0.031), se, around, 3).verdict == MISFITS
    placed = place(step, expected, se, around, 3)
    assert placed.expected == pytest.approx(expected) and placed.tolerance == pytest.approx(0.03, rel=1e-6)
    # each neighbour's error enters in proportion to its weight: 2/3 of the first's, 1/3 of the second's
    around = neighbours((0, np.exp(3.0), 0.03 * np.exp(3.0)), (np.exp(3) - 1, 1.0, 0.06))
    assert place(step, expected, 0.0, around, 1).tolerance == pytest.approx(np.hypot(2 / 3 * 0.03, 1 / 3 * 0.06))


def test_past_either_end_of_its_neighbours_a_member_is_bounded_on_one_side():
    around = neighbours((10, 3.0, 0.0), (20, 2.5, 0.0))
    assert place(30, 1.0, 0.0, around, 3).verdict == FITS  # the loss may have fallen any amount since
    assert place(30, 2.57, 0.0257, around, 3).verdict == FITS  # 0.028 above its last neighbour's: within 3 x 0.01
    assert place(30, 2.6, 0.026, around, 3).verdict == MISFITS  # 0.039 above
    placed = place(5, 2.9, 0.029, around, 3)  # before the first: its loss at least the first's, up to noise
    assert (placed.verdict, placed.relation, placed.expected) == (MISFITS, ">=", pytest.approx(3.0))
    assert place(5, 9.0, 0.09, around, 3).verdict == FITS
    assert place(5, 3.0, 0.03, neighbours(), 3).verdict == UNKNOWN


# ------------------------------------------------------------------------ upstream's defects in the demo's series

BROKEN_EXCESS = np.log(320_322 / 250_880)  # bloom-560m-intermediate's global_step600000 above ln V (its discussion #2)


def demo_series(serves=None, broken=(), model="demo-pythia"):
    """Pins and manifests of the demo's series as measured, each checkpoint its own model, with upstream's defects
    spliced in: `serves` maps a checkpoint to the one whose files it serves instead (their digest, fingerprint and
    measured loss); a `broken` checkpoint's loss lies as far above ln V as bloom-560m's broken branch's, its
    per-token spread kept."""
    records, serves = DEMO[model], serves or {}
    pins, manifests = [], []
    for seed, (name, record) in enumerate(records.items()):
        served = serves.get(name, name)
        loss = {key: records[served][key] for key in ("kind", "value", "tokens", "sum_squares", "vocab_size")}
        if name in broken:
            value = np.log(loss["vocab_size"]) + BROKEN_EXCESS
            loss |= {
                "value": value,
                "sum_squares": loss["sum_squares"] + loss["tokens"] * (value**2 - loss["value"] ** 2),
            }
        digest = f"broken {name}" if name in broken else served
        pins.append(pin(name, record["step"], digest, model=model))
        manifests.append(
            {
                "checkpoint": name,
                "step": record["step"],
                "dtype": "float32",
                "loss": loss,
                "fingerprint": {"layers": layers(list(records).index(served) + 100 * (name in broken))},
            }
        )
    return pins, manifests


def demo_health(settings=DEMO_HEALTH, **defects) -> pd.DataFrame:
    return assess(*demo_series(**defects), settings).set_index("checkpoint")


def unflagged(health: pd.DataFrame) -> list[str]:
    return health.index[health["health"].isna() & health["drawn_as"].isna()].tolist()


@pytest.mark.parametrize("model", ["demo-pythia", "demo-bert"])
@pytest.mark.parametrize("under", [["step16"], ["step100"], ["step16", "step100"]])
def test_the_final_model_under_a_mid_series_branch_is_flagged_and_the_genuine_final_kept(model, under):
    """The final model re-published under a mid-series branch (pythia#205's round steps, bloom#267's pairs): its
    loss, the lowest of the series, fits only the last step."""
    health = demo_health(serves={name: "step300" for name in under}, model=model)
    for name in under:
        assert "same model as" in health.loc[name, "health"] and "step300" in health.loc[name, "health"]
    assert pd.isna(health.loc["step300", "health"]) and pd.isna(health.loc["step300", "drawn_as"])
    assert unflagged(health) == [name for name in DEMO[model] if name not in under]


def test_a_flat_run_of_identical_round_steps_is_left_out_whole():
    """pythia#205's round steps serving the final model, as pythia-2.8b's .bin files may: past the last checkpoint
    of their own nothing tells which of them, if any, holds its step."""
    health = demo_health(serves={"step100": "step300", "step200": "step300"})
    for name, others in [
        ("step100", "step200, step300"),
        ("step200", "step100, step300"),
        ("step300", "step100, step200"),
    ]:
        assert health.loc[name, "health"].startswith(f"same model as {others}, and the losses cannot tell")
    assert unflagged(health) == ["step0", "step1", "step2", "step4", "step8", "step16"]


@pytest.mark.parametrize("model", ["demo-pythia", "demo-bert"])
def test_a_broken_first_and_a_broken_last_checkpoint_are_flagged(model):
    """Broken as bloom-560m's global_step600000 is, 0.24 nats above ln V: at the last step the series' fit sees it
    too, at the first only the bound does (a first loss may stand any height above the next)."""
    health = demo_health(broken=("step0", "step300"), model=model)
    bound = np.log(DEMO[model]["step0"]["vocab_size"]) + DEMO_HEALTH["uniform_margin"]
    for name in ["step0", "step300"]:
        assert health.loc[name, "health"].startswith(
            f"loss {health.loc[name, 'loss']:.3g} above ln V + 0.1 = {bound:.3g}"
        )
    assert unflagged(health) == [name for name in DEMO[model] if name not in ("step0", "step300")]


def test_step0_and_step1_one_model_by_design_are_kept_once():
    """Pythia's step1 is its step0 (the first update at learning rate 0): one model, drawn once at step0. Outside
    `identical_by_design` the same pair is one the losses cannot resolve: nothing precedes it."""
    health = demo_health(serves={"step1": "step0", "step2": "step0"})
    assert health.loc[["step0", "step1", "step2"], "drawn_as"].fillna("-").tolist() == ["-", "step0", "step0"]
    assert unflagged(health) == ["step0", "step4", "step8", "step16", "step100", "step200", "step300"]
    undecided = demo_health({**DEMO_HEALTH, "identical_by_design": []}, serves={"step1": "step0"})
    assert undecided.loc["step0", "health"].startswith("same model as step1, and the losses cannot tell")
    assert unflagged(undecided) == ["step2", "step4", "step8", "step16", "step100", "step200", "step300"]


# ------------------------------------------------------------------------------------------------- verdicts


def test_identical_groups_are_decided_by_their_losses():
    """A decoder series with every case: step0 = step1 by design, the final model re-published under an early
    branch (step10), a broken late branch (random weights, step30), and a re-serialised copy of step20 under step25
    (bytes differ, behaviour does not), in a stretch steep enough to tell them apart."""
    steps = {
        "step0": (0, "I", 5.55, 0),
        "step1": (1, "I", 5.55, 0),
        "step2": (2, "B", 5.0, 2),
        "step10": (10, "F", 2.0, 40),
        "step20": (20, "C", 3.0, 20),
        "step25": (25, "D", 3.0, 20),
        "step30": (30, "R", 5.5, 30),
        "step35": (35, "E", 2.2, 35),
        "step40": (40, "F", 2.0, 40),
    }
    pins = [pin(name, step, digest) for name, (step, digest, _, _) in steps.items()]
    manifests = [manifest(name, step, loss, layers(seed)) for name, (step, _, loss, seed) in steps.items()]
    health = assess(pins, manifests, SETTINGS)
    assert list(health.columns) == COLUMNS and health["step"].is_monotonic_increasing
    health = health.set_index("checkpoint")
    assert health.loc["step1", "drawn_as"] == "step0" and pd.isna(health.loc["step0", "health"])
    assert health.loc["step1", "identical_to"] == "step0"
    assert health.loc["step10", "health"].startswith("out of place: loss 2 where its series runs at 3")
    assert health.loc["step10", "health"].endswith("same model as step40")
    assert pd.isna(health.loc["step40", "health"]) and pd.isna(health.loc["step40", "drawn_as"])  # the genuine one
    assert health.loc["step30", "health"].startswith("out of place: loss 5.5")
    assert health.loc["step25", "behaves_like"] == "step20 (0.0e+00)"

    # step2 (5.0) and step35 (2.2) put step20's loss and step25's at exp(ln 5 + w ln(2.2 / 5)), w = ln((1 + step) / 3)
    # / ln 12: 2.63 and 2.45. 3.0 lies 0.13 from the first, 0.20 from the second, each within or beyond 3 standard
    # errors of ln(loss) combined: 0.17, the SPREAD of 2.5 nats over 512 tokens at 3.0, 5.0 and 2.2
    def between(step):
        return np.exp(np.log(5.0) + np.log((1 + step) / 3) / np.log(12) * np.log(2.2 / 5.0))

    np.testing.assert_allclose(health.loc[["step20", "step25"], "neighbours_loss"], [between(20), between(25)])
    se = SPREAD / np.sqrt(512)
    w = np.log(26 / 3) / np.log(12)
    tolerance = 3 * np.sqrt((se / 3.0) ** 2 + ((1 - w) * se / 5.0) ** 2 + (w * se / 2.2) ** 2)
    assert health.loc["step25", "health"] == (
        "another step's model: same model as step20, of which step20 holds its own step; here loss 3 where its "
        f"neighbours put step 25's at ~ {between(25):.3g} (tolerance {tolerance:.2g} in ln loss)"
    )
    assert unflagged(health) == ["step0", "step2", "step20", "step35", "step40"]


def test_rules_that_cannot_run_say_so():
    one = assess([pin("step5", 5, "A")], [manifest("step5", 5, 9.0, layers(0))], SETTINGS).set_index("checkpoint")
    assert one.loc["step5", "health_note"].startswith("the only training checkpoint with a loss: no series")
    assert pd.isna(one.loc["step5", "health"])  # 9.0 > ln 256: no series, no bound
    pins = [pin("step1000", 1000, "A"), pin("step2000", 2000, "B")]
    records = [manifest(name, step, 3.0, layers(step)) for name, step in (("step1000", 1000), ("step2000", 2000))]
    for record in records:
        del record["loss"]["vocab_size"]  # a manifest written before it was recorded
    unbounded = assess(pins, records, SETTINGS).set_index("checkpoint")
    assert unbounded["health_note"].tolist() == ["no vocab_size recorded with the loss: the ln V bound is skipped"] * 2


def test_without_a_loss_every_member_of_a_group_is_left_out_and_a_mixture_always_is():
    pins = [
        pin("a", 0, "X"),
        pin("b", 1, "X"),
        pin("c", 2, "Y", weights={"1.bin": "s", "2.bin": "c"}),
        pin("d", 3, "Z", weights={"1.bin": "s", "2.bin": "d"}),
    ]
    manifests = [manifest(name, step, None, layers(step)) for name, step in zip("abcd", range(4))]
    health = assess(pins, manifests, SETTINGS).set_index("checkpoint")["health"]
    assert health["a"] == "same model as b, and no loss to tell which is genuine"
    assert health["c"] == "a mixture: shares 1.bin=d" and health["d"] == "a mixture: shares 1.bin=c"


def test_figures_draw_a_group_once_and_leave_out_or_mark_the_flagged():
    rows = pd.DataFrame(
        {
            "model": "m",
            "checkpoint": ["step0", "step1", "step2", "step3"],
            "step": [0, 1, 2, 3],
            "health": [None, None, "out of place: broken", None],
            "drawn_as": [None, "step0", None, None],
        }
    )
    drawn, noted = apply_health(rows, "omit")
    assert drawn["label"].tolist() == ["step0 (= step1)", "step3"]
    assert noted.fillna("-")[["checkpoint", "reason", "drawn_as"]].values.tolist() == [
        ["step1", "-", "step0"],
        ["step2", "out of place: broken", "-"],
    ]
    marked, _ = apply_health(rows, "mark")
    assert marked["checkpoint"].tolist() == ["step0", "step2", "step3"] and marked["flagged"].tolist() == [
        False,
        True,
        False,
    ]
    with pytest.raises(ValueError, match="set `figures.flagged: mark`"):
        apply_health(rows.assign(health="broken"), "omit")
