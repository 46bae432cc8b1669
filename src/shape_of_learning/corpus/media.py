"""Image and audio corpora: a seeded sample of files from a local folder or archive, verified and stored as one file.

The paper's image corpus is ImageNet's validation set and its speech corpus Common Voice English clips; neither can be
downloaded without an account, so config.yaml points `image_corpus.local_path` / `audio_corpus.local_path` at a local
folder or a .zip/.tar(.gz) archive. `sample_media` lists the files of the modality's extensions in a stable (sorted)
order, draws `count` of them with numpy's PCG64 generator seeded by `seed` (same files, same order, on any machine),
decodes each one to verify it (a corrupt file is an error naming it) and writes their bytes, names and sha256 to one
Parquet file (`shape_of_learning.paths.media`): extraction jobs read only that file, never the source tree.

File format: columns item (int, 0..n-1: the order extractors consume them), name (path inside the source), sha256,
label (int; the class for sklearn's digits, -1 where unknown), data (the file's bytes); schema metadata key
``shape_of_learning.media`` holds JSON {modality, seed, count, source, available}.
"""

import hashlib
import io
import json
import tarfile
import wave
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from shape_of_learning.corpus.io import atomic_path

METADATA_KEY = b"shape_of_learning.media"
EXTENSIONS = {"image": (".jpeg", ".jpg", ".png", ".bmp", ".webp"), "audio": (".wav", ".flac", ".mp3", ".ogg")}


def sample_media(spec: dict, modality: str) -> pd.DataFrame:
    """`spec["count"]` verified files of `modality` drawn with `spec["seed"]` from `spec["local_path"]` (a folder or a
    .zip/.tar archive), or from scikit-learn's digits where ``spec["sklearn_digits"]`` (images only)."""
    if modality not in EXTENSIONS:
        raise ValueError(f"modality must be one of {sorted(EXTENSIONS)}, got {modality!r}")
    count, seed = spec["count"], spec["seed"]
    if spec["sklearn_digits"]:
        if modality != "image":
            raise ValueError("sklearn_digits is an image corpus; give audio_corpus a local_path")
        names, labels, read, source = _digits()
    elif spec["local_path"]:
        source = Path(spec["local_path"])
        names, read = _listing(source, EXTENSIONS[modality])
        if modality == "audio" and (validated := _validated_clips(source)) is not None:
            names = [name for name in names if Path(name).name in validated]
        labels = [-1] * len(names)
    else:
        raise ValueError(f"{modality}_corpus needs `local_path` (a folder or .zip/.tar archive of {modality} files)")
    if len(names) < count:
        raise ValueError(
            f"{source} holds {len(names)} {modality} files ({', '.join(EXTENSIONS[modality])}), fewer "
            f"than {modality}_corpus.count={count}; lower the count or add files"
        )
    chosen = np.random.default_rng(seed).choice(len(names), size=count, replace=False)
    rows = []
    for item, index in enumerate(chosen.tolist()):
        data = read(names[index])
        try:
            decode_image(data) if modality == "image" else decode_audio(data, None)
        except Exception as error:
            raise ValueError(
                f"{source}: {names[index]} is not a readable {modality} file ({error}); remove it or replace the corpus"
            ) from error
        rows.append((item, names[index], hashlib.sha256(data).hexdigest(), labels[index], data))
    frame = pd.DataFrame(rows, columns=["item", "name", "sha256", "label", "data"])
    frame.attrs = {"modality": modality, "seed": seed, "count": count, "source": str(source), "available": len(names)}
    return frame


def write_media(frame: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**table.schema.metadata, METADATA_KEY: json.dumps(frame.attrs).encode()})
    with atomic_path(Path(path)) as tmp:
        pq.write_table(table, tmp)


def read_media(path: Path) -> pd.DataFrame:
    """The sampled items in extraction order, with the sampling metadata in ``attrs``."""
    table = pq.read_table(path)
    frame = table.to_pandas().sort_values("item", ignore_index=True)
    frame.attrs = json.loads(table.schema.metadata[METADATA_KEY])
    return frame


def decode_image(data: bytes):
    """A PIL image in RGB (grey digits and CMYK JPEGs alike, as image processors expect three channels)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def decode_audio(data: bytes, sampling_rate: int | None) -> np.ndarray:
    """Mono float32 samples in [-1, 1], resampled to `sampling_rate` (None: the file's own rate).

    WAV (PCM) is read with the standard library; FLAC, MP3 (Common Voice) and OGG with `soundfile` (libsndfile).
    """
    try:
        with wave.open(io.BytesIO(data)) as clip:
            width, rate, channels = clip.getsampwidth(), clip.getframerate(), clip.getnchannels()
            raw = clip.readframes(clip.getnframes())
        if width not in (1, 2, 4):
            raise ValueError(f"{8 * width}-bit PCM WAV is not supported; convert to 16-bit")
        samples = np.frombuffer(raw, dtype={1: np.uint8, 2: "<i2", 4: "<i4"}[width]).astype(np.float32)
        samples = (samples - 128) / 128 if width == 1 else samples / float(2 ** (8 * width - 1))
        samples = samples.reshape(-1, channels)
    except wave.Error:
        try:
            import soundfile
        except ImportError as error:
            raise ImportError(
                "decoding FLAC/MP3/OGG clips needs soundfile: pip install soundfile (or convert the clips to WAV)"
            ) from error
        samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    if samples.size == 0:
        raise ValueError("the clip has no samples")
    mono = samples.mean(axis=1)
    if sampling_rate is None or rate == sampling_rate:
        return mono.astype(np.float32)
    from math import gcd

    from scipy.signal import resample_poly

    divisor = gcd(rate, sampling_rate)
    return resample_poly(mono, sampling_rate // divisor, rate // divisor).astype(np.float32)


def _digits():
    """scikit-learn's 1,797 handwritten digits (8x8, 17 grey levels), as PNG files with their labels."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    pngs = []
    for pixels in digits.images:
        buffer = io.BytesIO()
        Image.fromarray((pixels * 255 / 16).round().astype(np.uint8), mode="L").save(buffer, format="PNG")
        pngs.append(buffer.getvalue())
    names = [f"digits/{i:04d}.png" for i in range(len(pngs))]
    by_name = dict(zip(names, pngs))
    return names, digits.target.tolist(), by_name.__getitem__, "sklearn.datasets.load_digits"


# Common Voice lists the clips its listeners validated in validated.tsv (column `path`), beside the clips/ folder that
# holds every recorded clip, invalidated and unrated ones too
VALIDATED = "validated.tsv"


def _validated_clips(source: Path) -> set[str] | None:
    """The file names of Common Voice's validated clips where `source` (a folder) or the folder above it has
    validated.tsv; None where neither has (every clip listed is drawn from)."""
    if not source.is_dir():
        return None
    found = next((folder / VALIDATED for folder in (source, source.parent) if (folder / VALIDATED).is_file()), None)
    return None if found is None else set(pd.read_csv(found, sep="\t", usecols=["path"], quoting=3)["path"])


def _listing(source: Path, extensions: tuple[str, ...]):
    """Sorted member names of the modality's extensions and a function reading one of them."""
    if source.is_dir():
        names = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.suffix.lower() in extensions)
        return names, lambda name: (source / name).read_bytes()
    if not source.is_file():
        raise FileNotFoundError(f"corpus local_path {source} does not exist; point it at a folder or archive")
    if zipfile.is_zipfile(source):
        archive = zipfile.ZipFile(source)
        names = sorted(n for n in archive.namelist() if Path(n).suffix.lower() in extensions)
        return names, archive.read
    if tarfile.is_tarfile(source):
        archive = tarfile.open(source)
        members = {m.name: m for m in archive.getmembers() if m.isfile() and Path(m.name).suffix.lower() in extensions}
        return sorted(members), lambda name: archive.extractfile(members[name]).read()
    raise ValueError(f"{source} is neither a folder nor a .zip/.tar archive; unpack it or repack it as one")
