"""Metrics: cross-checks against scikit-dimension, closed forms, bad data, the batch protocol and the CLI."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from scipy.spatial.distance import cdist, pdist
from scipy.stats import ortho_group

from shape_of_learning.experiment.config import ConfigError, validate_config
from shape_of_learning.figures.style import metric_label
from shape_of_learning.metrics import (
    METRICS,
    Vectors,
    anisotropy,
    average_cosine,
    batches,
    cli,
    compute_metrics,
    deduplicate,
    gride,
    isoscore,
    isotropy_iw,
    knn_distances,
    mada,
    mom,
    neighbours,
    twonn,
)
from shard_files import write_shard

REPO = Path(__file__).resolve().parents[1]

skdim = pytest.importorskip("skdim")


def embed(points, dim, offset, seed):
    """Points in a random rotation of a `dim`-dimensional space, shifted by `offset` along a random direction."""
    rng = np.random.default_rng(seed)
    padded = np.zeros((len(points), dim))
    padded[:, : points.shape[1]] = points
    shift = rng.standard_normal(dim)
    return padded @ ortho_group.rvs(dim, random_state=seed) + offset * shift / np.linalg.norm(shift)


def helix(n, seed):
    t = np.sort(np.random.default_rng(seed).uniform(0, 4 * np.pi, n))
    return np.column_stack([np.cos(t), np.sin(t), 0.2 * t])


def swiss_roll(n, seed):
    rng = np.random.default_rng(seed)
    t = 1.5 * np.pi * (1 + 2 * rng.uniform(size=n))
    return np.column_stack([t * np.cos(t), 10 * rng.uniform(size=n), t * np.sin(t)])


def gaussian(n, d, seed):
    return np.random.default_rng(seed).standard_normal((n, d))


MANIFOLDS = {  # name: (points embedded in D dims, true dimension)
    "helix in 12-D, offset 1000": (embed(helix(1500, 0), 12, 1000.0, 0), 1),
    "swiss roll in 30-D": (embed(swiss_roll(1500, 1), 30, 5.0, 1), 2),
    "5-D linear in 40-D, offset 300": (embed(gaussian(1500, 5, 2), 40, 300.0, 2), 5),
}


@pytest.fixture(scope="module", params=list(MANIFOLDS))
def manifold(request):
    X, dim = MANIFOLDS[request.param]
    return X, dim, knn_distances(X, 100)


def test_neighbour_distances_are_exact_even_with_a_large_offset():
    X = embed(helix(1500, 0), 12, 1000.0, 0)
    exact = np.sort(cdist(X, X), axis=1)[:, 1:101]
    assert np.abs(knn_distances(X, 100).numpy() / exact - 1).max() < 1e-5


def test_the_float32_guard_is_what_keeps_close_neighbours_exact(monkeypatch):
    X = embed(helix(1500, 0), 12, 1000.0, 0)
    exact = np.sort(cdist(X, X), axis=1)[:, 1:3]
    monkeypatch.setattr(neighbours, "RISK_RATIO", 0.0)
    assert np.abs(knn_distances(X, 2).numpy() / exact - 1).max() > 1e-3


@pytest.mark.parametrize("elements", [1, 100 * 12 * 7, 1 << 30])  # a row, 7 rows, every row at once
def test_the_exact_recomputation_gives_the_same_distances_in_blocks_of_any_size(monkeypatch, elements):
    X = embed(helix(1500, 0), 12, 1000.0, 0)  # every row at risk: its nearest neighbour within 1% of |x|
    expected = knn_distances(X, 100)
    monkeypatch.setattr(neighbours, "EXACT_BLOCK_ELEMENTS", elements)
    assert torch.equal(knn_distances(X, 100), expected)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (twonn, lambda X: skdim.id.TwoNN().fit(X).dimension_),
        (mada, lambda X: skdim.id.MADA().fit(X).dimension_),
        (mom, lambda X: skdim.id.MOM().fit(X).dimension_),
        (gride, lambda X: skdim.id.GRIDE().fit(X).dimension_),
    ],
)
def test_estimators_equal_scikit_dimension(manifold, ours, theirs):
    X, _, distances = manifold
    assert ours(distances) == pytest.approx(theirs(X), rel=1e-4)


def test_estimators_recover_the_dimension_of_a_manifold(manifold):
    X, dim, distances = manifold
    for estimator in (twonn, mada, gride):
        assert estimator(distances) == pytest.approx(dim, rel=0.15), estimator.__name__


def test_gride_at_larger_scales_recovers_the_dimension():
    distances = knn_distances(gaussian(3000, 4, 3), 16)
    assert gride(distances, 8, 16) == pytest.approx(4, rel=0.1)
    # n1 = 1, n2 = 2 without ties or outliers: the unbiased Pareto MLE (N - 1) / sum(log mu)
    uniform = knn_distances(np.random.default_rng(4).uniform(size=(1000, 3)), 2).numpy()
    log_mu = np.log(uniform[:, 1] / uniform[:, 0])
    kept = log_mu[np.exp(log_mu) < np.median(np.exp(log_mu)) + 20 * np.ptp(np.percentile(np.exp(log_mu), [50, 95]))]
    assert gride(uniform) == pytest.approx((len(kept) - 1) / kept.sum(), rel=1e-9)


def test_estimators_name_the_distances_they_need():
    with pytest.raises(ValueError, match="knn_distances\\(X, k=100\\)"):
        mom(np.ones((10, 20)))


def test_anisotropy_of_an_isotropic_gaussian_is_the_marchenko_pastur_edge():
    n, dim = 8000, 50
    X = gaussian(n, dim, 5)
    assert anisotropy(X) == pytest.approx((1 + np.sqrt(dim / n)) ** 2 / dim, rel=0.05)


def test_anisotropy_of_a_rank_one_spike():
    n, dim, strength = 40000, 20, 3.0
    rng = np.random.default_rng(6)
    direction = rng.standard_normal(dim)
    X = rng.standard_normal((n, dim)) + strength * rng.standard_normal((n, 1)) * direction / np.linalg.norm(direction)
    assert anisotropy(X) == pytest.approx((strength**2 + 1) / (strength**2 + dim), rel=0.03)


def test_a_common_offset_moves_uncentred_anisotropy_and_cosine_but_not_centred_anisotropy():
    X = gaussian(4000, 30, 7)
    shifted = X + 50.0
    assert anisotropy(shifted) == pytest.approx(anisotropy(X), rel=1e-9)
    assert anisotropy(shifted, centred=False) > 0.99
    assert average_cosine(shifted) > 0.99 and abs(average_cosine(X)) < 0.01


def test_uncentred_anisotropy_equals_the_singular_values_of_the_raw_matrix():
    X = gaussian(300, 20, 8) * np.linspace(1, 3, 20) + 2.0
    singular = np.linalg.svd(X, compute_uv=False)
    assert anisotropy(X, centred=False) == pytest.approx(singular[0] ** 2 / (singular**2).sum(), rel=1e-9)


@pytest.mark.parametrize("centred", [False, True])
def test_average_cosine_equals_the_brute_force_mean(centred):
    X = gaussian(300, 16, 9) + np.linspace(0, 2, 16)
    rows = X - X.mean(0) if centred else X
    cosines = 1 - pdist(rows, "cosine")  # each unordered pair once; the ordered mean is the same
    assert average_cosine(X, centred=centred) == pytest.approx(cosines.mean(), rel=1e-9)


def test_isotropy_iw_is_near_one_for_an_isotropic_gaussian_and_near_zero_for_an_offset():
    X = gaussian(20000, 8, 10)
    assert isotropy_iw(X) > 0.9
    assert isotropy_iw(X + 5.0) < 1e-3
    assert isotropy_iw(X + 500.0) == 0.0  # underflows to exactly 0, never NaN: logsumexp keeps log Z finite


def test_isotropy_iw_matches_the_definition_and_ignores_eigenvector_signs():
    X = gaussian(2000, 6, 11) * np.linspace(0.2, 1.0, 6) + 0.3
    _, eigenvectors = np.linalg.eigh(X.T @ X)
    z = np.exp(X @ np.hstack([eigenvectors, -eigenvectors])).sum(0)
    assert isotropy_iw(X) == pytest.approx(z.min() / z.max(), rel=1e-6)
    assert isotropy_iw(-X) == pytest.approx(isotropy_iw(X), rel=1e-6)


def hidden_state_like(n, dim, offset, seed):
    """A power-law spectrum in a random rotation, plus a large common offset along a random direction."""
    rng = np.random.default_rng(seed)
    rotation = np.linalg.qr(rng.standard_normal((dim, dim)))[0]
    shift = rng.standard_normal(dim)
    cloud = rng.standard_normal((n, dim)) * 0.2 * np.arange(1, dim + 1) ** -0.5
    return (cloud @ rotation + offset * shift / np.linalg.norm(shift)).astype(np.float32)


@pytest.mark.parametrize("offset", [1.0, 20.0, 100.0])
def test_isotropy_iw_from_the_float32_eigendecomposition_matches_float64(offset):
    X = hidden_state_like(3000, 256, offset, 23)
    W = X.astype(np.float64)
    _, eigenvectors = np.linalg.eigh(W.T @ W)
    projections = W @ np.hstack([eigenvectors, -eigenvectors])
    top = projections.max(0)
    log_z = top + np.log(np.exp(projections - top).sum(0))
    assert 0 < isotropy_iw(X) == pytest.approx(np.exp(log_z.min() - log_z.max()), rel=1e-3)


@pytest.mark.parametrize("data", ["isotropic", "hidden-state-like"])
def test_anisotropy_by_lanczos_equals_the_full_eigendecomposition(data):
    X = gaussian(2000, 300, 24) if data == "isotropic" else hidden_state_like(2000, 300, 30.0, 24)
    for centred in (True, False):
        rows = X.astype(np.float64) - X.mean(0, dtype=np.float64) if centred else X.astype(np.float64)
        eigenvalues = np.linalg.eigvalsh(rows.T @ rows)
        assert anisotropy(X, centred=centred) == pytest.approx(eigenvalues[-1] / eigenvalues.sum(), rel=1e-9)


def isoscore_algorithm_1(X):
    """IsoScore step by step as in Rudman et al. (2022), Algorithm 1."""
    dim = X.shape[1]
    variances = np.linalg.eigvalsh(np.cov(X.T))  # variance vector of the PCA-reoriented points
    normalised = np.sqrt(dim) * variances / np.linalg.norm(variances)
    defect = np.linalg.norm(normalised - 1) / np.sqrt(2 * (dim - np.sqrt(dim)))
    used = (dim - defect**2 * (dim - np.sqrt(dim))) ** 2 / dim**2
    return (dim * used - 1) / (dim - 1)


def test_isoscore_follows_algorithm_1_and_spans_zero_to_one():
    X = gaussian(1000, 12, 12) * np.linspace(0.1, 2.0, 12)
    assert isoscore(X) == pytest.approx(isoscore_algorithm_1(X), rel=1e-9)
    assert isoscore(gaussian(40000, 10, 13)) > 0.99
    assert isoscore(np.outer(np.arange(100.0), np.arange(1.0, 11.0))) < 1e-9


def test_metrics_accept_a_shared_vectors_object_and_torch_tensors():
    X = gaussian(500, 10, 14)
    vectors = Vectors(torch.from_numpy(X).float())
    assert anisotropy(vectors) == pytest.approx(anisotropy(X), rel=1e-5)
    assert isoscore(vectors) == pytest.approx(isoscore(X), rel=1e-5)


def test_duplicates_are_removed_and_counted():
    X = gaussian(600, 20, 15)
    with_repeats = np.vstack([X, X[:40], X[:10]])
    unique, removed = deduplicate(with_repeats)
    assert removed == 50 and unique.n == 600
    assert twonn(knn_distances(unique, 2)) == pytest.approx(twonn(knn_distances(X, 2)), rel=1e-9)
    result = compute_metrics(with_repeats, ["id_twonn", "anisotropy"], batch_size=650)
    assert result.info["duplicates_removed"] == {"total": 50, "per_batch": [50]}


def test_a_batch_with_few_distinct_vectors_caps_k_like_skdim(caplog):
    # The embedding layer of a byte-level model: 512 token vectors, only 60 distinct.
    X = np.repeat(gaussian(60, 8, 18), [9] * 32 + [8] * 28, axis=0)
    result = compute_metrics(X, ["id_twonn", "id_mada", "id_mom"], batch_size=512, context="layer 0")
    values = result.values.set_index("metric")["value"]
    unique, _ = deduplicate(X)
    assert result.info["duplicates_removed"]["total"] == 512 - 60
    assert values["id_mom"] == pytest.approx(mom(knn_distances(unique, 59), k=59), rel=1e-9)
    assert values["id_mada"] == pytest.approx(mada(knn_distances(unique, 20)), rel=1e-9)
    assert "layer 0: batch 0 has 60 distinct vectors; id_mom uses k = 59 instead of 100" in caplog.text
    assert "id_mada uses" not in caplog.text  # its 20 neighbours are there
    with pytest.raises(ValueError, match="only 2 distinct vectors of 512"):
        compute_metrics(np.repeat(gaussian(2, 8, 19), 256, axis=0), ["id_twonn"], batch_size=512)


def test_one_neighbour_search_per_batch_feeds_every_id_estimator(monkeypatch):
    calls = []
    search = batches.knn_distances
    monkeypatch.setattr(batches, "knn_distances", lambda X, k: calls.append(k) or search(X, k))
    compute_metrics(gaussian(900, 10, 16), batch_size=300)
    assert calls == [100, 100, 100]


def test_batches_summary_and_info():
    result = compute_metrics(gaussian(1000, 10, 17).astype(np.float16), batch_size=300, seed=3)
    assert len(result.values) == 3 * len(METRICS)
    summary = result.summary().set_index("metric")
    assert list(summary.index) == list(METRICS) and (summary["batches"] == 3).all()
    per_batch = result.values[result.values.metric == "id_mom"].value
    assert summary.loc["id_mom", "std"] == pytest.approx(per_batch.std(ddof=1))
    assert result.info | {"seconds": 0} == {
        "vectors": 1000,
        "dimension": 10,
        "batch_size": 300,
        "batches": 3,
        "metrics": list(METRICS),
        "duplicates_removed": {"total": 0, "per_batch": [0, 0, 0]},
        "device": "cpu",
        "seconds": 0,
        "settings": {
            "id_twonn": {"discard_fraction": 0.1},
            "id_mada": {"k": 20},
            "id_mom": {"k": 100},
            "id_gride": {"n1": 1, "n2": 2},
        },
    }
    single = compute_metrics(gaussian(400, 10, 17), ["isoscore"], batch_size=300).summary()
    assert np.isnan(single.loc[0, "std"])


def test_a_seed_fixes_the_batches():
    X = gaussian(1000, 10, 18)
    first, again = (compute_metrics(X, batch_size=400, seed=1).values for _ in range(2))
    assert first.equals(again)
    assert not first.equals(compute_metrics(X, batch_size=400, seed=2).values)


def test_non_finite_vectors_are_an_error_naming_the_layer():
    X = gaussian(500, 10, 19)
    X[123, 4] = np.inf
    with pytest.raises(
        ValueError,
        match="model m1, checkpoint step8, layer 3: 1 of 500 vectors contain NaN or Inf \\(first at row 123\\)",
    ):
        compute_metrics(X, batch_size=200, context="model m1, checkpoint step8, layer 3")


def test_too_few_vectors_is_an_error_stating_the_numbers():
    with pytest.raises(ValueError, match="layer 0: 100 vectors are fewer than one batch of batch_size=4096"):
        compute_metrics(gaussian(100, 10, 20), context="layer 0")
    with pytest.raises(ValueError, match="n_batches=3 batches of 200 need 600 vectors, got 500"):
        compute_metrics(gaussian(500, 10, 20), batch_size=200, n_batches=3)
    with pytest.raises(ValueError, match="at least 101 vectors per batch"):
        compute_metrics(gaussian(500, 10, 20), batch_size=50)


def test_cli_prints_every_metric_as_json(tmp_path, capsys):
    path = tmp_path / "vectors.npy"
    np.save(path, gaussian(700, 12, 21).astype(np.float32))
    cli.main([str(path), "--batch-size", "300"])
    output = json.loads(capsys.readouterr().out)
    assert set(output) == {*METRICS, "info"}
    assert output["id_twonn"]["batches"] == 2 and output["info"]["batches"] == 2
    cli.main([str(path), "--batch-size", "400", "--metrics", "anisotropy"])
    assert json.loads(capsys.readouterr().out)["anisotropy"]["std"] is None  # one batch


def test_cli_reads_a_parquet_shard_and_names_its_layer_in_errors(tmp_path, capsys):
    X = gaussian(500, 8, 22).astype(np.float16)
    path = tmp_path / "layer_0.parquet"
    write_shard(path, X, metadata={"model": "tiny", "checkpoint": "step8", "layer": 0})
    cli.main([str(path), "--batch-size", "250", "--metrics", "anisotropy"])
    assert json.loads(capsys.readouterr().out)["anisotropy"]["mean"] == pytest.approx(
        compute_metrics(X, ["anisotropy"], batch_size=250).summary()["mean"][0], rel=1e-6
    )
    with pytest.raises(SystemExit, match="model tiny, checkpoint step8, layer 0, .*: 500 vectors are fewer"):
        cli.main([str(path)])


def test_a_metric_setting_reaches_its_estimator_and_the_neighbour_search(monkeypatch):
    X = gaussian(600, 8, 5)
    distances = knn_distances(deduplicate(X)[0], 2)
    for fraction in (0.0, 0.1, 0.3):
        found = compute_metrics(
            X, ["id_twonn"], batch_size=600, settings={"id_twonn": {"discard_fraction": fraction}}
        ).values["value"]
        assert found.item() == pytest.approx(twonn(distances, discard_fraction=fraction), rel=1e-9)
    assert twonn(distances, 0.0) != pytest.approx(twonn(distances, 0.3), rel=1e-3)
    assert np.isfinite(twonn(distances, 0.0))  # the largest ratio, whose -log(1 - N/N) is infinite, stays out
    calls = []
    search = batches.knn_distances
    monkeypatch.setattr(batches, "knn_distances", lambda X, k: calls.append(k) or search(X, k))
    found = compute_metrics(X, ["id_mada", "id_twonn"], batch_size=600, settings={"id_mada": {"k": 8}})
    assert calls == [8]  # MADA's k sets the one search; TwoNN reads its first 2 columns
    assert found.values.set_index("metric")["value"]["id_mada"] == pytest.approx(
        mada(knn_distances(deduplicate(X)[0], 8), k=8), rel=1e-9
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"id_mada": {"neighbours": 5}},
            "metric 'id_mada' has no setting 'neighbours'; its settings: k \\(default 20\\)",
        ),
        ({"id_mom": {"k": 2.5}}, "setting k=2.5 must be a int"),
        ({"anisotropy": {"centred": False}}, "metric 'anisotropy' has no setting 'centred'; its settings: none"),
        ({"id_gride": {}}, "settings given for \\['id_gride'\\], which are not among the metrics computed"),
    ],
)
def test_a_setting_that_is_no_parameter_of_the_metric_is_refused_naming_the_allowed_ones(settings, message):
    with pytest.raises(ValueError, match=message):
        compute_metrics(gaussian(300, 6, 5), ["id_mada", "id_mom", "anisotropy"], batch_size=300, settings=settings)


# What each metric name means, written out independently of the registry: the public function a user would call on
# the batch (X) or on the sorted distances of its distinct vectors to their nearest neighbours (d).
MEANING = {
    "anisotropy": lambda X, d: anisotropy(X),
    "anisotropy_uncentred": lambda X, d: anisotropy(X, centred=False),
    "avg_cosine": lambda X, d: average_cosine(X),
    "avg_cosine_centred": lambda X, d: average_cosine(X, centred=True),
    "id_twonn": lambda X, d: twonn(d, discard_fraction=0.1),
    "id_mada": lambda X, d: mada(d, k=20),
    "id_mom": lambda X, d: mom(d, k=100),
    "id_gride": lambda X, d: gride(d),
    "isotropy_iw": lambda X, d: isotropy_iw(X),
    "isoscore": lambda X, d: isoscore(X),
}


def test_each_metric_name_computes_what_it_says():
    X = gaussian(600, 8, 23)
    distances = knn_distances(deduplicate(X)[0], 100)
    result = compute_metrics(X, list(MEANING), batch_size=600).values.set_index("metric")["value"]  # one batch: all X
    for name, meaning in MEANING.items():
        assert result[name] == pytest.approx(meaning(X, distances), rel=1e-9), name


def test_the_pipeline_runs_the_id_estimators_at_scikit_dimension_s_defaults():
    X = embed(helix(1500, 7), 6, 0.0, 7)
    found = compute_metrics(X, ["id_twonn", "id_mada", "id_mom", "id_gride"], batch_size=1500).values
    theirs = {
        "id_twonn": skdim.id.TwoNN(),
        "id_mada": skdim.id.MADA(),
        "id_mom": skdim.id.MOM(),
        "id_gride": skdim.id.GRIDE(),
    }
    for name, value in zip(found["metric"], found["value"]):
        assert value == pytest.approx(theirs[name].fit(X).dimension_, rel=1e-4), name


def preset(**metrics) -> dict:
    config = yaml.safe_load((REPO / "presets/demo.yaml").read_text())
    config["metrics"] |= metrics
    return config


@pytest.mark.parametrize("name", list(METRICS))
def test_the_config_schema_accepts_every_registered_metric(name):
    config = preset(names=[name])
    config["figures"]["anisotropy_by_layer"]["metric"] = name
    assert validate_config(config)["metrics"]["names"] == [name]


def test_the_config_schema_rejects_an_unknown_metric_naming_the_registered_ones():
    allowed = f"is not allowed; allowed: {', '.join(METRICS)}"
    with pytest.raises(ConfigError, match=re.escape(f"config.metrics.names.1: 'id_foo' {allowed}")):
        validate_config(preset(names=["anisotropy", "id_foo"]))
    config = preset()
    config["figures"]["anisotropy_by_layer"]["metric"] = "anisotropy_foo"
    key = "config.figures.anisotropy_by_layer.metric"
    with pytest.raises(ConfigError, match=re.escape(f"{key}: 'anisotropy_foo' {allowed}")):
        validate_config(config)


def test_registry_schema_default_labels_and_compute_metrics_agree():
    config = preset()
    assert "names" not in config["metrics"]  # the demo computes the default: every registered metric
    assert validate_config(config)["metrics"]["names"] == list(METRICS)
    assert all(metric_label(name) not in ("", name) for name in METRICS)
    assert list(compute_metrics(gaussian(300, 6, 24), batch_size=300).summary()["metric"]) == list(METRICS)
    with pytest.raises(ValueError, match=re.escape(f"unknown metrics ['id_foo']; choose from {list(METRICS)}")):
        compute_metrics(gaussian(300, 6, 24), ["id_foo"], batch_size=300)
