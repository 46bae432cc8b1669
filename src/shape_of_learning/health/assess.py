"""The health of one model's checkpoints, in one table: their loss, their duplicates, whether the loss fits their
place in the series, and the verdict every table and figure follows.

A group of checkpoints that are one model (identical files, or the same fingerprint) is decided by evidence where the
model reports a loss: its members whose loss fits their place are one model drawn once, at the earliest of them
(Pythia's step0 = step1, identical by design), and labelled so (`drawn_as`); members whose loss contradicts their
place are left out (`health`), whatever their bytes. Without a loss nothing tells which member, if any, holds its
own step's weights, so every member is left out, as for a checkpoint sharing only some files with another (a
mixture of two steps is neither's model). A checkpoint that is out of place is left out, duplicate or not.
"""

import pandas as pd

from shape_of_learning.health.duplicates import identical_files, same_behaviour
from shape_of_learning.health.position import out_of_place

VERDICT_COLUMNS = ["health", "drawn_as"]  # what the metrics tables carry, and every figure follows
COLUMNS = ["model", "checkpoint", "step", "loss", "loss_kind", "loss_tokens", "loss_note", "loss_fit",
           "identical_to", "shared_files", "behaves_like", "out_of_place", *VERDICT_COLUMNS]


def assess(pins: list[dict], manifests: list[dict], settings: dict) -> pd.DataFrame:
    """One row per checkpoint of one model (COLUMNS), in step order. `settings` is the config's `health` section:
    `out_of_place` (the tolerance in ln(loss)) and `same_behaviour` (fingerprint tolerances by dtype)."""
    by_name = {m["checkpoint"]: m for m in manifests}
    rows = pd.DataFrame([{"model": p["model"], "checkpoint": p["checkpoint"], "step": p["step"],
                          **_loss(by_name[p["checkpoint"]])} for p in pins]).sort_values("step", kind="stable")
    files = identical_files(pins)
    behaviour = same_behaviour(manifests, settings["same_behaviour"])
    rows["identical_to"] = [", ".join(files.get(c, {}).get("identical_to", [])) or None for c in rows["checkpoint"]]
    rows["shared_files"] = ["; ".join(f"{file}={other}" for file, other in files.get(c, {}).get("shared_files",
                                                                                              {}).items()) or None
                            for c in rows["checkpoint"]]
    rows["behaves_like"] = [", ".join(f"{other} ({distance:.1e})" for other, distance in behaviour.get(c, [])) or None
                            for c in rows["checkpoint"]]
    series = rows["loss"].notna() & (rows["step"] >= 0)
    rows["loss_fit"], rows["out_of_place"] = float("nan"), False
    if series.sum() > 1:
        fit, flagged = out_of_place(rows.loc[series, "loss"], settings["out_of_place"])
        rows.loc[series, "loss_fit"], rows.loc[series, "out_of_place"] = fit, flagged
    groups = _groups(rows["checkpoint"], files, behaviour)
    verdicts = [_verdict(row, groups[row.checkpoint], rows, settings["out_of_place"]) for row in rows.itertuples()]
    rows["health"], rows["drawn_as"] = zip(*verdicts) if verdicts else ([], [])
    return rows[COLUMNS].reset_index(drop=True)


def _loss(manifest: dict) -> dict:
    loss = manifest.get("loss") or {}
    return {"loss": loss.get("value"), "loss_kind": loss.get("kind"), "loss_tokens": loss.get("tokens", 0),
            "loss_note": loss.get("reason") or None}


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


def _verdict(row, group: list[str], rows: pd.DataFrame, tolerance: float) -> tuple[str | None, str | None]:
    """(health, drawn_as) of one checkpoint: why it is not drawn as its step's model, or which member of its group it
    is drawn as."""
    if row.out_of_place:
        expected = f"loss {row.loss:.3g} where its series runs at {row.loss_fit:.3g} (|ln ratio| > {tolerance})"
        return f"out of place: {expected}" + (f"; same model as {_others(row, group)}" if len(group) > 1 else ""), None
    if pd.notna(row.shared_files):
        return f"a mixture: shares {row.shared_files}", None
    if len(group) == 1:
        return None, None
    if pd.isna(row.loss):
        return f"same model as {_others(row, group)}, and no loss to tell which is genuine", None
    members = rows.set_index("checkpoint").loc[group]
    fitting = [name for name in group if not members.loc[name, "out_of_place"]]
    fitting.sort(key=lambda name: (members.loc[name, "step"] < 0, group.index(name)))  # a training step first
    return None, None if fitting[0] == row.checkpoint else fitting[0]


def _others(row, group: list[str]) -> str:
    return ", ".join(name for name in group if name != row.checkpoint)
