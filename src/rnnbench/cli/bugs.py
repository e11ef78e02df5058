"""`rnnbench bugs [ID] [--markdown]`: the known-issues registry and its upstream reports."""

from __future__ import annotations

import argparse

from rnnbench.check.bugs import known_issues
from rnnbench.errors import InputError, unknown
from rnnbench.report import bugs
from rnnbench.report.escape import terminal

NAME = "bugs"
HELP = "the known-issues registry and its upstream reports: list them, or print one ready to paste"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", nargs="?", help="a registry id: print its report (default: list every entry)")
    p.add_argument(
        "--markdown",
        action="store_true",
        help="markdown: a table for the list; for an id, the report with its repro inlined",
    )


def run(args: argparse.Namespace) -> int:
    ids = [issue.id for issue in known_issues.registry()]
    if args.id and args.id not in ids:  # a prefix or another case gets the ids it could mean
        raise InputError(unknown("bug id", args.id, ids, "`rnnbench bugs`"))
    if args.id:
        print(terminal(bugs.report(args.id, args.markdown), lines=True), end="")
    else:
        print(terminal(bugs.listing(args.markdown), lines=True))
    return 0
