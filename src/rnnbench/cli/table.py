"""`rnnbench table`: the table of one or more results files (several machines' files merge)."""

from __future__ import annotations

import argparse

from rnnbench import record
from rnnbench.cli import options
from rnnbench.report.table import failure_reports, format_table

NAME = "table"
HELP = "print the table of one or more results files (several machines merge)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+")
    p.add_argument("--all", action="store_true", help="list unavailable rows in the table too")


def run(args: argparse.Namespace) -> int:
    records = record.load(options.results_files(args.files))
    print(format_table(records, include_unavailable=args.all))
    reports = failure_reports(records)
    if reports:
        print("\n" + reports)
    return 0
