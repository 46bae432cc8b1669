"""Tables 1 and 2 of Rajaee & Pilehvar (2021): our values beside the paper's, as tidy CSV and as rendered HTML."""

from pathlib import Path

import pandas as pd

PAPER_VALUES = Path(__file__).with_name("paper_values.csv")
VARIANT = ["setting", "which", "removed"]
ROW = ["dataset", "model", "state", "paper_model"]


def paper_values() -> pd.DataFrame:
    """Every cell of the paper's Tables 1-2 (one row per cell pair: performance, isotropy), from paper_values.csv."""
    return pd.read_csv(PAPER_VALUES, comment="#")


def comparison(results: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Tables 1 and 2, tidy: our performance and isotropy (both I(W) sign conventions) beside the paper's values for
    the same paper model, state and setting. Table 2 is every state's baseline plus the least-directions variants;
    its variants are matched to the paper's by order (our first and second `least_directions` beside the paper's
    100 and 700, so a smaller model's 50 and 350 of 384 still stand beside them), and `paper_removed` says which.

    `results` has one row per (dataset, model, state, paper_model, table, setting, which, removed) with columns
    performance, isotropy, isotropy_u_only; paper_model may be empty (no paper values).
    """
    paper = paper_values().rename(columns={"model": "paper_model", "performance": "paper_performance",
                                           "isotropy": "paper_isotropy", "removed": "paper_removed"})
    tables = {}
    for table in (1, 2):
        ours = results[(results["table"] == table) | ((table == 2) & (results["setting"] == "baseline"))]
        ours = ours.drop(columns="table").assign(table=table)
        key = ["table", "paper_model", "state", "setting", "which", "order"]
        merged = _order(ours, "removed", ROW).merge(_order(paper, "paper_removed", ["paper_model", "state"]),
                                                    on=key, how="left")
        columns = [*ROW, *VARIANT, "paper_removed", "performance", "paper_performance", "isotropy",
                   "isotropy_u_only", "paper_isotropy", "layer", "tokens", "texts", "pairs"]
        tables[table] = merged[columns].reset_index(drop=True)
    return tables


def _order(rows: pd.DataFrame, removed: str, group: list[str]) -> pd.DataFrame:
    """Number each variant's removal counts 0, 1, ... within its table, row and setting."""
    order = rows.groupby(["table", *group, "setting", "which"])[removed].rank(method="dense") - 1
    return rows.assign(order=order.astype(int))


HEADINGS = {"performance": "Perf.", "paper_performance": "Perf. (paper)", "isotropy": "I(W), +-u",
            "isotropy_u_only": "I(W), u only", "paper_isotropy": "I(W) (paper)"}
STYLE = "table {border-collapse: collapse; font: 12px sans-serif} td, th {border: 1px solid #ccc; padding: 2px 5px}"


def render(table: pd.DataFrame, title: str) -> str:
    """A wide HTML table as in the paper: one row per model and state, per setting our performance and isotropy
    (both conventions), each beside the paper's value."""
    label = table["setting"] + table.apply(lambda r: f" ({r['which']} {r['removed']})" if r["removed"] else "", 1)
    values = table.assign(variant=label).set_index([*ROW, "variant"])[list(HEADINGS)].rename(columns=HEADINGS)
    wide = values.unstack("variant").swaplevel(axis=1)
    wide = wide[[(variant, column) for variant in dict.fromkeys(label) for column in values.columns]]
    formats = {column: "{:.2f}" if column[1].startswith("Perf") else "{:.2g}" for column in wide.columns}
    return f"<h3>{title}</h3>\n" + wide.style.format(formats, na_rep="-").to_html()


def document(*sections: str) -> str:
    return f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>\n" + \
        "\n".join(sections) + "\n</body></html>\n"
