"""Tables 1-2 and the data of Figures 1-2 of Rajaee & Pilehvar (2021) for one model on one rated-pairs set.

The texts of the pairs go through the model once, by the project's extraction (`shape_of_learning.extraction`, special
tokens kept so the first token can be told apart); then, per hidden layer, "all tokens" are the token vectors
without special tokens ([CLS]/[SEP], <s>/</s>) and "[CLS]" the first-token vector of each text. At the table layer
(the last by default) every setting of `settings` is applied to all tokens of all texts together, and measured by
- performance: Spearman x 100 between the gold scores and the cosine of the two texts' mean transformed tokens;
- isotropy: I(W) of the transformed tokens, both sign conventions (`metrics.isotropy`).
"""

import logging
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from scipy.stats import spearmanr
from sklearn.decomposition import PCA
from sklearn.preprocessing import normalize

from shape_of_learning import paths
from shape_of_learning.extraction.hidden_states import extract
from shape_of_learning.extraction.loading import load_preprocessor
from shape_of_learning.extraction.shards import read_shard
from shape_of_learning.metrics import Vectors
from shape_of_learning.metrics.isotropy import isotropy_iw, isotropy_iw_u_only
from shape_of_learning.models.checkpoints import Checkpoint

from . import settings as transforms

logger = logging.getLogger(__name__)


def spearman_x100(gold, predicted) -> float:
    """Spearman's rank correlation x 100 (the paper's "Perf.")."""
    return float(100 * spearmanr(gold, predicted).statistic)


def variants(directions: int, least: list[int]) -> list[dict]:
    """The rows of Table 1 (five settings, top `directions` removed) and of Table 2 (each of `least` removed)."""
    rows = [dict(table=1, setting=s, which="top", removed=directions if s in ("global", "cluster_based") else 0)
            for s in transforms.SETTINGS]
    rows += [dict(table=2, setting=s, which="least", removed=n) for s in ("global", "cluster_based") for n in least]
    return rows


def isotropy(X: np.ndarray, device: str = "auto") -> dict:
    """I(W) of X in both sign conventions, sharing one eigendecomposition."""
    vectors = Vectors.of(X, device)
    return dict(isotropy=isotropy_iw(vectors), isotropy_u_only=isotropy_iw_u_only(vectors))


def pair_performance(tokens: np.ndarray, text_of_token: np.ndarray, pairs: pd.DataFrame, texts: list[str]) -> float:
    """Spearman x 100 of the pairs' cosines of mean-pooled `tokens` (rows belong to texts by `text_of_token`); the
    cosine with a text pooled to the zero vector is 0."""
    counts = np.bincount(text_of_token, minlength=len(texts))
    sums = np.zeros((len(texts), tokens.shape[1]))
    np.add.at(sums, text_of_token, tokens)
    pooled = sums / counts[:, None]
    index = {text: i for i, text in enumerate(texts)}
    # A text can pool to the origin (a one-token word alone in its k-means cluster, once the cluster is centred): its
    # cosine with anything is 0, as in scikit-learn's cosine_similarity, rather than 0 / 0.
    unit = normalize(pooled)
    first, second = (unit[pairs[column].map(index).to_numpy()] for column in ("text1", "text2"))
    return spearman_x100(pairs["score"], (first * second).sum(1))


def hidden_tokens(checkpoint: Checkpoint, entry: dict, pin: dict, texts: list[str], *, batch_size: int = 64,
                  device: str = "auto") -> tuple[list[np.ndarray], pd.DataFrame]:
    """Every layer's vectors of every token of `texts` (special tokens included), and per row its text, position,
    token id and whether it is a special token. `batch_size` texts go through the model at once (rated texts are
    short; each batch costs one shard write per layer)."""
    tokenizer = load_preprocessor(entry, checkpoint, pin["commit_sha"])
    lengths = tokenizer(texts, truncation=True, max_length=entry["max_length"])["input_ids"]
    with tempfile.TemporaryDirectory() as shards:
        extract(checkpoint, {**entry, "batch_size": batch_size}, texts, sum(map(len, lengths)), Path(shards),
                pin=pin, special_tokens="include", store_dtype="float32", device=device)
        layers = [read_shard(Path(shards, paths.shard_name(layer)))[0] for layer in range(entry["layers"] + 1)]
        index = pq.read_table(Path(shards, paths.shard_name(0)), columns=["window", "position", "token_id"]).to_pandas()
    index["special"] = index["token_id"].isin(tokenizer.all_special_ids)
    return layers, index


def analyse(checkpoint: Checkpoint, entry: dict, pin: dict, pairs: pd.DataFrame, *, clusters: int = 27,
            directions: int = 12, least: tuple[int, ...] = (100, 700), table_layer: int = -1,
            figure_tokens: int = 2000, seed: int = 0, batch_size: int = 64, device: str = "auto"
            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(settings table, I(W) per layer, 2-D PCA of a sample of table-layer tokens) for one model on `pairs`."""
    texts = sorted(set(pairs["text1"]) | set(pairs["text2"]))
    layers, index = hidden_tokens(checkpoint, entry, pin, texts, batch_size=batch_size, device=device)
    words, first = ~index["special"].to_numpy(), (index["position"] == 0).to_numpy()
    if missing := sorted(set(range(len(texts))) - set(index.loc[words, "window"])):
        raise ValueError(f"{checkpoint.model}: texts without a non-special token, e.g. {texts[missing[0]]!r}")
    per_layer = [dict(layer=layer, tokens=name, count=int(rows.sum()), **isotropy(X[rows], device))
                 for layer, X in enumerate(layers) for name, rows in (("all", words), ("cls", first))]

    X, text_of_token = layers[table_layer][words], index.loc[words, "window"].to_numpy()
    if bad := [n for n in (directions, *least) if n > X.shape[1]]:
        raise ValueError(f"{checkpoint.model} has {X.shape[1]} dimensions; cannot remove {bad} directions: lower "
                         "finetuning.directions / finetuning.least_directions")
    labels = transforms.cluster_labels(X, clusters, seed)
    bases = dict(basis=transforms.principal_directions(X), bases=transforms.cluster_directions(X, labels))
    rows = []
    for variant in variants(directions, list(least)):
        Y = transforms.transform(X, variant["setting"], labels=labels, directions=variant["removed"],
                                 which=variant["which"], **bases)
        rows.append(dict(**variant, performance=pair_performance(Y, text_of_token, pairs, texts),
                         **isotropy(Y, device)))
        logger.info("%s: %s", checkpoint.model, rows[-1])
    table = pd.DataFrame(rows).assign(layer=len(layers) + table_layer if table_layer < 0 else table_layer,
                                      tokens=len(X), texts=len(texts), pairs=len(pairs))

    sample = np.random.default_rng(seed).permutation(len(X))[:figure_tokens]
    view = pd.DataFrame(PCA(2, random_state=seed).fit_transform(X)[sample], columns=["pc1", "pc2"])
    view["token_id"] = index.loc[words, "token_id"].to_numpy()[sample]
    return table, pd.DataFrame(per_layer), view
