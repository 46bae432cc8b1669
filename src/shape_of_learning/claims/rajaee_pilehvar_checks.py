"""The checks of Rajaee & Pilehvar's claims (`rajaee_pilehvar`): on the per-layer I(W) of each pair (Figure 1) and
on its block of Tables 1-2, each judged with the predicates (`predicates`) and the config's thresholds. A check that
reads I(W) is judged in both of its conventions (`CONVENTIONS`, `in_both_conventions`): whether fine-tuning raises
I(W) can differ between them, and a verdict that does says so ("depends on the I(W) convention")."""

import functools
import math

import numpy as np
import pandas as pd

from shape_of_learning.claims.claim import Group
from shape_of_learning.claims.inputs import ONE_SEED, SETTING_NAMES, without_degenerate
from shape_of_learning.claims.predicates import (
    Margin,
    NotMeasurable,
    Verdict,
    above,
    every,
    judged,
    majority,
    num,
    std_units,
    under_each,
)

CONVENTIONS = {  # the columns of the two I(W): each eigenvector as u and -u (no eigensolver's sign changes it), and
    "sign-free I(W)": "isotropy",  # each once with the sign np.linalg.eig returns, as the authors' notebook
    "the notebook's I(W)": "isotropy_notebook",
}
CONVENTION = "the I(W) convention"


def in_both_conventions(check):
    """`check(group, reader, settings, column)` judged on the I(W) of each of `CONVENTIONS`: their common verdict, or
    one that depends on the I(W) convention, with both values (`predicates.under_each`)."""

    @functools.wraps(check)
    def in_both(group: Group, reader, settings: dict) -> Verdict:
        verdicts = {name: judged(check, group, reader, settings, column) for name, column in CONVENTIONS.items()}
        return under_each(verdicts, CONVENTION)

    return in_both


# --- per-layer views (Figure 1) -----------------------------------------------------------------------------------


def _view(layers: pd.DataFrame, tokens: str) -> pd.DataFrame:
    """One view's I(W) per layer (all tokens, or [CLS]), the layers marked degenerate left out."""
    return without_degenerate(layers[layers["tokens"] == tokens]).set_index("layer").sort_index()


def _per_layer(
    reader, group: Group, pretrained: str, runs: list[str], column: str, tokens: str = "all"
) -> tuple[pd.Series, list[pd.Series]]:
    """-ln I(W) (`column`: a convention's) per layer of the pre-trained model and of each seed's fine-tuned run, on
    the layers where no view is degenerate (Figure 1's axis)."""
    if len(runs) < 2:
        raise NotMeasurable(ONE_SEED)
    before = _view(reader.frame(group, f"layers:{pretrained}"), "all")[column]
    after = [_view(reader.frame(group, f"layers:{run}"), tokens)[column] for run in runs]
    layers = before.index.intersection(pd.Index(sorted(set.intersection(*(set(a.index) for a in after)))))
    if layers.empty:
        raise NotMeasurable("no layer whose views are not degenerate")
    return -np.log(before[layers]), [-np.log(found[layers]) for found in after]


def _over_seeds(values: list) -> tuple:
    """The mean and std (ddof 1) over seeds of per-seed values: numbers, or Series by layer."""
    if isinstance(values[0], pd.Series):
        table = pd.concat(values, axis=1)
        return table.mean(axis=1), table.std(axis=1, ddof=1)
    return float(np.mean(values)), float(np.std(values, ddof=1))


@in_both_conventions
def check_finetuning_improves_upper_layers(group: Group, reader, settings: dict, column: str) -> Verdict:
    before, after = _per_layer(reader, group, group.arguments["pretrained"], group.arguments["runs"], column)
    gains = [before - found for found in after]  # ln I(W) fine-tuned less pre-trained
    upper = before.index[before.index > before.index.max() / 2]
    lower = before.index.difference(upper)
    if upper.empty or lower.empty:
        raise NotMeasurable("no upper or no lower layer whose views are not degenerate")
    margin, zero, parts = Margin.of(settings), (0.0, 0.0), {}
    for part, per_seed in (
        ("improves overall", [gain.mean() for gain in gains]),
        ("improves in the upper layers", [gain[upper].mean() for gain in gains]),
        ("mostly there", [gain[upper].mean() - gain[lower].mean() for gain in gains]),
    ):
        parts[part] = above(_over_seeds(per_seed), zero, margin=margin, what="ln I(W) gain")
    parts["stays highly anisotropic"] = _under_everywhere(
        [np.exp(-found) for found in after], settings["highly_anisotropic_iw"], margin
    )
    return every(parts)


def _under_everywhere(per_seed: list[pd.Series], level: float, margin: Margin) -> Verdict:
    """Every layer's value, mean over seeds, lies under `level` by `margin` (std over seeds of the difference)."""
    means, stds = _over_seeds(per_seed)
    over = [layer for layer in means.index if not margin.counts((level, 0.0), (means[layer], stds[layer]))]
    return Verdict(
        not over,
        f"largest fine-tuned I(W) {num(means.max())} at layer {means.idxmax()}",
        f"not under {level} by {margin.std} std at layer(s) {', '.join(map(str, over))}" if over else "",
    )


@in_both_conventions
def check_cls_more_anisotropic(group: Group, reader, settings: dict, column: str) -> Verdict:
    arguments = group.arguments["pretrained"], group.arguments["runs"], column
    every_token, cls = (_per_layer(reader, group, *arguments, tokens)[1] for tokens in ("all", "cls"))
    layers = every_token[0].index.intersection(cls[0].index)
    gap, gap_std = _over_seeds([c[layers] - t[layers] for c, t in zip(cls, every_token)])  # [CLS] less all tokens
    much_more, margin = (math.log(settings["much_more_anisotropic"]), 0.0), Margin.of(settings)
    verdict = majority(
        {f"layer {layer}": margin.counts((gap[layer], gap_std[layer]), much_more) for layer in layers},
        share=settings["most_layers"],
    )
    return Verdict(
        verdict.holds,
        f"-ln I(W) of [CLS] less that of all tokens, mean over seeds: {num(gap.min())} to "
        f"{num(gap.max())}; layers counted: {verdict.measured}",
        verdict.reason,
    )


@in_both_conventions
def check_roberta_more_anisotropic(group: Group, reader, settings: dict, column: str) -> Verdict:
    views = {
        paper: _per_layer(reader, group, *group.arguments["sides"][paper], column) for paper in ("BERT", "RoBERTa")
    }
    bert, roberta = views["BERT"], views["RoBERTa"]
    if bert[0].index.max() != roberta[0].index.max():
        raise NotMeasurable("the two pre-trained models differ in depth: their layers cannot be set side by side")
    parts, margin = {}, Margin.of(settings)
    for state, of in (
        ("pre-trained", lambda view: (view[0], 0 * view[0])),
        ("fine-tuned", lambda view: _over_seeds(view[1])),
    ):
        (high, high_std), (low, low_std) = of(roberta), of(bert)
        counted = {
            f"layer {layer}": margin.counts((high[layer], high_std[layer]), (low[layer], low_std[layer]))
            for layer in high.index.intersection(low.index)
        }
        verdict = majority(counted, share=settings["most_layers"])
        parts[state] = Verdict(
            verdict.holds, f"-ln I(W) of RoBERTa's over BERT's in {verdict.measured}", verdict.reason
        )
    return every(parts)


# --- Tables 1-2 -----------------------------------------------------------------------------------------------------


def _cells(
    reader, group: Group, table: str, state: str, learned: bool = True, column: str = "isotropy"
) -> dict[tuple, dict]:
    """(setting, which, removed) -> {"performance": (mean, std), "isotropy": (mean, std)}: one state of the pair's
    block of Table 1 or 2, I(W) in the convention of `column`. A fine-tuned model that did not learn its task (the
    tables' `learned`) is no fine-tuned model to judge a claim on, unless `learned` is False: the claim that
    fine-tuning raises performance."""
    found = reader.frame(group, table)
    found = found[
        (found["dataset"] == group.arguments["dataset"])
        & (found["pair"] == group.arguments["pair"])
        & (found["state"] == state)
    ]
    if found.empty:
        raise NotMeasurable(f"no {state} rows of {group.label} in {table}")
    if learned and state == "fine-tuned" and not found["learned"].fillna(True).astype(bool).all():
        raise NotMeasurable(
            f"{group.arguments['pair']}: the fine-tuning did not learn its task ({table}'s `learned`"
            " is False): its model is no fine-tuned model to judge; fine-tune it until it learns "
            "(docs/rajaee-pilehvar.md)"
        )
    if found[["performance_std", f"{column}_std"]].isna().any().any():
        raise NotMeasurable(ONE_SEED)
    return {
        (row.setting, row.which, int(row.removed)): {
            "performance": (row.performance, row.performance_std),
            "isotropy": (getattr(row, column), getattr(row, f"{column}_std")),
        }
        for row in found.itertuples()
    }


def _setting(cells: dict, setting: str, which: str = "top") -> list[tuple[int, dict]]:
    """The cells of one setting, by removal count; NotMeasurable where the table has none."""
    found = [
        (removed, value) for (name, kind, removed), value in sorted(cells.items()) if (name, kind) == (setting, which)
    ]
    if not found:
        raise NotMeasurable(f"no {SETTING_NAMES[setting]} ({which} directions) cell")
    return found


def _top(cells: dict, setting: str) -> dict:
    return _setting(cells, setting)[0][1]


def check_sts_performance_rises(group: Group, reader, settings: dict) -> Verdict:
    tuned, pretrained = (
        _top(_cells(reader, group, "table1", state, learned=False), "baseline")
        for state in ("fine-tuned", "pre-trained")
    )
    return above(
        tuned["performance"],
        pretrained["performance"],
        margin=Margin.of(settings),
        what="Baseline Perf. fine-tuned against pre-trained",
    )


@in_both_conventions
def check_enhancement_hurts_finetuned(group: Group, reader, settings: dict, column: str) -> Verdict:
    margin, parts = Margin.of(settings), {}
    for state, settings_judged in (
        ("fine-tuned", ("cluster_zero_mean", "global", "cluster_based")),
        ("pre-trained", ("cluster_zero_mean", "cluster_based")),
    ):
        cells = _cells(reader, group, "table1", state, column=column)
        base = _top(cells, "baseline")
        for setting in settings_judged:
            value, name = _top(cells, setting), f"{state} {SETTING_NAMES[setting]}"
            if state == "pre-trained":  # the enhancement helps a pre-trained space
                parts[name] = above(
                    value["performance"], base["performance"], margin=margin, what="Perf. over Baseline"
                )
                continue
            lower = above(base["performance"], value["performance"], margin=margin, what="Perf. under Baseline")
            raised = above(value["isotropy"], base["isotropy"], margin=margin, what="I(W) over Baseline")
            parts[name] = Verdict(
                lower.holds and raised.holds,
                f"{raised.measured}; {lower.measured}",
                "; ".join(filter(None, [raised.reason, lower.reason])),
            )
    return every(parts)


@in_both_conventions
def check_finetuned_less_isotropic(group: Group, reader, settings: dict, column: str) -> Verdict:
    tuned, pretrained = (
        _cells(reader, group, "table1", state, column=column) for state in ("fine-tuned", "pre-trained")
    )
    return every(
        {
            SETTING_NAMES[setting]: above(
                _top(pretrained, setting)["isotropy"],
                _top(tuned, setting)["isotropy"],
                margin=Margin.of(settings),
                what="I(W) pre-trained over fine-tuned",
            )
            for setting in ("global", "cluster_based")
        }
    )


def check_least_directions_cost_less(group: Group, reader, settings: dict) -> Verdict:
    top, least = _cells(reader, group, "table1", "fine-tuned"), _cells(reader, group, "table2", "fine-tuned")
    parts = {}
    for setting in ("global", "cluster_based"):
        removed_top, top_cell = _setting(top, setting)[0]
        for removed, cell in _setting(least, setting, "least"):
            parts[f"{SETTING_NAMES[setting]}, {removed} least vs {removed_top} top"] = above(
                cell["performance"], top_cell["performance"], margin=Margin.of(settings), what="Perf."
            )
    return every(parts)


def check_least_directions_barely_matter(group: Group, reader, settings: dict) -> Verdict:
    least, margin = _cells(reader, group, "table2", "fine-tuned"), Margin.of(settings)
    base, limit, parts = _top(least, "baseline")["performance"], settings["barely_moves"], {}
    for setting in ("global", "cluster_based"):
        for removed, cell in _setting(least, setting, "least"):
            change = cell["performance"][0] - base[0]
            apart = margin.apart((limit, 0.0), (abs(change), math.hypot(cell["performance"][1], base[1])))
            parts[f"{SETTING_NAMES[setting]}, {removed} least"] = Verdict(
                margin.clears(apart),
                f"Perf. {num(cell['performance'][0])} against the Baseline's {num(base[0])} ({change:+.3g}, "
                f"{std_units(apart)} within {limit})",
                "" if margin.clears(apart) else f"moves {change:+.3g} points, not within {limit} by {margin.std} std",
            )
    return every(parts)
