"""Every metric the pipeline measures, declared once.

`METRICS` is the one list of metrics: `compute_metrics` dispatches from it, the config schema's accepted names and
the default `metrics.names` are filled in from it (`shape_of_learning.experiment.validate_config`), and the figures
take their axis labels from it. Adding a metric is writing its function in a module of this package and adding one
`Metric` below.

What a metric needs decides what it is given, once per batch:
  "vectors"     the batch as a `Vectors` (the rows, centred once in float64 on the device);
  "gram"        the same `Vectors`, whose Gram matrix, top eigenvalues and eigendecomposition are cached and shared;
  "neighbours"  the sorted distances of the batch's distinct vectors to their nearest neighbours, from the one exact
                k-nearest-neighbour search of the batch (k = the largest `neighbours` among the requested metrics).
Functions are named as "module.function" of this package and imported when first measured, so that planning a DAG
(which reads names and labels only) does not import torch.
"""

from dataclasses import dataclass, field
from importlib import import_module
from typing import Literal

Needs = Literal["vectors", "gram", "neighbours"]


@dataclass(frozen=True)
class Metric:
    """One metric: its name (in `metrics.names` and the tables), its axis label, and how `compute_metrics` calls it.

    `keywords` are fixed arguments of the function; `settings` maps a parameter of the function to the
    `compute_metrics` setting it receives (e.g. TwoNN's discarded fraction). `neighbours`: how many nearest
    neighbours per point a "neighbours" metric reads; a `k` keyword is capped at the neighbours a batch has (fewer
    distinct vectors than k + 1), as scikit-dimension does.
    """

    name: str
    label: str
    needs: Needs
    function: str
    keywords: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    neighbours: int = 0

    def compute(self, data, **settings) -> float:
        """The metric of one batch: `data` is its `Vectors`, or its neighbour distances (needs "neighbours")."""
        module, _, name = self.function.rpartition(".")
        function = getattr(import_module(f"{__package__}.{module}"), name)
        keywords = self.keywords | {parameter: settings[setting] for parameter, setting in self.settings.items()}
        if "k" in keywords:
            keywords["k"] = min(keywords["k"], data.shape[1])
        return function(data, **keywords)


METRICS: dict[str, Metric] = {metric.name: metric for metric in [
    Metric("anisotropy", r"Anisotropy ($\sigma_1^2 / \Sigma_i\, \sigma_i^2$)", "gram",
           "explained_variance.anisotropy", {"centred": True}),
    Metric("anisotropy_uncentred", r"Anisotropy, uncentred ($\sigma_1^2 / \Sigma_i\, \sigma_i^2$)", "gram",
           "explained_variance.anisotropy", {"centred": False}),
    Metric("avg_cosine", "Average cosine similarity", "vectors", "cosine.average_cosine", {"centred": False}),
    Metric("avg_cosine_centred", "Average cosine similarity (centred)", "vectors", "cosine.average_cosine",
           {"centred": True}),
    Metric("id_twonn", "Intrinsic dimension (TwoNN)", "neighbours", "intrinsic_dimension.twonn",
           settings={"discard_fraction": "twonn_discard_fraction"}, neighbours=2),
    Metric("id_mada", "Intrinsic dimension (MADA)", "neighbours", "intrinsic_dimension.mada", {"k": 20},
           neighbours=20),
    Metric("id_mom", "Intrinsic dimension (MoM)", "neighbours", "intrinsic_dimension.mom", {"k": 100},
           neighbours=100),
    Metric("id_gride", "Intrinsic dimension (GRIDE)", "neighbours", "intrinsic_dimension.gride", neighbours=2),
    Metric("isotropy_iw", "Isotropy I(W)", "gram", "isotropy.isotropy_iw"),
    Metric("isoscore", "IsoScore", "gram", "isotropy.isoscore"),
]}
