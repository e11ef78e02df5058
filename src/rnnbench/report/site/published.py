"""The charts published in the repository, as data: each with the records it is drawn from and the
command that draws it (docs/charts.toml). `make charts` redraws them all; the check (a test runs it)
holds every published chart to having its data committed beside it.

    python -m rnnbench.report.site.published docs/charts.toml            # redraw every chart
    python -m rnnbench.report.site.published docs/charts.toml --check    # data present and valid, no stray chart

A manifest entry:

    [[chart]]
    data = ["docs/results/X.jsonl"]            # rnnbench records (each line passes record.problem)
    outputs = ["docs/results/X.png"]           # what the command writes (files or directories)
    command = ["rnnbench", "report", ...]      # argv from the repository root; "rnnbench" and
                                               # "python" mean this interpreter's
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from rnnbench import record

CHART_SUFFIXES = (".png", ".svg")  # what counts as a published chart under the docs tree


@dataclass(frozen=True)
class Chart:
    data: tuple[str, ...]
    outputs: tuple[str, ...]
    command: tuple[str, ...]


def load(manifest: Path) -> list[Chart]:
    doc = tomllib.loads(manifest.read_text())
    charts = []
    for i, entry in enumerate(doc.get("chart", [])):
        missing = {"data", "outputs", "command"} - set(entry)
        if missing:
            raise ValueError(f"{manifest}: chart {i + 1} lacks {sorted(missing)}")
        charts.append(Chart(tuple(entry["data"]), tuple(entry["outputs"]), tuple(entry["command"])))
    return charts


def argv(command: tuple[str, ...]) -> list[str]:
    """The command with "rnnbench" / "python" as this interpreter (the environment it runs in)."""
    head, rest = command[0], list(command[1:])
    if head == "rnnbench":
        return [sys.executable, "-m", "rnnbench.cli", *rest]
    if head == "python":
        return [sys.executable, *rest]
    return list(command)


def _line_problem(line: str) -> str | None:
    try:
        return record.problem(json.loads(line))
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"


def problems(manifest: Path, root: Path) -> list[str]:
    """Why the published charts under root/docs are not all reproducible from committed data: a
    data file missing, empty or holding a line that is not an rnnbench record, an output missing,
    or a chart file that no entry draws."""
    out: list[str] = []
    drawn: set[Path] = set()
    for chart in load(manifest):
        for name in chart.data:
            path = root / name
            if not path.is_file():
                out.append(f"{name}: data file missing")
                continue
            lines = [line for line in path.read_text().splitlines() if line.strip()]
            if not lines:
                out.append(f"{name}: no records")
            bad = next(
                ((n, why) for n, why in ((n, _line_problem(line)) for n, line in enumerate(lines, 1)) if why), None
            )
            if bad:
                out.append(f"{name}:{bad[0]}: {bad[1]}")
        for name in chart.outputs:
            path = root / name
            if not path.exists():
                out.append(f"{name}: output missing (run `make charts`)")
            drawn |= {path} | (set(path.rglob("*")) if path.is_dir() else set())
    for path in sorted((root / "docs").rglob("*")):
        if path.suffix in CHART_SUFFIXES and path not in drawn:
            out.append(
                f"{path.relative_to(root)}: a published chart with no entry in {manifest.name} (no data, no command)"
            )
    return out


def redraw(manifest: Path, root: Path) -> None:
    for chart in load(manifest):
        print("+ " + " ".join(chart.command), flush=True)
        subprocess.run(argv(chart.command), cwd=root, check=True)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rnnbench.report.site.published", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--check", action="store_true", help="check data and outputs; draw nothing")
    parsed = parser.parse_args(args)
    root = parsed.manifest.resolve().parent.parent  # the manifest lives in <root>/docs
    if not parsed.check:
        redraw(parsed.manifest, root)
    found = problems(parsed.manifest, root)
    for line in found:
        print(f"rnnbench: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
