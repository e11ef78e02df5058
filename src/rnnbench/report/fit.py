"""A plain-text table fitted to the terminal: the width to fit ($COLUMNS, the terminal's, none for a
pipe), long known-issue ids abbreviated with a legend, and columns dropped in a fixed order
(FIT_ORDER) until the table fits. Works on column names and cells only, whatever the records."""

from __future__ import annotations

import os
import shutil
import sys


def terminal_width() -> int | None:
    """$COLUMNS where set, else the terminal's width when the output is one; None (no limit) for a pipe or a file."""
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return int(os.environ["COLUMNS"])
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


ISSUE_ID_MAX = 12  # a known-issue id longer than this is shown as K1, K2, ... with a legend line


def abbreviated_issues(
    columns: tuple[str, ...], body: list[tuple[str, ...]]
) -> tuple[list[tuple[str, ...]], list[str]]:
    """The body with every long known-issue id in the status column as K1, K2, ... (first seen
    first), and the legend lines that spell them out."""
    at = columns.index("status")
    names: dict[str, str] = {}
    out = []
    for row in body:
        kind, sep, issue = row[at].partition(":")
        if sep and len(issue) > ISSUE_ID_MAX:
            row = (*row[:at], f"{kind}:{names.setdefault(issue, f'K{len(names) + 1}')}", *row[at + 1 :])
        out.append(row)
    return out, [f"{short}: {issue}" for issue, short in names.items()]


# Dropped in this order until the table fits: the spreads, then the columns a reader misses least
# (the memory a step saves for backward after its first-call time: both are read beside the times).
FIT_ORDER = (
    "fwd ms [IQR]",
    "fwd+bwd ms [IQR]",
    "binding ceiling (fwd+bwd)",
    "first call s",
    "saved for bwd MiB",
    "% peak",
    "env",
    "max rel err",
    "fwd ms",
)


def fit(
    columns: tuple[str, ...], body: list[tuple[str, ...]], width: int
) -> tuple[tuple[str, ...], list[tuple[str, ...]], str]:
    """The table within `width` characters where it can be: the [IQR] of a time cell dropped first
    (the median stays, with its marks), then whole columns in FIT_ORDER; returns the columns, the
    body and what was left out (empty when nothing was)."""
    columns, body, gone = tuple(columns), [tuple(r) for r in body], []

    def total() -> int:
        cells = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(columns)]
        return sum(cells) + 2 * (len(columns) - 1)

    for name in FIT_ORDER:
        if not body or total() <= width or name not in columns:
            continue
        at = columns.index(name)
        if name.endswith(" [IQR]"):  # keep the median and its marks
            body = [(*r[:at], " ".join(p for p in r[at].split() if not p.startswith("[")), *r[at + 1 :]) for r in body]
            columns = (*columns[:at], name.removesuffix(" [IQR]"), *columns[at + 1 :])
            gone.append(f"the {name.split()[0]} spread")
        else:
            body = [(*r[:at], *r[at + 1 :]) for r in body]
            columns = (*columns[:at], *columns[at + 1 :])
            gone.append(name)
    return columns, body, ", ".join(gone)
