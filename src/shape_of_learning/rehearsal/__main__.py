"""The rehearsal of the paper's run (`make rehearsal`): presets/rehearsal.yaml, offline, through the Hub's own client.

    python -m shape_of_learning.rehearsal [--cores N] [-- SNAKEMAKE_ARGS...]

1. writes presets/rehearsal.yaml from config.yaml (`preset`) and builds, once, in .rehearsal/: the twins of every
   row of the model facts (a hub folder), ImageNet- and Common Voice-like corpora and STS-B's archive (`media`);
2. serves the twins on a local Hub (127.0.0.1) that drops one weight file's connection mid-file and answers another
   with a server error once each (`FAULTS`), with Llama 2's twins gated behind a token;
3. runs Snakemake on presets/rehearsal.yaml with HF_ENDPOINT at that Hub, its own HF_HOME and the token, the global
   HF_HUB_OFFLINE unset: the pin and download jobs reach the Hub, every extraction goes offline by itself
   (`network.go_offline`); then the report and `verify`;
4. fails unless each fault was met (and survived: the run completed) and no partial download is left in the cache;
5. rehearses three upstream breaks on fault twins of its own (`faults`: a block missing from the weights, a shard
   missing on the Hub, a cached blob deleted before the extraction), failing unless each ends as it must.

    python -m shape_of_learning.rehearsal --faults-only      # step 5 alone, after step 1
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from shape_of_learning import REPOSITORY
from shape_of_learning.experiment import results_root
from shape_of_learning.models import facts
from shape_of_learning.rehearsal import faults, media, preset, twins
from shape_of_learning.rehearsal.local_hub import Fault, LocalHub
from shape_of_learning.rehearsal.preset import FOLDER, PRESET

TOKEN = "hf_rehearsal"  # the one token the local Hub accepts for a gated twin
FAULTS = [  # each met by the first request for its file: a download resumed, a request retried
    Fault("/EleutherAI/pythia-410m/resolve/*/model.safetensors", drop_after=4096),
    Fault("/facebook/opt-125m/resolve/*/pytorch_model.bin", status=500),
]
IMAGES, CLIPS = 600, 20
# what the twins' bytes depend on, beside the model facts: rebuilt when one changes
TWIN_SOURCES = ("structure.py", "twins.py", "local_hub.py")


def build(folder: Path) -> Path:
    """The twins and the local data in `folder` (kept between runs while the model facts and TWIN_SOURCES are
    unchanged), and the fault twins made from them; the hub folder. Twins built again are new commits: the results
    and the cache of the twins before them, pinned to commits the Hub no longer serves, go with them."""
    here = Path(__file__).parent
    sources = [facts.path(), *(here / name for name in TWIN_SOURCES)]
    stamp = hashlib.sha256(b"".join(source.read_bytes() for source in sources)).hexdigest()
    hub, built = folder / "hub", folder / "built"
    if not built.is_file() or built.read_text() != stamp:
        print(f"rehearsal: building the twins and the local data in {folder}", flush=True)
        for stale in (hub, folder / "hf-home", REPOSITORY / preset.SCALE[results_root.KEY]):
            shutil.rmtree(stale, ignore_errors=True)  # no branch of earlier twins, nor what was pinned to it
        twins.publish(hub)
        media.imagenet_tar(folder / "imagenet/ILSVRC2012_img_val.tar", IMAGES)
        media.common_voice_clips(folder / "common_voice_en/clips", CLIPS)
        media.stsb_archive(folder / "Stsbenchmark.tar.gz")
        built.write_text(stamp)
    faults.publish(hub)  # the fault twins: copies of two twins, made again each time (faults.py as it is now)
    return hub


def environment(endpoint: str, hf_home: Path) -> dict[str, str]:
    """The jobs' environment: the local Hub, a cache of the rehearsal's own (the twins bear the real repositories'
    names), the token, and no global offline switch."""
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return env | {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(hf_home),
        "HF_TOKEN": TOKEN,
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def run(cores: int, extra: list[str], folder: Path, faults_only: bool = False) -> int:
    """The rehearsal (module docstring), or with `faults_only` its fault phase alone (step 5)."""
    try:
        preset.write()
    except ValueError as error:  # a model without a row in the model facts
        print(f"rehearsal: {error}", file=sys.stderr)
        return 2
    hub_folder = build(folder)
    hf_home = (folder / "hf-home").resolve()
    fresh = not hf_home.exists()  # then every file is downloaded, the faulted ones included
    snakemake = [sys.executable, "-m", "snakemake", "--configfile", str(PRESET)]
    phase = folder / faults.FOLDER
    with LocalHub(hub_folder, faults=[] if faults_only else FAULTS, token=TOKEN) as hub:
        steps = [
            [*snakemake, "--cores", str(cores), *extra],
            [*snakemake, "--cores", "1", "--report", report_path()],
            [sys.executable, "-m", "shape_of_learning", "verify", str(PRESET)],
        ]
        if not faults_only:
            print(f"rehearsal: the local Hub at {hub.endpoint}; snakemake on {PRESET}", flush=True)
        for step in [] if faults_only else steps:
            if code := subprocess.run(
                step, check=False, cwd=REPOSITORY, env=environment(hub.endpoint, hf_home)
            ).returncode:
                return code
        rehearsal = yaml.safe_load((REPOSITORY / PRESET).read_text())
        env = environment(hub.endpoint, (phase / faults.HF_HOME).resolve())
        broken, breaks = faults.run_phase(phase, hub, env, cores, rehearsal)
    if faults_only:
        print(f"rehearsal: fault phase {'failed' if broken else 'complete'}; {breaks}")
        return 1 if broken else 0
    return check_faults(hub, hf_home, fresh, breaks, broken)


def report_path() -> str:
    found = subprocess.run(
        [sys.executable, "-m", "shape_of_learning", "path", "REPORT", str(PRESET)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip()


def check_faults(hub: LocalHub, hf_home: Path, fresh: bool, breaks: str | None = None, broken: int = 0) -> int:
    """0 when no partial download is left in the cache, every fault was met, which a run that started from an empty
    cache must do (a rerun may download nothing), and no upstream break failed (`broken`, of the fault phase, whose
    summary `breaks` ends the summary line); else 1, saying which."""
    failures = [f"a partial download is left in the cache: {path}" for path in hf_home.rglob("*.incomplete")]
    failures += [f"{broken} upstream break(s) did not end as expected (above): {breaks}"] if broken else []
    unmet = [f"fault {fault.path} was never met" for fault in hub.unmet()]
    if fresh:
        failures += unmet
    for failure in failures:
        print(f"rehearsal: {failure}", file=sys.stderr)
    for note in [] if fresh else unmet:
        print(f"rehearsal: {note}: its file was in the cache already (rm -rf {hf_home} to rehearse it again)")
    if not failures:
        met = len(hub.faults) - len(unmet)
        print(
            f"rehearsal: complete; {met} of {len(hub.faults)} injected faults met and survived, no partial download"
            + (f"; {breaks}" if breaks else "")
        )
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shape_of_learning.rehearsal", description=__doc__.split("\n")[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--faults-only", action="store_true", help="only the upstream breaks (rehearsal.faults)")
    parser.add_argument("snakemake", nargs="*", help="more arguments for Snakemake (after --)")
    args = parser.parse_args(argv)
    return run(args.cores, args.snakemake, REPOSITORY / FOLDER, args.faults_only)


if __name__ == "__main__":
    raise SystemExit(main())
