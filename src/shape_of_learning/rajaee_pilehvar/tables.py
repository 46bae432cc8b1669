"""Tables 1 and 2 of Rajaee & Pilehvar (2021): our values, mean and std over seeds, beside the paper's, as tidy CSV
and as HTML tables laid out like the paper's."""

from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from . import CITATION

PAPER_VALUES = Path(__file__).with_name("paper_values.csv")
VARIANT = ["setting", "which", "removed"]
ROW = ["dataset", "model", "state", "paper_model"]
SPREAD_OVER_SEEDS = ["performance", "isotropy", "isotropy_notebook"]  # mean and std over seeds
REMOVED = ["directions_removed", "directions_with_variance", "clusters_collapsed"]  # analysis's, from settings.Removal
MEASURES = [*SPREAD_OVER_SEEDS, "isotropy_u_only_min", "isotropy_u_only_max", *REMOVED]  # the rest: mean over seeds
SAME_FOR_EVERY_SEED = ["layer", "tokens", "texts", "pairs", "dropped_pairs", "dtype"]
COLUMNS = [
    *ROW,
    *VARIANT,
    "paper_removed",
    "performance",
    "performance_std",
    "performance_se",
    "paper_performance",
    "isotropy",
    "isotropy_std",
    "isotropy_notebook",
    "isotropy_notebook_std",
    "isotropy_u_only_min",
    "isotropy_u_only_max",
    *REMOVED,
    "paper_isotropy",
    "learned",
    "layer",
    "tokens",
    "texts",
    "pairs",
    "pair",
    "seeds",
    "dropped_pairs",
    "dtype",
]
# the paper's names of the settings (Table 1's columns)
SETTING_NAMES = {
    "baseline": "Baseline",
    "zero_mean": "Zero-mean",
    "cluster_zero_mean": "Clustering+ZM",
    "global": "Global",
    "cluster_based": "Cluster-based",
}


def paper_values() -> pd.DataFrame:
    """Every cell of the paper's Tables 1-2 (one row per cell pair: performance, isotropy), from paper_values.csv."""
    return pd.read_csv(PAPER_VALUES, comment="#")


def over_seeds(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (pair, dataset, model, state, paper_model, table, variant): the mean of each of `MEASURES` over
    the seeds, the standard deviation (ddof = 1; NaN for one seed) of each of `SPREAD_OVER_SEEDS` as `{measure}_std`,
    the standard error of the mean performance over the pairs (`spearman_se_x100`) and `seeds`, how many."""
    grouped = results.groupby(["pair", *ROW, "table", *VARIANT], dropna=False, sort=False)
    found = pd.concat(
        [
            grouped[MEASURES].mean(),
            grouped[SPREAD_OVER_SEEDS].std(ddof=1).add_suffix("_std"),
            grouped[SAME_FOR_EVERY_SEED].first(),
            grouped.size().rename("seeds"),
        ],
        axis=1,
    ).reset_index()
    return found.assign(performance_se=spearman_se_x100(found["performance"], found["pairs"]))


def comparison(results: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Tables 1 and 2, tidy (`COLUMNS`): our performance and I(W) (sign-free; the notebook's; the one-sign range),
    mean and std over seeds (`over_seeds`), beside the paper's values as printed for the same paper model, state and
    setting, and whether each fine-tuned model learned its task (`learned`). Table 2 is every state's baseline plus
    the least-directions variants; its variants are matched to the paper's by order (our first and second
    `least_directions` beside the paper's 100 and 700, so a smaller model's 17 and 117 of 128 still stand beside
    them), and `paper_removed` says which.

    `results` has one row per (pair, dataset, model, state, paper_model, table, setting, which, removed, seed) with
    the columns of `MEASURES` and `SAME_FOR_EVERY_SEED`; paper_model may be None (no paper values) in any row, or all.
    """
    paper = paper_values().rename(
        columns={
            "model": "paper_model",
            "performance": "paper_performance",
            "isotropy": "paper_isotropy",
            "removed": "paper_removed",
        }
    )
    ours_over_seeds = learned(over_seeds(results).astype({"paper_model": object}))  # all None: no float column
    tables = {}
    for table in (1, 2):
        ours = ours_over_seeds[
            (ours_over_seeds["table"] == table) | ((table == 2) & (ours_over_seeds["setting"] == "baseline"))
        ]
        ours = ours.drop(columns="table").assign(table=table)
        key = ["table", "paper_model", "state", "setting", "which", "order"]
        merged = _order(ours, "removed", ["pair", *ROW]).merge(
            _order(paper, "paper_removed", ["paper_model", "state"]), on=key, how="left"
        )
        tables[table] = merged[COLUMNS].reset_index(drop=True)
    return tables


def spearman_se_x100(performance, pairs):
    """The standard error of Spearman x 100 over `pairs` rated pairs, at its value `performance`: the variance of
    Fisher's z of a Spearman correlation is 1.06 / (n - 3) (Fieller, Hartley & Pearson 1957, Biometrika 44), carried
    back to the correlation as (1 - rho^2) sqrt(1.06 / (n - 3)). 344 pairs at rho = 0 give 5.6."""
    rho = np.asarray(performance, dtype=float) / 100
    return 100 * (1 - rho**2) * np.sqrt(1.06 / (np.asarray(pairs, dtype=float) - 3))


def learned(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with `learned` on every fine-tuned row: whether its Baseline performance (the pooled vector its
    fine-tuning trains) tops the pre-trained model's on the same pairs by more than two standard errors of the
    difference, sqrt(se_fine-tuned^2 + se_pre-trained^2) (`spearman_se_x100`, the two taken as independent: a
    lenient test would credit the shared pairs). A fine-tuning that did not learn its task makes no fine-tuned
    model to compare: its rows are labelled so. None on the other rows."""
    baseline = rows[(rows["table"] == 1) & (rows["setting"] == "baseline")].set_index(["pair", "dataset", "state"])
    flags = []
    for pair, dataset, state in zip(rows["pair"], rows["dataset"], rows["state"]):
        if state != "fine-tuned":
            flags.append(None)
            continue
        tuned, before = baseline.loc[(pair, dataset, "fine-tuned")], baseline.loc[(pair, dataset, "pre-trained")]
        margin = 2 * np.hypot(tuned["performance_se"], before["performance_se"])
        flags.append(bool(tuned["performance"] - before["performance"] > margin))
    return rows.assign(learned=pd.Series(flags, index=rows.index, dtype=object))


def _order(rows: pd.DataFrame, removed: str, group: list[str]) -> pd.DataFrame:
    """Number each variant's removal counts 0, 1, ... within its table, row and setting (a row without a paper
    model, paper_model None, is a group of its own)."""
    order = rows.groupby(["table", *group, "setting", "which"], dropna=False)[removed].rank(method="dense") - 1
    return rows.assign(order=order.astype(int))


STYLE = (
    "table {border-collapse: collapse; font: 12px sans-serif; margin-bottom: 1.5em} "
    "td, th {border: 1px solid #ccc; padding: 2px 6px; text-align: right} caption {text-align: left}"
)


REMOVAL_NOTE = (
    "Top or least k removed: the first or the last k of a set's principal components as the authors' notebook takes "
    "them (scikit-learn's PCA().components_: min(n, D) of them for n tokens in D dimensions, at most n - 1 carrying "
    "variance); Global: all tokens as one set, centred; Cluster-based: each cluster, centred on its mean. A set with "
    "no more than k components loses all of them: its tokens collapse to the origin. Removed: the directions "
    "removed, summed over the clusters, with how many of them carried variance and how many sets collapsed (mean "
    "over seeds)."
)


def render(table: pd.DataFrame, title: str) -> str:
    """HTML tables as the paper prints its Tables 1-2, one per dataset and pair (or model measured alone): the
    settings as rows; per model and state, our Spearman x 100 (Perf., mean +- std over seeds, and its standard
    error over the pairs) and I(W) (sign-free, mean +- std), what the authors' notebook computes on the same vectors,
    and the range of the one-sign I(W) over random signs, each beside the paper's value as printed where the paper
    has one, and what the setting removed (`REMOVAL_NOTE`). A fine-tuned model that did not learn its task is
    labelled "not learned" (`learned`)."""
    sections = [f"<h3>{escape(title)}</h3>", f"<p>{escape(REMOVAL_NOTE)}</p>"]
    for (dataset, pair), block in table.groupby(["dataset", "pair"], sort=False):
        dropped = block["dropped_pairs"].iloc[0]
        seeds = block.groupby(["model", "state"], sort=False)["seeds"].first()
        caption = (
            f"{dataset}, {pair}: {block['pairs'].iloc[0]} pairs"
            f"{f' ({dropped} shared with the fine-tuning data left out)' if dropped else ''}; seeds: "
            + ", ".join(f"{model} ({state}) {count}" for (model, state), count in seeds.items())
        )
        html = _settings_as_rows(block).to_html(na_rep="-", border=0)
        sections.append(html.replace("<thead>", f"<caption>{escape(caption)}</caption><thead>", 1))
    return "\n".join(sections)


def _settings_as_rows(block: pd.DataFrame) -> pd.DataFrame:
    """One block of `render`: a row per setting, the columns of `_cells` per model (state)."""
    setting = block["setting"].map(SETTING_NAMES) + [
        (f", {which} {removed} removed" if removed else "")
        + (f" (paper: {paper:.0f})" if pd.notna(paper) and paper != removed and which == "least" else "")
        for which, removed, paper in zip(
            block["which"], block["removed"], block.groupby(VARIANT)["paper_removed"].transform("max")
        )
    ]  # any state's
    cells = _cells(block)
    if block["paper_model"].isna().all():
        cells = {name: values for name, values in cells.items() if "paper" not in name}
    column = block["model"] + " (" + block["state"] + block["learned"].map({False: ", not learned"}).fillna("") + ")"
    wide = pd.DataFrame(cells).set_index([setting.to_numpy(), column.to_numpy()]).unstack()
    wide = wide.swaplevel(axis=1)[[(model, name) for model in dict.fromkeys(column) for name in cells]]
    wide.columns.names = [None, None]
    return wide.loc[list(dict.fromkeys(setting))]


def _cells(block: pd.DataFrame) -> dict[str, list[str]]:
    """The columns of a model in `render`, formatted, by header."""
    count = len(block)
    return {
        "Perf.": [
            f"{_mean_std(mean, std, '.2f')} (SE {se:.1f})"
            for mean, std, se in zip(block["performance"], block["performance_std"], block["performance_se"])
        ],
        "Perf. (paper)": [_mean_std(value, None, ".2f") for value in block["paper_performance"]],
        "I(W)": list(map(_mean_std, block["isotropy"], block["isotropy_std"], [".2g"] * count)),
        "I(W), notebook": list(
            map(_mean_std, block["isotropy_notebook"], block["isotropy_notebook_std"], [".2g"] * count)
        ),
        "I(W), one sign": [
            f"{low:.2g} to {high:.2g}" for low, high in zip(block["isotropy_u_only_min"], block["isotropy_u_only_max"])
        ],
        "I(W) (paper)": [_mean_std(value, None, ".2g") for value in block["paper_isotropy"]],
        "Removed": [
            "-"
            if not directions
            else f"{directions:g} ({with_variance:g} with variance)"
            + (f", {collapsed:g} collapsed" if collapsed else "")
            for directions, with_variance, collapsed in zip(*(block[column] for column in REMOVED))
        ],
    }


def _mean_std(mean: float, std: float | None, spec: str) -> str:
    """ "74.57 ± 1.20" ("74.57" without a std, as for one seed or the paper's value; "-" where there is no value)."""
    if pd.isna(mean):
        return "-"
    return f"{mean:{spec}}" if std is None or pd.isna(std) else f"{mean:{spec}} ± {std:{spec}}"


def document(*sections: str, title: str = f"{CITATION}: Tables 1-2", style: str = "") -> str:
    """An HTML page of `sections` in the report's table style, with `style` added (the claims page uses it too)."""
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{' '.join(filter(None, (STYLE, style)))}</style></head><body>\n"
        + "\n".join(sections)
        + "\n</body></html>\n"
    )
