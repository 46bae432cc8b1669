"""Human-rated similarity pairs: STS-Benchmark, the Lee document set, SimLex-999 and WordSimilarity-353.

Every reader returns a DataFrame with columns ``text1``, ``text2``, ``score`` (the gold rating as published) and
raises ValueError naming the file and line of the first malformed record. Datasets are configured under
``rajaee_pilehvar: datasets:`` (see config.yaml); a split is referenced as ``"name/split"``, e.g. ``stsb/dev``. A set
published in one piece gets a held-out split of its own (`random_split`).
"""

import json
import logging
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

from shape_of_learning.corpus import gensim_test_file
from shape_of_learning.corpus.fetch import _digests, obtain

logger = logging.getLogger(__name__)

COLUMNS = ["text1", "text2", "score"]
RANDOM_SPLITS = ("train", "test")  # the splits a dataset's `random_split` adds


def read_sts(path: Path, *, lines=None) -> pd.DataFrame:
    """STS-Benchmark (Cer et al. 2017) csv: tab-separated genre, file, year, id, score (0-5), sentence 1, sentence 2
    (some lines carry extra source columns after these, which are ignored). Not csv-quoted: read line by line."""
    rows = []
    lines = Path(path).read_text(encoding="utf-8").splitlines() if lines is None else lines
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) < 7:
            raise ValueError(
                f"{path}:{number}: expected >= 7 tab-separated fields (genre, file, year, id, score, "
                f"sentence1, sentence2), got {len(fields)}; is this an STS-Benchmark sts-*.csv?"
            )
        rows.append((fields[5], fields[6], _rating(fields[4], path, number, 0, 5)))
    return _frame(rows, path)


def read_word_pairs(path: Path) -> pd.DataFrame:
    """SimLex-999 / WordSim-353 as shipped by gensim: '#' comment lines, then ``word1 <tab> word2 <tab> rating``."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(
                f"{path}:{number}: expected 3 tab-separated fields (word1, word2, rating), got "
                f"{len(fields)}: {line[:80]!r}"
            )
        rows.append((fields[0], fields[1], _rating(fields[2], path, number, 0, 10)))
    return _frame(rows, path)


def read_lee(documents: Path, ratings: Path) -> pd.DataFrame:
    """Lee, Pincombe & Welsh (2005): one news document per line and the matrix of mean human similarity ratings
    (0-1), whose upper triangle rates each pair once: 50 documents give 1,225 pairs. The documents are Latin-1
    (the pound sign is byte 0xa3), as gensim ships them."""
    texts = Path(documents).read_text(encoding="latin-1").splitlines()
    matrix = []
    for number, line in enumerate(Path(ratings).read_text().splitlines(), 1):
        matrix.append([_rating(value, ratings, number, 0, 1) for value in line.split()])
        if len(matrix[-1]) != len(texts):
            raise ValueError(
                f"{ratings}:{number}: {len(matrix[-1])} ratings, expected one per document of "
                f"{documents} ({len(texts)})"
            )
    if len(matrix) != len(texts):
        raise ValueError(f"{ratings}: {len(matrix)} rows, expected {len(texts)} (one per document of {documents})")
    rows = [(texts[i], texts[j], matrix[i][j]) for i in range(len(texts)) for j in range(i + 1, len(texts))]
    return _frame(rows, ratings)


def _rating(value: str, path, number: int, low: float, high: float) -> float:
    try:
        rating = float(value)
    except ValueError:
        rating = np.nan
    if not low <= rating <= high:  # also rejects nan
        raise ValueError(f"{path}:{number}: rating {value!r} is not a number in [{low}, {high}]")
    return rating


def _frame(rows, path) -> pd.DataFrame:
    if not rows:
        raise ValueError(f"{path}: no rated pairs found")
    return pd.DataFrame(rows, columns=COLUMNS)


def split_names(name: str, spec: dict) -> list[str]:
    """The splits of a configured dataset: its `splits`, and `train` and `test` where it has a `random_split`."""
    if "random_split" not in spec:
        return list(spec["splits"])
    if spec["random_split"]["of"] not in spec["splits"] or set(RANDOM_SPLITS) & set(spec["splits"]):
        raise ValueError(
            f"dataset {name!r}: random_split divides one of its splits {list(spec['splits'])}, named "
            f"other than {list(RANDOM_SPLITS)}; fix rajaee_pilehvar.datasets.{name}"
        )
    return [*spec["splits"], *RANDOM_SPLITS]


def random_split(pairs: pd.DataFrame, test: float, seed: int = 0) -> dict[str, pd.DataFrame]:
    """`pairs` in two: `test`, a share of them drawn at random by `seed` (rounded to whole pairs), and `train`, the
    others, each in the original order."""
    held_out = np.zeros(len(pairs), dtype=bool)
    held_out[np.random.default_rng(seed).permutation(len(pairs))[: round(test * len(pairs))]] = True
    return {"train": pairs[~held_out].reset_index(drop=True), "test": pairs[held_out].reset_index(drop=True)}


def drop_training_pairs(evaluation: pd.DataFrame, training: list[pd.DataFrame]) -> tuple[pd.DataFrame, int]:
    """The evaluation pairs that no training set holds, and how many were dropped. A pair is the same in either
    order (WordSim-353 rates "man"/"woman" where SimLex-999 rates "woman"/"man"): WordSim-353 shares 9 pairs with
    SimLex-999."""
    seen = {frozenset(pair) for frame in training for pair in zip(frame["text1"], frame["text2"])}
    shared = np.array([frozenset(pair) in seen for pair in zip(evaluation["text1"], evaluation["text2"])], dtype=bool)
    return evaluation[~shared].reset_index(drop=True), int(shared.sum())


def obtain_archive(name: str, spec: dict, dest: Path, lock: Path) -> Path:
    """The dataset's archive at `dest`, downloaded (retries, progress bar) or copied from `local_path`, decompressed
    to a tar.

    Reuses the corpus download (`shape_of_learning.corpus.fetch.obtain`). The tar is checked against `spec["sha256"]`
    when the config gives one; otherwise against the digest recorded in `lock` by the first run, which writes it.
    """
    if not spec["url"] and not spec["local_path"]:
        raise ValueError(
            f"dataset {name!r}: no source; set rajaee_pilehvar.datasets.{name}.url or .local_path "
            "(or `gensim: true` for the similarity sets shipped with gensim)"
        )
    pinned = spec["sha256"]
    recorded = json.loads(lock.read_text())["sha256"] if lock.is_file() else None
    if pinned and recorded and pinned != recorded:
        logger.warning("%s: config sha256 %s differs from the lock file %s; the config wins", name, pinned, recorded)
    dest = obtain(
        Path(dest), url=spec["url"], local_path=spec["local_path"], size=None, md5=None, sha256=pinned or recorded
    )
    if not pinned and not recorded:
        digest = _digests(dest)["sha256"]
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(json.dumps({"dataset": name, "url": spec["url"], "sha256": digest}, indent=2) + "\n")
        logger.info(
            "%s: recorded sha256 %s in %s; later runs check it (or set rajaee_pilehvar.datasets.%s.sha256)",
            name,
            digest,
            lock,
            name,
        )
    return dest


def read_splits(name: str, spec: dict, archive: Path | None = None) -> dict[str, pd.DataFrame]:
    """Every split of a configured dataset (`split_names`, which planning has checked), by name."""
    found = {split: read_split(name, spec, split, archive) for split in spec["splits"]}
    if divide := spec.get("random_split"):
        found.update(random_split(found[divide["of"]], divide["test"], divide["seed"]))
    return found


def read_split(name: str, spec: dict, split: str, archive: Path | None = None) -> pd.DataFrame:
    """One split of a configured dataset: a member of the STS archive, or files of gensim's test data."""
    source, fix = spec["splits"][split], f"fix rajaee_pilehvar.datasets.{name}"
    if (spec["format"] == "lee") != isinstance(source, list):
        wanted = "[documents, ratings]" if spec["format"] == "lee" else "one file"
        raise ValueError(f"dataset {name!r}, split {split!r}: give {wanted} for format {spec['format']}; {fix}.splits")
    if spec["gensim"]:
        if spec["format"] == "lee":
            return read_lee(*(gensim_test_file(file) for file in source))
        if spec["format"] == "word_pairs":
            return read_word_pairs(gensim_test_file(source))
        raise ValueError(f"dataset {name!r}: gensim ships no STS-Benchmark; set `gensim: false` and a url")
    if spec["format"] != "sts":
        raise ValueError(f"dataset {name!r}: {spec['format']} data is read from gensim's test data; set `gensim: true`")
    with tarfile.open(archive) as tar:
        try:
            lines = tar.extractfile(source).read().decode("utf-8").splitlines()
        except KeyError:
            raise ValueError(
                f"dataset {name!r}: {archive} has no member {source!r} (members: {tar.getnames()[:10]}); "
                f"{fix}.splits.{split}"
            ) from None
    return read_sts(f"{archive}:{source}", lines=lines)
