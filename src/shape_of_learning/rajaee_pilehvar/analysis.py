"""Tables 1-2 and the data of Figures 1-2 of Rajaee & Pilehvar (2021) for one model on one rated-pairs set.

The token population is the authors' notebook's (src/Clusterbased_isotropy_enhancement.ipynb): every text of every
pair is encoded as it occurs, text1 then text2 of each pair in turn (a text rated in several pairs is encoded each
time, no texts are merged), by the project's extraction (`shape_of_learning.extraction`) in `extraction.dtype`. Per
hidden layer, "all tokens" are each text's token vectors without the special tokens the tokenizer adds (the notebook
deletes the first and last position: [CLS] and [SEP], for RoBERTa <s> and </s>; an [UNK] stays), and "[CLS]" the
first-token vector of each text. At the table layer (the last by default) every setting of `settings` is applied to
all tokens of all texts together, and measured by
- performance: Spearman x 100 between the gold scores and the cosine of the two texts' mean transformed tokens;
- isotropy: I(W) of the transformed tokens (`metrics.isotropy`) in two conventions, both in every table, figure and
  claim: `isotropy`, free of the eigensolver's signs, and `isotropy_notebook`, what the authors' notebook computes on
  the same vectors (float64 after every transform, as the notebook's `cluster_based` returns them); beside them the
  range of the one-sign value over `SIGN_DRAWS` random sign choices (`isotropy_u_only_min`, `isotropy_u_only_max`);
- what the setting removed (`settings.Removal`): `directions_removed` (summed over clusters),
  `directions_with_variance` of them, and `clusters_collapsed` (clusters, or X for Global, left at the origin).
The clustered settings are measured once per seed (`rajaee_pilehvar.seeds`), each with its own k-means.
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
from shape_of_learning.metrics.isotropy import isotropy_iw, isotropy_iw_notebook, isotropy_iw_sign_draws
from shape_of_learning.models.checkpoints import Checkpoint

from . import settings as transforms

logger = logging.getLogger(__name__)

CLUSTERED = ("cluster_zero_mean", "cluster_based")  # the settings that depend on the k-means seed
SIGN_DRAWS = 64  # random sign choices behind the range of the one-sign I(W) (`isotropy_u_only_min`, `_max`)
# A text whose pooled vector is shorter than this fraction of the root-mean-square token norm pooled to the origin
# (float32 rounding of a centred cluster of one text's copies is ~1e-7 of it): its cosine is 0, not a random one.
ZERO_POOLED = 1e-4


def spearman_x100(gold, predicted) -> float:
    """Spearman's rank correlation x 100 (the paper's "Perf.")."""
    return float(100 * spearmanr(gold, predicted).statistic)


def variants(directions: int, least: list[int]) -> list[dict]:
    """The rows of Table 1 (five settings, top `directions` removed) and of Table 2 (each of `least` removed)."""
    rows = [
        dict(table=1, setting=s, which="top", removed=directions if s in ("global", "cluster_based") else 0)
        for s in transforms.SETTINGS
    ]
    rows += [dict(table=2, setting=s, which="least", removed=n) for s in ("global", "cluster_based") for n in least]
    return rows


def isotropy(X: np.ndarray, device: str = "auto") -> dict:
    """I(W) of X free of the eigensolver's signs (`isotropy`), what the authors' notebook computes on X
    (`isotropy_notebook`), and the smallest and largest one-sign I(W) over `SIGN_DRAWS` seeded sign choices, the
    sign-free values sharing one eigendecomposition."""
    vectors = Vectors.of(X, device)
    draws = isotropy_iw_sign_draws(vectors, SIGN_DRAWS)
    return dict(
        isotropy=isotropy_iw(vectors),
        isotropy_notebook=isotropy_iw_notebook(X),
        isotropy_u_only_min=float(draws.min()),
        isotropy_u_only_max=float(draws.max()),
    )


def occurrences(pairs: pd.DataFrame) -> list[str]:
    """Every text as the notebook encodes it: text1 and text2 of the first pair, then of the second, and so on."""
    return [text for pair in zip(pairs["text1"], pairs["text2"]) for text in pair]


def pair_performance(tokens: np.ndarray, occurrence_of_token: np.ndarray, scores) -> float:
    """Spearman x 100 of `scores` against the cosine of each pair's two mean-pooled texts: pair i is occurrences 2i
    and 2i + 1 (`occurrences`), whose rows of `tokens` `occurrence_of_token` names. The cosine with a text pooled to
    (nearly) the zero vector is 0 (`ZERO_POOLED`)."""
    count = 2 * len(scores)
    sums = np.zeros((count, tokens.shape[1]))
    np.add.at(sums, occurrence_of_token, tokens)
    pooled = sums / np.bincount(occurrence_of_token, minlength=count)[:, None]
    # A text can pool to the origin (a one-token word whose copies are a k-means cluster of their own, once the
    # cluster is centred): its cosine with anything is 0, as in scikit-learn's cosine_similarity, rather than the
    # cosine of its rounding error.
    scale = np.sqrt(np.mean(np.sum(np.square(tokens, dtype=np.float64), axis=1)))
    pooled[np.linalg.norm(pooled, axis=1) <= ZERO_POOLED * scale] = 0
    unit = normalize(pooled)
    return spearman_x100(scores, (unit[0::2] * unit[1::2]).sum(1))


def hidden_tokens(
    checkpoint: Checkpoint,
    entry: dict,
    pin: dict,
    texts: list[str],
    *,
    batch_size: int = 64,
    device: str = "auto",
    dtype: str = "auto",
) -> tuple[list[np.ndarray], pd.DataFrame, str]:
    """Every layer's vectors of every token of `texts` (special tokens included), per row its text (`window`, the
    index into `texts`), position, token id and whether the tokenizer added it, and the forward pass's dtype.
    `batch_size` texts go through the model at once (rated texts are short; each batch costs one shard write per
    layer). `dtype` is extraction's (`extraction.dtype`; the entry's own `dtype` wins)."""
    tokenizer = load_preprocessor(entry, checkpoint, pin["commit_sha"])
    encoded = tokenizer(texts, truncation=True, max_length=entry["max_length"], return_special_tokens_mask=True)
    added = encoded["special_tokens_mask"]  # what extraction's special_tokens: exclude drops; [UNK] is not among them
    with tempfile.TemporaryDirectory() as shards:
        manifest = extract(
            checkpoint,
            {**entry, "batch_size": batch_size},
            texts,
            sum(map(len, added)),
            Path(shards),
            pin=pin,
            special_tokens="include",
            store_dtype="float32",
            device=device,
            dtype=dtype,
        )
        layers = [read_shard(Path(shards, paths.shard_name(layer)))[0] for layer in range(entry["layers"] + 1)]
        index = pq.read_table(Path(shards, paths.shard_name(0)), columns=["window", "position", "token_id"]).to_pandas()
    starts = np.cumsum([0, *map(len, added)])
    index["added"] = np.concatenate(added).astype(bool)[starts[index["window"]] + index["position"].to_numpy()]
    return layers, index, manifest["dtype"]


def analyse(
    checkpoint: Checkpoint,
    entry: dict,
    pin: dict,
    pairs: pd.DataFrame,
    *,
    seeds: tuple[int, ...] = (0,),
    kmeans: str = "reference",
    clusters: int = 27,
    directions: int = 12,
    least: tuple[int, ...] = (100, 700),
    table_layer: int = -1,
    figure_tokens: int = 2000,
    batch_size: int = 64,
    device: str = "auto",
    dtype: str = "auto",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(settings table, I(W) per layer, 2-D PCA of a sample of table-layer tokens) for one model on `pairs`.

    The settings table has one row per seed of `seeds` and variant (`variants`); only the clustered settings differ
    between seeds (`kmeans`, `clusters`: `settings.cluster_labels`). The per-layer table is `per_layer`'s. The PCA
    sample is drawn with the first seed.
    """
    texts = occurrences(pairs)
    layers, index, forward_dtype = hidden_tokens(
        checkpoint, entry, pin, texts, batch_size=batch_size, device=device, dtype=dtype
    )
    words = ~index["added"].to_numpy()
    if missing := sorted(set(range(len(texts))) - set(index.loc[words, "window"])):
        raise ValueError(f"{checkpoint.model}: texts without a token of their own, e.g. {texts[missing[0]]!r}")

    X, occurrence_of_token = layers[table_layer][words], index.loc[words, "window"].to_numpy()
    if bad := [n for n in (directions, *least) if n > X.shape[1]]:
        raise ValueError(
            f"{checkpoint.model} has {X.shape[1]} dimensions; cannot remove {bad} directions: lower "
            "rajaee_pilehvar.directions / rajaee_pilehvar.least_directions"
        )
    chosen = variants(directions, list(least))
    rows = _settings_rows(X, occurrence_of_token, pairs, seeds, kmeans, clusters, chosen, device, checkpoint.model)
    table = pd.DataFrame(rows).assign(
        layer=len(layers) + table_layer if table_layer < 0 else table_layer,
        tokens=len(X),
        texts=len(texts),
        pairs=len(pairs),
        dtype=forward_dtype,
    )
    view = _pca_view(X, index.loc[words, "token_id"].to_numpy(), seeds[0], figure_tokens)
    return table, per_layer(layers, index, texts, device).assign(dtype=forward_dtype), view


def _settings_rows(
    X: np.ndarray,
    occurrence_of_token: np.ndarray,
    pairs: pd.DataFrame,
    seeds: tuple[int, ...],
    kmeans: str,
    clusters: int,
    chosen: list[dict],
    device: str,
    model: str,
) -> list[dict]:
    """One row per seed and variant of `chosen`: the STS performance and isotropy of `X` transformed by it."""
    components, measured, rows = transforms.Components.of(X), {}, []
    for seed in seeds:
        labels = transforms.cluster_labels(X, clusters, seed, kmeans)
        per_cluster = transforms.cluster_components(X, labels)
        for variant in chosen:
            key = (variant["setting"], variant["which"], variant["removed"])
            if variant["setting"] in CLUSTERED or key not in measured:  # the others are the same for every seed
                Y, removal = transforms.transform(
                    X,
                    variant["setting"],
                    labels=labels,
                    directions=variant["removed"],
                    which=variant["which"],
                    components=components,
                    clusters=per_cluster,
                )
                measured[key] = dict(
                    performance=pair_performance(Y, occurrence_of_token, pairs["score"]),
                    **isotropy(Y, device),
                    directions_removed=removal.directions,
                    directions_with_variance=removal.with_variance,
                    clusters_collapsed=removal.collapsed,
                )
            rows.append(dict(seed=seed, **variant, **measured[key]))
            logger.info("%s: %s", model, rows[-1])
    return rows


def _pca_view(X: np.ndarray, token_ids: np.ndarray, seed: int, figure_tokens: int) -> pd.DataFrame:
    """The 2-D PCA of `X` on a sample of `figure_tokens` of its tokens (drawn with `seed`), with their token ids."""
    sample = np.random.default_rng(seed).permutation(len(X))[:figure_tokens]
    view = pd.DataFrame(PCA(2, random_state=seed).fit_transform(X)[sample], columns=["pc1", "pc2"])
    view["token_id"] = token_ids[sample]
    return view


def per_layer(layers: list[np.ndarray], index: pd.DataFrame, texts: list[str], device: str = "auto") -> pd.DataFrame:
    """I(W) of every layer's two views in both conventions (`isotropy`, sign-free; `isotropy_notebook`, the
    notebook's, on the float32 vectors as its forward pass gives them), "all" (the texts' own tokens, as
    `hidden_tokens` marks them) and "cls" (each text's first token), with how many vectors each holds (`count`) and
    how many distinct ones (`distinct`). A view is `degenerate` where it holds fewer distinct vectors than dimensions
    D: W^T W is then singular, each of its null-space eigenvectors u gives Z(u) = n, and I(W) tells the sample's rank
    rather than the space's shape. Layer 0's [CLS] view is one vector; a later layer's needs at least D distinct
    texts. Figure 1 and the claims leave degenerate views out.

    Distinct vectors: equal rows count once (at layer 0 a position's vector is its token's and position's alone), and
    so do the rows of one text and position (a text encodes to the same vectors wherever it occurs, up to the
    rounding of its batch)."""
    views = {"all": ~index["added"].to_numpy(), "cls": (index["position"] == 0).to_numpy()}
    inputs = pd.Series(list(zip(np.array(texts, dtype=object)[index["window"].to_numpy()], index["position"])))
    distinct_inputs = {name: inputs[view].nunique() for name, view in views.items()}
    rows = []
    for layer, X in enumerate(layers):
        for name, view in views.items():
            distinct = min(len(np.unique(X[view], axis=0)), distinct_inputs[name])
            rows.append(
                dict(
                    layer=layer,
                    tokens=name,
                    count=int(view.sum()),
                    distinct=distinct,
                    degenerate=distinct < X.shape[1],
                    isotropy=isotropy_iw(X[view], device),
                    isotropy_notebook=isotropy_iw_notebook(X[view]),
                )
            )
    return pd.DataFrame(rows)
