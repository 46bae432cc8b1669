"""Checkpoint health, on series with known answers: byte and behavioural duplicates, the out-of-place rule, and the
verdicts the tables and figures follow."""

import numpy as np
import pandas as pd
import pytest

from shape_of_learning.figures.rows import apply_health
from shape_of_learning.health.assess import COLUMNS, assess
from shape_of_learning.health.duplicates import fingerprint_distance, identical_files, same_behaviour
from shape_of_learning.health.position import non_increasing_fit, out_of_place

SETTINGS = {"out_of_place": 0.25, "same_behaviour": {"float32": 1e-4, "bfloat16": 4e-3, "float16": 1e-3}}


def pin(checkpoint, step, digest, model="m", weights=None):
    return {"model": model, "checkpoint": checkpoint, "step": step, "weights_digest": digest,
            "weights": weights or {"model.safetensors": digest}}


def manifest(checkpoint, step, loss, fingerprint, dtype="float32", kind="next-token"):
    return {"checkpoint": checkpoint, "step": step, "dtype": dtype, "fingerprint": {"layers": fingerprint},
            "loss": {"kind": kind if loss is not None else None, "value": loss, "tokens": 4096 if loss else 0}}


def layers(seed, scale=1.0):
    """A fingerprint of 3 layers x 8 numbers, distinct for each seed."""
    return (np.random.default_rng(seed).normal(size=(3, 8)) * scale).tolist()


# ------------------------------------------------------------------------------------------------ byte duplicates

def test_identical_files_names_every_other_member_earliest_first():
    pins = [pin("step3", 3, "A"), pin("step0", 0, "A"), pin("step2", 2, "B"), pin("step1", 1, "A")]
    assert identical_files(pins) == {"step0": {"identical_to": ["step1", "step3"], "shared_files": {}},
                                     "step1": {"identical_to": ["step0", "step3"], "shared_files": {}},
                                     "step3": {"identical_to": ["step0", "step1"], "shared_files": {}}}
    with pytest.raises(ValueError, match=r"one model; got \['m', 'other'\]"):
        identical_files([*pins, pin("step0", 0, "A", model="other")])


def test_a_checkpoint_sharing_one_shard_is_a_partial_duplicate():
    def sharded(name, step, first, second):
        return pin(name, step, first + second, model="pythia-12b",
                   weights={"pytorch_model-00001-of-00002.bin": first, "pytorch_model-00002-of-00002.bin": second})

    # EleutherAI/pythia#206: step50000 serves the final model's first shard, its second shard is its own
    pins = [sharded("step49000", 49000, "a", "b"), sharded("step50000", 50000, "f", "c"),
            sharded("step143000", 143000, "f", "g")]
    assert identical_files(pins) == {
        "step50000": {"identical_to": [], "shared_files": {"pytorch_model-00001-of-00002.bin": "step143000"}},
        "step143000": {"identical_to": [], "shared_files": {"pytorch_model-00001-of-00002.bin": "step50000"}}}


# ------------------------------------------------------------------------------------------ behavioural duplicates

def test_fingerprints_within_the_dtype_s_tolerance_are_the_same_behaviour():
    base = np.array(layers(0))
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": base.tolist()}) == 0
    nudged = base.copy()
    nudged[2] *= 1 + 3e-5  # one layer off by 3e-5, relative
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": nudged.tolist()}) == pytest.approx(3e-5, rel=1e-3)
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": base[:2].tolist()}) == float("inf")
    manifests = [manifest("a", 0, 5.0, base.tolist()), manifest("b", 1, 5.0, nudged.tolist()),
                 manifest("c", 2, 4.0, layers(1)), manifest("d", 3, 4.0, base.tolist(), dtype="bfloat16")]
    found = same_behaviour(manifests, SETTINGS["same_behaviour"])
    assert {name: [other for other, _ in others] for name, others in found.items()} == {"a": ["b"], "b": ["a"]}
    assert found["a"][0][1] == pytest.approx(3e-5, rel=1e-3)  # d ran in another dtype: never compared


# ------------------------------------------------------------------------------------------------ out of place

@pytest.mark.parametrize("values, fit", [
    ([5, 4, 3], [5, 4, 3]),
    ([5, 4, 4, 3], [5, 4, 4, 3]),  # ties are non-increasing
    ([5, 2, 4, 3], [5, 3, 3, 3]),  # the pool (2, 4) at its median 3, then 3 joins it
    ([3, 4], [3.5, 3.5]),  # two that disagree, nothing else to tell which is right
    ([], []),
])
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


# ------------------------------------------------------------------------------------------------- verdicts

def test_identical_groups_are_decided_by_their_losses():
    """A decoder series with every case: step0 = step1 by design (losses fit), the final model re-published under an
    early branch (step10), a broken late branch (random weights, step30), and a re-serialised copy of step20 under
    step25 (bytes differ, behaviour does not)."""
    steps = {"step0": (0, "I", 5.55, 0), "step1": (1, "I", 5.55, 0), "step2": (2, "B", 5.0, 2),
             "step10": (10, "F", 2.0, 40), "step20": (20, "C", 3.0, 20), "step25": (25, "D", 3.0, 20),
             "step30": (30, "R", 5.5, 30), "step40": (40, "F", 2.0, 40)}
    pins = [pin(name, step, digest) for name, (step, digest, _, _) in steps.items()]
    manifests = [manifest(name, step, loss, layers(seed)) for name, (step, _, loss, seed) in steps.items()]
    health = assess(pins, manifests, SETTINGS)
    assert list(health.columns) == COLUMNS and health["step"].is_monotonic_increasing
    health = health.set_index("checkpoint")
    assert health.loc["step1", "drawn_as"] == "step0" and pd.isna(health.loc["step0", "health"])
    assert health.loc["step1", "identical_to"] == "step0"
    assert health.loc["step10", "health"].startswith("out of place: loss 2 where its series runs at 3")
    assert "same model as step40" in health.loc["step10", "health"]
    assert pd.isna(health.loc["step40", "health"]) and pd.isna(health.loc["step40", "drawn_as"])  # the genuine one
    assert health.loc["step30", "health"].startswith("out of place: loss 5.5")
    assert health.loc["step25", "behaves_like"] == "step20 (0.0e+00)" and health.loc["step25", "drawn_as"] == "step20"
    unflagged = health[health["health"].isna() & health["drawn_as"].isna()].index.tolist()
    assert unflagged == ["step0", "step2", "step20", "step40"]


def test_without_a_loss_every_member_of_a_group_is_left_out_and_a_mixture_always_is():
    pins = [pin("a", 0, "X"), pin("b", 1, "X"), pin("c", 2, "Y", weights={"1.bin": "s", "2.bin": "c"}),
            pin("d", 3, "Z", weights={"1.bin": "s", "2.bin": "d"})]
    manifests = [manifest(name, step, None, layers(step)) for name, step in zip("abcd", range(4))]
    health = assess(pins, manifests, SETTINGS).set_index("checkpoint")["health"]
    assert health["a"] == "same model as b, and no loss to tell which is genuine"
    assert health["c"] == "a mixture: shares 1.bin=d" and health["d"] == "a mixture: shares 1.bin=c"


def test_figures_draw_a_group_once_and_leave_out_or_mark_the_flagged():
    rows = pd.DataFrame({"model": "m", "checkpoint": ["step0", "step1", "step2", "step3"], "step": [0, 1, 2, 3],
                         "health": [None, None, "out of place: broken", None],
                         "drawn_as": [None, "step0", None, None]})
    drawn, noted = apply_health(rows, "omit")
    assert drawn["label"].tolist() == ["step0 (= step1)", "step3"]
    assert noted.fillna("-")[["checkpoint", "reason", "drawn_as"]].values.tolist() == [
        ["step1", "-", "step0"], ["step2", "out of place: broken", "-"]]
    marked, _ = apply_health(rows, "mark")
    assert marked["checkpoint"].tolist() == ["step0", "step2", "step3"] and marked["flagged"].tolist() == [
        False, True, False]
    with pytest.raises(ValueError, match="set `figures.flagged: mark`"):
        apply_health(rows.assign(health="broken"), "omit")
