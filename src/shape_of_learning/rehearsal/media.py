"""The rehearsal's image and audio corpora and rated pairs, in the formats of the real ones (config.yaml's
image_corpus and audio_corpus, STS-B's archive), made here: what the paper's run reads from an account-only download
or a server this machine may not reach.

- `imagenet_tar`: a tar of JPEGs named as ImageNet's validation archive names them (ILSVRC2012_img_val.tar holds
  ILSVRC2012_val_00000001.JPEG ... flat), from scikit-learn's digits (real images shipped in its wheel), RGB;
- `common_voice_clips`: a clips/ folder of MP3s named as Common Voice names them (common_voice_en_<id>.mp3, mono,
  48 kHz). No speech ships offline: each clip is a voiced-like signal (a harmonic series on a gliding pitch under a
  syllable-rate envelope, with noise) of a fixed seed, 2-5 s long, encoded by libsndfile's MP3 writer;
- `stsb_archive`: Stsbenchmark.tar.gz's layout and line format (stsbenchmark/sts-train.csv and sts-dev.csv, tab-
  separated genre, file, year, id, score 0-5, sentence 1, sentence 2), from SimLex-999's word pairs (real human
  ratings shipped in gensim's wheel) with their 0-10 ratings halved: every third pair is dev.
"""

import gzip
import io
import tarfile
from pathlib import Path

import numpy as np

CLIP_RATE = 48_000  # Common Voice's MP3s
IMAGE_SIDE = 64  # digits are 8x8: upsampled so that resizing to a twin's 32 pixels downsamples, as ImageNet's does


def imagenet_tar(path: Path, count: int) -> Path:
    """`count` digits (at most 1,797) as ILSVRC2012_val_%08d.JPEG in an uncompressed tar at `path`."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits().images
    if not 0 < count <= len(digits):
        raise ValueError(f"imagenet_tar: count {count} must be 1 to {len(digits)} (scikit-learn's digits)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for index, digit in enumerate(digits[:count], start=1):
            grey = Image.fromarray(np.uint8(digit * 255 / 16)).resize((IMAGE_SIDE, IMAGE_SIDE), Image.BILINEAR)
            buffer = io.BytesIO()
            grey.convert("RGB").save(buffer, format="JPEG", quality=90)
            _add(archive, f"ILSVRC2012_val_{index:08d}.JPEG", buffer.getvalue())
    return path


def common_voice_clips(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """`count` MP3 clips, common_voice_en_<id>.mp3, in `folder`."""
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = []
    for index in range(count):
        samples = _voiced(rng, seconds=rng.uniform(2.0, 5.0))
        path = folder / f"common_voice_en_{1000000 + index}.mp3"
        soundfile.write(path, samples, CLIP_RATE, format="MP3")
        written.append(path)
    return written


def stsb_archive(path: Path) -> Path:
    """SimLex-999 in STS-B's archive at `path`, the same bytes on every machine."""
    from shape_of_learning.corpus import gensim_test_file
    from shape_of_learning.rajaee_pilehvar.datasets import read_word_pairs

    pairs = read_word_pairs(gensim_test_file("simlex999.txt"))
    lines = {"train": [], "dev": []}
    for index, pair in enumerate(pairs.itertuples()):
        line = f"main-captions\tSimLex\t2015\t{index:04d}\t{pair.score / 2:.2f}\t{pair.text1}\t{pair.text2}"
        lines["dev" if index % 3 == 2 else "train"].append(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for split, rows in lines.items():
            _add(archive, f"stsbenchmark/sts-{split}.csv", ("\n".join(rows) + "\n").encode())
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return path


def _voiced(rng: np.random.Generator, seconds: float) -> np.ndarray:
    time = np.arange(int(seconds * CLIP_RATE)) / CLIP_RATE
    pitch = rng.uniform(90, 220) * (1 + 0.2 * np.sin(2 * np.pi * rng.uniform(0.3, 1.0) * time))
    phase = 2 * np.pi * np.cumsum(pitch) / CLIP_RATE
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 8))
    syllables = 0.5 * (1 + np.sin(2 * np.pi * rng.uniform(3, 5) * time))  # ~4 syllables a second
    signal = syllables * harmonics + 0.05 * rng.standard_normal(time.size)
    return (0.3 * signal / np.abs(signal).max()).astype(np.float32)


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644  # no clock in the bytes
    archive.addfile(info, io.BytesIO(data))


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m shape_of_learning.rehearsal.media", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "folder", type=Path, help="writes imagenet/ILSVRC2012_img_val.tar, common_voice_en/clips/, Stsbenchmark.tar.gz"
    )
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--clips", type=int, default=20)
    args = parser.parse_args(argv)
    imagenet_tar(args.folder / "imagenet/ILSVRC2012_img_val.tar", args.images)
    common_voice_clips(args.folder / "common_voice_en/clips", args.clips)
    stsb_archive(args.folder / "Stsbenchmark.tar.gz")
    print(f"{args.images} JPEGs, {args.clips} MP3 clips and SimLex-999 as STS-B in {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
