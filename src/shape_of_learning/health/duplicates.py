"""Checkpoints that are one model under several names: by their weight files' bytes, or by what they compute.

Upstream publishes both kinds. Byte duplicates: 76 step branches of pythia-2.8b serve main's `model.safetensors`
(EleutherAI/pythia#205), two pythia-12b branches the final model's first shard (#206), Pythia's step0 and step1 are
the same model by design (the first update runs at learning rate 0: EleutherAI/gpt-neox#1373, pythia#83).
Behavioural duplicates: bloom-1b7-intermediate's 1000/10000 and 250000/300000 give the same evaluation results
(bigscience/bloom discussion #267), which bytes alone cannot confirm when the files were re-serialised.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)


def identical_files(pins: list[dict]) -> dict[str, dict]:
    """For the pins of one model, the checkpoints whose weights are not their own:
    checkpoint -> {"identical_to": [others], "shared_files": {file: other checkpoint}}.

    Whole duplicates (the same weight files, by sha256) name every *other* checkpoint with them, earliest first (by
    step, then list order). Partial duplicates share at least one weight file (e.g. a shard) with another checkpoint;
    `shared_files` says which, and with whom. Unique checkpoints are absent.
    """
    models = sorted({p["model"] for p in pins})
    if len(models) > 1:
        raise ValueError(f"identical_files takes the pins of one model; got {models}: call it once per model")
    ordered = sorted(pins, key=lambda p: p["step"])  # stable: ties keep list order
    by_digest, by_file = defaultdict(list), defaultdict(list)
    for p in ordered:
        by_digest[p["weights_digest"]].append(p["checkpoint"])
        for sha in set(p["weights"].values()):
            by_file[sha].append(p["checkpoint"])
    duplicates = {}
    for p in ordered:
        same = [other for other in by_digest[p["weights_digest"]] if other != p["checkpoint"]]
        shared = (
            {}
            if same
            else {
                file: next(o for o in by_file[sha] if o != p["checkpoint"])
                for file, sha in sorted(p["weights"].items())
                if len(by_file[sha]) > 1
            }
        )
        if same or shared:
            duplicates[p["checkpoint"]] = {"identical_to": same, "shared_files": shared}
            logger.warning(
                "%s: checkpoint %s %s",
                p["model"],
                p["checkpoint"],
                f"has the same weights as {', '.join(same)}"
                if same
                else "shares weight files with other checkpoints: "
                + ", ".join(f"{file} = {other}'s" for file, other in shared.items()),
            )
    return duplicates


def fingerprint_distance(first: dict, second: dict) -> float:
    """The largest relative difference, over layers, between two fingerprints (`extraction.fingerprint`):
    max over layers of |f1 - f2| / max(|f1|, |f2|); inf where their layers or sizes differ."""
    if len(first["layers"]) != len(second["layers"]):
        return float("inf")
    worst = 0.0
    for a, b in zip(first["layers"], second["layers"]):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.shape != b.shape or not len(a):
            return float("inf")
        scale = max(np.linalg.norm(a), np.linalg.norm(b))
        worst = max(worst, np.linalg.norm(a - b) / scale if scale else 0.0)
    return worst


SEPARATION = 4.0  # two checkpoints within this factor of the re-save floor say that their fingerprints cannot tell


@dataclass(frozen=True)
class Behaviour:
    """The checkpoints of one model that compute the same function: checkpoint -> [(other, distance), ...] earliest
    first (`links`); the tolerance each checkpoint's fingerprint was judged by (`tolerance`); and a note on the
    checkpoints whose fingerprints cannot separate a re-save from another model (`notes`)."""

    links: dict[str, list[tuple[str, float]]]
    tolerance: dict[str, float]
    notes: dict[str, str]


def same_behaviour(manifests: list[dict], floors: dict[str, float]) -> Behaviour:
    """For the manifests of one model: the pairs of checkpoints, run in the same dtype, whose fingerprints lie within
    the re-save floor R of that dtype (`health.same_behaviour`: how far rounding the weights through bfloat16 or
    float16 and saving them back, or running them again, moves a fingerprint, with a margin), and the series' check
    that R separates: where two checkpoints lie further apart than R but within SEPARATION x R, nothing between the
    two tells a re-save from another model, and both say so. The smallest distance above R between two checkpoints of
    the series is its smallest genuine gap; R must lie below it, as it lies above every re-save.
    """
    ordered = sorted(manifests, key=lambda m: m["step"])
    links, tolerance, closest = defaultdict(list), {}, {}
    for i, first in enumerate(ordered):
        floor = floors.get(first["dtype"])
        if floor is None:
            continue
        tolerance[first["checkpoint"]] = floor
        for second in ordered[i + 1 :]:
            if second["dtype"] != first["dtype"]:
                continue
            distance = fingerprint_distance(first["fingerprint"], second["fingerprint"])
            if distance <= floor:
                links[first["checkpoint"]].append((second["checkpoint"], distance))
                links[second["checkpoint"]].append((first["checkpoint"], distance))
            elif distance <= SEPARATION * floor:
                for one, other in ((first, second), (second, first)):
                    nearest = (distance, other["checkpoint"])
                    closest[one["checkpoint"]] = min(closest.get(one["checkpoint"], nearest), nearest)
    notes = {
        name: f"its fingerprint lies {distance:.1e} from {other}'s, within {SEPARATION:g}x the re-save floor "
        f"{tolerance[name]:g}: a re-save cannot be told from another model here"
        for name, (distance, other) in closest.items()
    }
    return Behaviour(dict(links), tolerance, notes)
