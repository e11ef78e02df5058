"""`rnnbench table`: the table of one or more results files (several machines' files merge)."""

from __future__ import annotations

import argparse

from rnnbench import results_file
from rnnbench.cli import options
from rnnbench.report.table import FORMATS, failure_reports, format_as

NAME = "table"
HELP = "print the table of one or more results files (several machines merge)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="results files (JSON Lines) to tabulate; several merge into one table")
    p.add_argument("--all", action="store_true", help="list unavailable rows in the table too")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default: the table, then the failures' reports), markdown (a GitHub table), csv or "
        "json (the table's rows only)",
    )


def run(args: argparse.Namespace) -> int:
    records = results_file.load(options.results_files(args.files))
    print(format_as(records, args.format, include_unavailable=args.all))
    reports = failure_reports(records) if args.format == "text" else ""  # the other formats are the rows only
    if reports:
        print("\n" + reports)
    return 0
