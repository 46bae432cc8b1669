"""Every metric the pipeline measures, declared once.

`METRICS` is the one list of metrics: `compute_metrics` dispatches from it, the config schema's accepted names and
the default `metrics.names` are filled in from it (`shape_of_learning.experiment.config`), and the figures take their
axis labels from it. Adding a metric is writing its function in a module of this package and adding one `Metric`
below.

A metric's settings (TwoNN's discarded fraction, MADA's and MoM's neighbour counts, ...) are its function's keyword
parameters, with the function's defaults: stated in its signature and docstring only. The config overrides them by
metric name (`metrics.settings: {id_mada: {k: 10}}`), and they reach the function through `Metric.settings`.

What a metric needs decides what it is given, once per batch:
  "vectors"     the batch as a `Vectors` (the rows, centred once in float64 on the device);
  "gram"        the same `Vectors`, whose Gram matrix, top eigenvalues and eigendecomposition are cached and shared;
  "neighbours"  the sorted distances of the batch's distinct vectors to their nearest neighbours, from the one exact
                k-nearest-neighbour search of the batch (k = the most neighbours any requested metric reads).
Functions are named as "module.function" of this package and imported when first used, so that planning a DAG
(which reads names and labels only) does not import torch.
"""

import inspect
from dataclasses import dataclass, field
from importlib import import_module
from typing import Callable, Literal

Needs = Literal["vectors", "gram", "neighbours"]
NOT_SETTINGS = ("device",)  # keyword parameters of a metric function that are no setting of the metric


@dataclass(frozen=True)
class Metric:
    """One metric: its name (in `metrics.names` and the tables), its axis label, and how `compute_metrics` calls it.

    `keywords` are fixed arguments that make the metric what it is (centred or not); the function's other keyword
    parameters are its settings. `neighbours` ("neighbours" metrics only): how many nearest neighbours of each point
    it reads, a number or the name of the setting that says so (MADA's `k`); where a batch has fewer distinct vectors
    than that plus one, the setting is lowered to what the batch has, as scikit-dimension does.
    """

    name: str
    label: str
    needs: Needs
    function: str
    keywords: dict = field(default_factory=dict)
    neighbours: int | str = 0

    def resolve(self) -> Callable:
        module, _, name = self.function.rpartition(".")
        return getattr(import_module(f"{__package__}.{module}"), name)

    def settings(self, overrides: dict | None = None) -> dict:
        """The function's settings with their defaults, `overrides` (the config's `metrics.settings.<name>`) applied;
        a key that is no setting, or a value of another type than the default's, raises ValueError naming both."""
        parameters = list(inspect.signature(self.resolve()).parameters.values())[1:]  # the first is the data
        defaults = {p.name: p.default for p in parameters if p.name not in (*self.keywords, *NOT_SETTINGS)}
        overrides = overrides or {}
        if unknown := sorted(set(overrides) - set(defaults)):
            raise ValueError(
                f"metric {self.name!r} has no setting {', '.join(map(repr, unknown))}; its settings: "
                f"{', '.join(f'{k} (default {v})' for k, v in defaults.items()) or 'none'}"
            )
        for key, value in overrides.items():
            wanted = float if isinstance(defaults[key], float) else type(defaults[key])
            if isinstance(value, bool) or not isinstance(value, (int, float) if wanted is float else wanted):
                raise ValueError(
                    f"metric {self.name!r}: setting {key}={value!r} must be a {wanted.__name__} "
                    f"(default {defaults[key]!r})"
                )
        return defaults | overrides

    def neighbours_read(self, settings: dict) -> int:
        """How many neighbours of each point the metric reads with these `settings` (0 unless it needs them)."""
        return settings[self.neighbours] if isinstance(self.neighbours, str) else self.neighbours

    def compute(self, data, settings: dict) -> float:
        """The metric of one batch: `data` is its `Vectors`, or its neighbour distances (needs "neighbours");
        `settings` as `settings()` returns them."""
        return self.resolve()(data, **self.keywords, **settings)


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in [
        Metric(
            "anisotropy",
            r"Anisotropy ($\sigma_1^2 / \Sigma_i\, \sigma_i^2$)",
            "gram",
            "explained_variance.anisotropy",
            {"centred": True},
        ),
        Metric(
            "anisotropy_uncentred",
            r"Anisotropy, uncentred ($\sigma_1^2 / \Sigma_i\, \sigma_i^2$)",
            "gram",
            "explained_variance.anisotropy",
            {"centred": False},
        ),
        Metric("avg_cosine", "Average cosine similarity", "vectors", "cosine.average_cosine", {"centred": False}),
        Metric(
            "avg_cosine_centred",
            "Average cosine similarity (centred)",
            "vectors",
            "cosine.average_cosine",
            {"centred": True},
        ),
        Metric("id_twonn", "Intrinsic dimension (TwoNN)", "neighbours", "intrinsic_dimension.twonn", neighbours=2),
        Metric("id_mada", "Intrinsic dimension (MADA)", "neighbours", "intrinsic_dimension.mada", neighbours="k"),
        Metric("id_mom", "Intrinsic dimension (MoM)", "neighbours", "intrinsic_dimension.mom", neighbours="k"),
        Metric("id_gride", "Intrinsic dimension (GRIDE)", "neighbours", "intrinsic_dimension.gride", neighbours="n2"),
        Metric("isotropy_iw", "Isotropy I(W)", "gram", "isotropy.isotropy_iw"),
        Metric("isoscore", "IsoScore", "gram", "isotropy.isoscore"),
    ]
}
