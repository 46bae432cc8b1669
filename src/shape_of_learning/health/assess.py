"""The health of one model's checkpoints, in one table: their loss, their duplicates, whether each is broken, keeps
its place in its series or holds its own step, and the verdict every table and figure follows.

Every rule decides by a margin in standard errors of the loss (`health.standard_errors`, at least
`health.loss_floor`) or by a stated floor (the fingerprints' re-save floor), and where the data cannot decide it
leaves the checkpoint out and says why; it never draws a checkpoint at a step it may not hold. In order:

1. broken (`broken`): a loss that is not a number, another architecture than the series', a loss above the ln V
   bound beyond its noise. A broken checkpoint is left out, duplicate or not; a checkpoint sharing only some files
   with another is left out too: a mixture of two steps is neither's model;
2. groups: checkpoints that are one model, by identical files or by fingerprints within the re-save floor
   (`duplicates`);
3. the order of the losses (`loss_order`), a group counted once at the span of its steps: a checkpoint (or group)
   out of place is broken; one the losses cannot tell from the one it conflicts with is left out with it;
4. each group in order resolves to its one member that can hold its step against the other models in order
   (`own_step`), or is left out whole; except the series' first checkpoints that are one model by design (`health.identical_by_design`,
   Pythia's step0 = step1 = step2), drawn once at the first of them (`drawn_as`).

Every checkpoint keeps its row, its loss and the evidence whatever its verdict: the unfiltered series.
"""

import pandas as pd

from shape_of_learning.health import broken, own_step
from shape_of_learning.health.duplicates import identical_files, same_behaviour
from shape_of_learning.health.loss_order import IN_ORDER, OUT_OF_PLACE, UNDECIDED, Errors, place

VERDICT_COLUMNS = ["health", "drawn_as"]
IN_ORDER_COLUMNS = [
    "checkpoint",
    "head",
    "first",
    "last",
    "loss",
]  # a model in order: the neighbours of a group  # what the metrics tables carry, and every figure follows
COLUMNS = [
    "model",
    "checkpoint",
    "step",
    "loss",
    "loss_se",
    "loss_kind",
    "loss_tokens",
    "vocab_size",
    "loss_note",
    "shape",
    "identical_to",
    "shared_files",
    "behaves_like",
    "behaviour_tolerance",
    "loss_order",
    "broken",
    "health_note",
    *VERDICT_COLUMNS,
]


def assess(pins: list[dict], manifests: list[dict], settings: dict) -> pd.DataFrame:
    """One row per checkpoint of one model (COLUMNS), in step order. `settings` is the config's `health` section
    (workflow/schemas/config.schema.yaml: standard_errors, loss_floor, uniform_margin, warmup_steps,
    identical_by_design, same_behaviour)."""
    by_name = {m["checkpoint"]: m for m in manifests}
    rows = pd.DataFrame(
        [
            {
                "model": p["model"],
                "checkpoint": p["checkpoint"],
                "step": p["step"],
                **_loss(by_name[p["checkpoint"]]),
                "shape": broken.shape(by_name[p["checkpoint"]]),
            }
            for p in pins
        ]
    ).sort_values("step", kind="stable")
    rows = rows.reset_index(drop=True)
    files = identical_files(pins)
    behaviour = same_behaviour(manifests, settings["same_behaviour"])
    rows["identical_to"] = [", ".join(files.get(c, {}).get("identical_to", [])) or None for c in rows["checkpoint"]]
    rows["shared_files"] = [
        "; ".join(f"{file}={other}" for file, other in files.get(c, {}).get("shared_files", {}).items()) or None
        for c in rows["checkpoint"]
    ]
    rows["behaves_like"] = [
        ", ".join(f"{other} ({distance:.1e})" for other, distance in behaviour.links.get(c, [])) or None
        for c in rows["checkpoint"]
    ]
    rows["behaviour_tolerance"] = rows["checkpoint"].map(behaviour.tolerance)
    judged = broken.judge(rows, settings)
    rows["broken"] = judged["broken"]
    notes = [judged["note"], rows["checkpoint"].map(behaviour.notes)]
    groups = _groups(rows["checkpoint"], files, behaviour.links)
    errors = _errors(rows, by_name)
    rows["loss_order"], order_notes, undecided, in_order = _order(rows, groups, errors, settings)
    rows["health_note"] = _joined([*notes, order_notes])
    decided = _decide_groups(rows, groups, in_order, errors, settings) | undecided
    verdicts = [_verdict(row, groups[row.checkpoint], decided) for row in rows.itertuples()]
    rows["health"], rows["drawn_as"] = zip(*verdicts) if verdicts else ([], [])
    return rows[COLUMNS]


def _loss(manifest: dict) -> dict:
    loss = manifest.get("loss") or {}
    tokens, value = loss.get("tokens", 0), loss.get("value")
    se = own_step.standard_error(tokens, value * tokens, loss.get("sum_squares")) if value is not None else None
    return {
        "loss": value,
        "loss_se": se,
        "loss_kind": loss.get("kind"),
        "loss_tokens": tokens,
        "vocab_size": loss.get("vocab_size"),
        "loss_note": loss.get("reason") or None,
    }


def _errors(rows: pd.DataFrame, manifests: dict[str, dict]) -> Errors:
    """The standard errors of differences between the losses the order reads: the training checkpoints not broken,
    with a loss and its standard error."""
    judged = rows[(rows["step"] >= 0) & rows["broken"].isna() & rows["loss"].notna() & rows["loss_se"].notna()]
    records = {}
    for row in judged.itertuples():
        loss = manifests[row.checkpoint]["loss"]
        records[row.checkpoint] = (row.loss, row.loss_se, loss.get("per_token"), loss.get("targets"))
    return Errors(records)


def _joined(columns: list[pd.Series]) -> list[str | None]:
    """Row by row, the non-empty notes of `columns` joined."""
    return ["; ".join(n for n in found if isinstance(n, str) and n) or None for found in zip(*columns)]


def _groups(names, files: dict, behaviour: dict) -> dict[str, list[str]]:
    """checkpoint -> the checkpoints that are the same model as it (itself included), joined through identical files
    and same fingerprints, in step order."""
    order = list(names)
    group_of = {name: {name} for name in order}
    links = [(name, other) for name, flags in files.items() for other in flags["identical_to"]]
    links += [(name, other) for name, others in behaviour.items() for other, _ in others]
    for name, other in links:
        merged = group_of[name] | group_of[other]
        for member in merged:
            group_of[member] = merged
    return {name: sorted(group_of[name], key=order.index) for name in order}


def _units(rows: pd.DataFrame, groups: dict[str, list[str]]) -> list[pd.DataFrame]:
    """What the order judges: each training checkpoint that is its own model, and each group of checkpoints that are
    one model, as the rows of its training members, where none is broken or a mixture and every one has a loss and
    its standard error."""
    training = rows[rows["step"] >= 0]
    judged = (
        training["broken"].isna() & training["shared_files"].isna() & training[["loss", "loss_se"]].notna().all(axis=1)
    )
    group_of = training["checkpoint"].map(lambda name: groups[name][0])  # a group named by its first member
    return [members for _, members in training.groupby(group_of, sort=False) if judged[members.index].all()]


def _order(rows: pd.DataFrame, groups: dict, errors: Errors, settings: dict) -> tuple:
    """Each checkpoint's place in the order of its series' losses (`loss_order`; None where not judged), a group
    judged as one model at the span of its steps; a note where a checkpoint cannot be judged; the verdicts of the
    undecided (checkpoint -> (health, None)); and the models in order (`IN_ORDER_COLUMNS`: a group's label, its first
    member, the first and last of its steps, its loss). A checkpoint out of place is marked broken in `rows`."""
    places = pd.Series(None, index=rows.index, dtype=object)
    notes = pd.Series(None, index=rows.index, dtype=object)
    no_se = (rows["step"] >= 0) & rows["loss"].notna() & rows["loss_se"].isna() & rows["broken"].isna()
    notes[no_se] = (
        "no standard error of the loss (a manifest written before extraction recorded `sum_squares`): its place in "
        "the series cannot be judged; rerun its extraction (`snakemake -R extract_hidden_states`)"
    )
    units = _units(rows, groups)
    if len(units) < 2:
        for unit in units:
            notes[unit.index] = "the only model of its series with a loss to judge: judged by its files and fingerprint"
        return places, notes, {}, pd.DataFrame(columns=IN_ORDER_COLUMNS)
    heads = [unit["checkpoint"].iloc[0] for unit in units]  # a group's members share its first member's loss
    order = place(
        [unit["loss"].iloc[0] for unit in units],
        errors.tolerance(heads, heads, settings["standard_errors"], settings["loss_floor"]),
        [unit["step"].tolist() for unit in units],
        [" = ".join(unit["checkpoint"]) for unit in units],
    )
    undecided = {}
    for unit, where, evidence in zip(units, order.places, order.evidence):
        places[unit.index] = where
        if where == OUT_OF_PLACE:
            rows.loc[unit.index, "broken"] = f"out of place: {evidence}"
        for name in unit["checkpoint"] if where == UNDECIDED else ():
            others = ", ".join(other for other in unit["checkpoint"] if other != name)
            undecided[name] = (
                (f"same model as {others}; " if others else "")
                + f"out of order: {evidence}; the losses cannot tell which is not its step's model",
                None,
            )
    in_order = [
        (
            " = ".join(unit["checkpoint"]),
            unit["checkpoint"].iloc[0],
            unit["step"].min(),
            unit["step"].max(),
            unit["loss"].iloc[0],
        )
        for unit, where in zip(units, order.places)
        if where == IN_ORDER
    ]
    return places, notes, undecided, pd.DataFrame(in_order, columns=IN_ORDER_COLUMNS).sort_values("first")


def _decide_groups(
    rows: pd.DataFrame, groups: dict[str, list[str]], in_order: pd.DataFrame, errors: Errors, settings: dict
) -> dict[str, tuple]:
    """checkpoint -> (health, drawn_as) for every member of a group of more than one that the order leaves in order
    or cannot judge (`own_step.resolve`), against the other models in order (`in_order`)."""
    series = rows.loc[rows["step"] >= 0, "checkpoint"].tolist()
    decided = {}
    for group in dict.fromkeys(tuple(group) for group in groups.values() if len(group) > 1):
        members = rows[rows["checkpoint"].isin(group)]
        if members["loss_order"].isin([OUT_OF_PLACE, UNDECIDED]).any():
            continue  # the order's verdict
        if members["loss"].isna().any():
            reason = "and no loss to tell which is genuine"
        elif members["loss_se"].isna().any():
            reason = (
                "and no standard error of the loss to tell which holds its own step (manifests written "
                "before extraction recorded `sum_squares`: rerun their extraction, "
                "`snakemake -R extract_hidden_states`)"
            )
        else:
            decided |= own_step.resolve(
                members,
                series,
                in_order[~in_order["head"].isin(group)],
                settings["identical_by_design"],
                lambda name, others: errors.tolerance(
                    [name], others, settings["standard_errors"], settings["loss_floor"]
                )[0],
            )
            continue
        decided |= {
            name: (f"same model as {', '.join(o for o in group if o != name)}, {reason}", None) for name in group
        }
    return decided


def _verdict(row, group: list[str], decided: dict) -> tuple[str | None, str | None]:
    """(health, drawn_as) of one checkpoint: why it is not drawn as its step's model, or which member of its group it
    is drawn as."""
    if pd.notna(row.broken):
        return row.broken + (
            f"; same model as {', '.join(o for o in group if o != row.checkpoint)}" if len(group) > 1 else ""
        ), None
    if pd.notna(row.shared_files):
        return f"a mixture: shares {row.shared_files}", None
    return decided.get(row.checkpoint, (None, None))
