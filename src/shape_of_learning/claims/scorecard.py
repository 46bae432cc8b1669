"""The scorecard: every planned row (`catalogue.Group`) judged on the run's files, as a table (`COLUMNS`; written to
results/tables/claims.csv), as the report's claims page (`render`) and as the lines `verify` prints (`lines`).

Whether a claim holds is a result, never a failure: the scorecard is written whatever it says, and `verify`'s exit
status reflects the run's completeness. A check that raises anything but NotMeasurable is a defect of the check: its
row says `error` with the message, the other rows are judged, and `verify` fails (`errors`).
"""

import logging
from html import escape
from pathlib import Path

import pandas as pd

from shape_of_learning.claims.catalogue import CLAIMS, Group
from shape_of_learning.claims.inputs import PaperValues, Reader, document
from shape_of_learning.claims.predicates import ERROR, HOLDS, Verdict, judged

logger = logging.getLogger(__name__)

# claim: its name in catalogue.CLAIMS; source: the paper's section, figure or table; quote: the paper's own words;
# statement: the claim in a sentence; group: the models it is judged on, `models` naming them; predicate and
# thresholds: how, with the config's `claims:`; measured: the values it was judged on; holds: yes, no, not
# measurable, "depends on" a choice (Verdict.depends_on), or error (the check raised: a defect); reason: why not
# (empty where it holds); on_paper_values: the same predicate on the paper's own numbers, where the run's tables carry
# them (Rajaee & Pilehvar's Tables 1-2); note: where the reading is the project's own
COLUMNS = [
    "claim",
    "paper",
    "source",
    "quote",
    "statement",
    "group",
    "models",
    "predicate",
    "thresholds",
    "measured",
    "holds",
    "reason",
    "on_paper_values",
    "note",
]


def _outcome(check, group: Group, reader, settings: dict) -> tuple[str, Verdict]:
    """The row's word (yes, no, not measurable, error) and its verdict; an unexpected exception is `error`, its
    message the reason and its traceback logged."""
    try:
        verdict = judged(check, group, reader, settings)
    except Exception as error:  # any defect of one check must leave the other rows judged
        logger.exception("claim %s (%s) raised", group.claim, group.label)
        return ERROR, Verdict(None, "", f"{type(error).__name__}: {error}")
    return verdict.word, verdict


def scorecard(
    groups: list[Group], settings: dict, unavailable: dict[str, str] | None = None, root: Path = Path(".")
) -> pd.DataFrame:
    """One row per group (claim and models), judged on the files under `root` (the workflow's working directory);
    `settings` is the config's `claims:`, `unavailable` the models that cannot be had, with the reason."""
    reader, rows = Reader(root, unavailable), []
    for group in groups:
        claim = CLAIMS[group.claim]
        holds, verdict = (
            (HOLDS[None], Verdict(None, "", group.empty))
            if group.empty
            else _outcome(claim.check, group, reader, settings)
        )
        paper = ""
        if claim.on_paper_values and group.arguments.get("paper"):
            paper = _outcome(claim.check, group, PaperValues(reader), settings)[0]
        rows.append(
            {
                "claim": claim.name,
                "paper": claim.paper,
                "source": claim.source,
                "quote": claim.quote,
                "statement": claim.statement,
                "group": group.label,
                "models": ", ".join(group.models),
                "predicate": claim.predicate.format(**settings),
                "thresholds": "; ".join(f"claims.{key}: {settings[key]}" for key in claim.thresholds),
                "measured": verdict.measured,
                "holds": holds,
                "reason": verdict.reason,
                "on_paper_values": paper,
                "note": claim.note,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def errors(card: pd.DataFrame) -> pd.DataFrame:
    """The rows whose check raised (`holds` error), on the run's numbers or the paper's: defects, not findings."""
    return card[(card["holds"] == ERROR) | (card["on_paper_values"] == ERROR)]


def tally(card: pd.DataFrame) -> str:
    """ "13 rows: 5 hold, 6 do not, 2 not measurable" (", 1 depends on a choice" where a verdict turns on one,
    ", 1 error" where a check raised)."""
    counts = card["holds"].value_counts()
    found = (
        f"{len(card)} rows: {counts.get(HOLDS[True], 0)} hold, {counts.get(HOLDS[False], 0)} do not, "
        f"{counts.get(HOLDS[None], 0)} not measurable"
    )
    depends = int(card["holds"].str.startswith("depends on").sum())
    return (
        found
        + (f", {depends} depend on a choice" if depends else "")
        + (f", {counts[ERROR]} error" if ERROR in counts else "")
    )


def lines(card: pd.DataFrame) -> list[str]:
    """The scorecard as `verify` prints it: a line per row (what holds, the claim, its group), then what was measured
    and why it does not hold."""
    found = [f"claims: {tally(card)}"]
    for row in card.itertuples():
        found.append(f"  {row.holds:<14} {row.claim} ({row.paper}, {row.source}): {row.group}")
        found += [
            f"{'':17}{label}: {text}"
            for label, text in (
                ("measured", row.measured),
                ("why", row.reason),
                ("on the paper's numbers", row.on_paper_values),
            )
            if text
        ]
    return found


STYLE = (
    "td.yes {background: #d9f2d9} td.no {background: #f8d7d7} td.not-measurable {background: #eee} "
    "td.error {background: #f5c06f} td[class^=depends-on] {background: #fbe7b5} "
    "td {text-align: left; vertical-align: top; max-width: 40em}"
)


def render(card: pd.DataFrame, title: str) -> str:
    """The report's claims page: one table row per scorecard row, what holds coloured."""
    header = [
        "holds",
        "claim",
        "paper, where",
        "group",
        "measured",
        "why not",
        "on the paper's numbers",
        "predicate (thresholds)",
    ]
    body = []
    for row in card.itertuples():
        claim = (
            f"<b>{escape(row.claim)}</b><br>{escape(row.statement)}<br><small>&ldquo;{escape(row.quote)}&rdquo;</small>"
        )
        if row.note:
            claim += f"<br><i>{escape(row.note)}</i>"
        cells = [
            f"<td class='{row.holds.replace(' ', '-')}'>{escape(row.holds)}</td>",
            f"<td>{claim}</td>",
            f"<td>{escape(row.paper)}, {escape(row.source)}</td>",
            f"<td>{escape(row.group)}<br><small>{escape(row.models)}</small></td>",
            *(f"<td>{escape(text)}</td>" for text in (row.measured, row.reason, row.on_paper_values)),
            f"<td>{escape(row.predicate)} <small>({escape(row.thresholds)})</small></td>",
        ]
        body.append(f"<tr>{''.join(cells)}</tr>")
    table = (
        f"<h3>{escape(title)}</h3><p>{escape(tally(card))}</p><table><thead><tr>"
        + "".join(f"<th>{name}</th>" for name in header)
        + "</tr></thead><tbody>"
        + "\n".join(body)
        + "</tbody></table>"
    )
    return document(table, title=title, style=STYLE)
