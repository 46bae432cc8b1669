"""The health of one model's checkpoints, in one table: their loss, their duplicates, whether each is broken or
holds its own step, and the verdict every table and figure follows.

Two rules, kept apart. Whether a checkpoint is broken (`broken`, lenient): its loss out of place in its series or
above a uniform guess's; a broken checkpoint is left out, duplicate or not. Which member of a group of checkpoints
that are one model (identical files, or the same fingerprint) holds its own step (`own_step`, tight): the one whose
loss fits its step among its neighbours outside the group, within a few standard errors; the others hold another
step's model and are left out. Where the losses cannot tell (a flat stretch, no neighbours, no loss), every member
is left out, except the series' first checkpoints that are one model by design (`health.identical_by_design`,
Pythia's step0 = step1 = step2), drawn once at the first of them (`drawn_as`). A checkpoint sharing only some files
with another is left out: a mixture of two steps is neither's model.

Every checkpoint keeps its row, its loss and the evidence whatever its verdict: the unfiltered series.
"""

import pandas as pd

from shape_of_learning.health import broken, own_step
from shape_of_learning.health.duplicates import identical_files, same_behaviour

VERDICT_COLUMNS = ["health", "drawn_as"]  # what the metrics tables carry, and every figure follows
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
    "loss_fit",
    "neighbours_loss",
    "identical_to",
    "shared_files",
    "behaves_like",
    "out_of_place",
    "broken",
    "health_note",
    *VERDICT_COLUMNS,
]


def assess(pins: list[dict], manifests: list[dict], settings: dict) -> pd.DataFrame:
    """One row per checkpoint of one model (COLUMNS), in step order. `settings` is the config's `health` section
    (workflow/schemas/config.schema.yaml: out_of_place, uniform_margin, warmup_steps, own_step_standard_errors,
    identical_by_design, same_behaviour)."""
    by_name = {m["checkpoint"]: m for m in manifests}
    rows = pd.DataFrame(
        [
            {"model": p["model"], "checkpoint": p["checkpoint"], "step": p["step"], **_loss(by_name[p["checkpoint"]])}
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
        ", ".join(f"{other} ({distance:.1e})" for other, distance in behaviour.get(c, [])) or None
        for c in rows["checkpoint"]
    ]
    judged = broken.judge(rows, settings)
    rows[["loss_fit", "out_of_place", "broken", "health_note"]] = judged[["loss_fit", "out_of_place", "broken", "note"]]
    groups = _groups(rows["checkpoint"], files, behaviour)
    decided = _decide_groups(rows, groups, settings)
    rows["neighbours_loss"] = [decided.get(name, (None, None, float("nan")))[2] for name in rows["checkpoint"]]
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


def _decide_groups(rows: pd.DataFrame, groups: dict[str, list[str]], settings: dict) -> dict[str, tuple]:
    """checkpoint -> (health, drawn_as, neighbours' loss at its step) for every member of a group of more than one
    (`own_step.resolve`), judged against the checkpoints outside every group that are neither broken nor a
    mixture (a group of one model by design counts once, by its first)."""
    series = rows.loc[rows["step"] >= 0, "checkpoint"].tolist()
    by_design = settings["identical_by_design"]
    distinct = {tuple(group) for group in groups.values() if len(group) > 1}
    stand_alone = {
        group[0]
        for group in groups.values()
        if len(group) == 1 or own_step.by_design_unit(group, series, by_design) == group
    }
    neighbours = rows[
        rows["checkpoint"].isin(stand_alone)
        & rows["loss"].notna()
        & (rows["step"] >= 0)
        & rows["broken"].isna()
        & rows["shared_files"].isna()
    ]
    decided = {}
    for group in map(list, distinct):
        members = rows[rows["checkpoint"].isin(group)]
        if members["loss"].isna().any():
            reason = "and no loss to tell which is genuine"
        elif pd.concat([members, neighbours])["loss_se"].isna().any():
            reason = (
                "and no standard error of the loss to tell which holds its own step (manifests written "
                "before extraction recorded `sum_squares`: rerun their extraction, "
                "`snakemake -R extract_hidden_states`)"
            )
        else:
            decided |= own_step.resolve(members, series, neighbours, by_design, settings["own_step_standard_errors"])
            continue
        decided |= {
            name: (f"same model as {', '.join(o for o in group if o != name)}, {reason}", None, float("nan"))
            for name in group
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
    if len(group) == 1:
        return None, None
    return decided[row.checkpoint][:2]
