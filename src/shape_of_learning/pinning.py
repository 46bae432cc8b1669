"""Pin each checkpoint to exact weights: the Hub commit sha and the sha256 of every safetensors file.

A rerun loads by commit sha, so a moved branch cannot change the results silently; the weight hashes expose
checkpoints that are the same weights under different names (upstream, 76 step branches of EleutherAI/pythia-2.8b,
step0 to step53000 among them, are bit-identical to main).
"""

import hashlib
import logging
from pathlib import Path

from huggingface_hub import HfApi, constants
from huggingface_hub.errors import HfHubHTTPError, HTTPError, OfflineModeIsEnabled

from shape_of_learning.registry import Checkpoint

logger = logging.getLogger(__name__)

WEIGHTS_GLOB = "*.safetensors"


def pin(checkpoint: Checkpoint) -> dict:
    """{model, checkpoint, step, source, location, revision, commit_sha, weights: {file: sha256}, weights_digest}.

    Hub: one ``model_info(files_metadata=True)`` call (no download); without network, the local HF cache.
    Local directory: sha256 of its safetensors files, commit_sha None.
    """
    if checkpoint.source == "hub":
        commit_sha, weights = _pin_hub(checkpoint.location, checkpoint.revision)
    else:
        commit_sha, weights = None, _hash_directory(Path(checkpoint.location), checkpoint)
    if not weights:
        where = checkpoint.location + (f"@{checkpoint.revision}" if checkpoint.revision else "")
        raise ValueError(f"{checkpoint.model}/{checkpoint.name}: no .safetensors weights in {where}. Only "
                         "safetensors are loaded (pickled .bin weights can run code on load): pick a revision that "
                         "has them, or convert the weights to safetensors and point a `path:` entry at that directory")
    digest = hashlib.sha256("".join(f"{name}:{sha}\n" for name, sha in sorted(weights.items())).encode()).hexdigest()
    return dict(model=checkpoint.model, checkpoint=checkpoint.name, step=checkpoint.step, source=checkpoint.source,
                location=checkpoint.location, revision=checkpoint.revision, commit_sha=commit_sha,
                weights=dict(sorted(weights.items())), weights_digest=digest)


def identical_checkpoints(pins: list[dict]) -> dict[str, str]:
    """For the pins of one model: checkpoint -> the earliest checkpoint (by step, then list order) with the same
    weights. Checkpoints with unique weights are absent."""
    models = sorted({p["model"] for p in pins})
    if len(models) > 1:
        raise ValueError(f"identical_checkpoints takes the pins of one model; got {models}: call it once per model")
    first_with_digest: dict[str, dict] = {}
    identical = {}
    for p in sorted(pins, key=lambda p: p["step"]):  # stable: ties keep list order
        first = first_with_digest.setdefault(p["weights_digest"], p)
        if first is not p:
            identical[p["checkpoint"]] = first["checkpoint"]
            logger.warning("%s: checkpoint %s has the same weights as %s (weights digest %s)", p["model"],
                           p["checkpoint"], first["checkpoint"], p["weights_digest"][:12])
    return identical


def _pin_hub(repo: str, revision: str) -> tuple[str, dict[str, str]]:
    try:
        info = HfApi().model_info(repo, revision=revision, files_metadata=True)
    except HfHubHTTPError:
        raise  # the Hub answered (repo or revision not found, gated, ...): its message says which
    except (OfflineModeIsEnabled, HTTPError) as error:  # no network: fall back to what the cache holds
        logger.info("Hub unreachable for %s@%s (%s); pinning from the local cache", repo, revision, error)
        return _pin_from_cache(repo, revision)
    weights = {s.rfilename: s.lfs.sha256 if s.lfs else f"git-blob:{s.blob_id}"
               for s in info.siblings if s.rfilename.endswith(".safetensors")}
    return info.sha, weights


def _pin_from_cache(repo: str, revision: str) -> tuple[str, dict[str, str]]:
    """Commit sha and weight hashes from the HF cache: refs/{revision} holds the sha; each snapshot file links to a
    blob named by its sha256 (LFS files)."""
    repo_dir = Path(constants.HF_HUB_CACHE, "models--" + repo.replace("/", "--"))
    ref = repo_dir / "refs" / revision
    commit_sha = ref.read_text().strip() if ref.is_file() else revision
    snapshot = repo_dir / "snapshots" / commit_sha
    if not snapshot.is_dir():
        raise RuntimeError(
            f"cannot pin {repo}@{revision}: the Hub is unreachable and the cache {repo_dir} has no snapshot of it. "
            f"Pre-fetch it where there is network (`hf download {repo} --revision {revision}`, with the same "
            "HF_HOME), or download the model elsewhere and use a `path:` entry")
    weights = {}
    for file in sorted(snapshot.glob(WEIGHTS_GLOB)):
        blob = file.resolve().name
        is_sha256 = len(blob) == 64 and all(c in "0123456789abcdef" for c in blob)
        weights[str(file.relative_to(snapshot))] = blob if is_sha256 else _sha256(file)
    return commit_sha, weights


def _hash_directory(directory: Path, checkpoint: Checkpoint) -> dict[str, str]:
    if not directory.is_dir():
        raise FileNotFoundError(f"{checkpoint.model}/{checkpoint.name}: model directory {directory} does not exist")
    return {str(file.relative_to(directory)): _sha256(file) for file in sorted(directory.glob(WEIGHTS_GLOB))}


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()
