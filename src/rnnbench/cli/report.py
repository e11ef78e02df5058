"""`rnnbench report`: charts (PNG) and an HTML page from results files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnbench import results_file
from rnnbench.cli import options
from rnnbench.report.escape import terminal

NAME = "report"
HELP = "charts (PNG) and an HTML page from results files"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="results files (JSON Lines) to chart; several merge")
    p.add_argument("--out-dir", default="results/report", help="where to write the PNGs and index.html")


def run(args: argparse.Namespace) -> int:
    try:  # the charts' libraries, an extra: asked for first, before any file is read or made
        import matplotlib  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as exc:
        raise options.UsageError(
            f"`rnnbench report` draws charts with matplotlib and Pillow ({exc}); install "
            "them: pip install 'rnnbench[charts]' (pinned: pip install -r requirements/charts.txt)"
        ) from None
    paths = options.results_files(args.files)
    warnings: list[str] = []
    records = results_file.load(paths, warn=warnings.append)
    if not records:
        raise options.UsageError(
            "no records in the given files" + (" (only an incomplete last line)" if warnings else "")
        )
    for warning in warnings:
        print(terminal(warning), file=sys.stderr)
    # lazy: cli: --help and bad input answer without importing the page's chart modules
    from rnnbench.report.site.html import write_report

    out_dir = options.writable_dir(Path(args.out_dir), "--out-dir")
    page = write_report(records, out_dir)
    print(f"rnnbench: report -> {page}")
    return 0
