"""What `rnnbench bugs [ID] [--markdown]` prints: the known-issues registry as the framework maintainers would see
it. Without an ID, one line per entry: id, the versions it is claimed on, and where it stands
upstream ("linked": the upstream report it matches, with the evidence in `upstream_match`; "ready
to file": docs/upstream/<id>.md with its standalone repro docs/upstream/<id>.py; "missing"). With an
ID, that entry's report: with --markdown the text to paste into the tracker, the repro script
inlined where the report links it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rnnbench.check.bugs import known_issues
from rnnbench.errors import InputError


def _upstream_dir() -> Path:
    """docs/upstream of a source checkout; in an installed wheel, the same files shipped as the data
    package rnnbench_upstream (pyproject.toml's package-data)."""
    checkout = known_issues.REGISTRY_PATH.parents[2] / "docs" / "upstream"
    if checkout.is_dir():
        return checkout
    spec = importlib.util.find_spec("rnnbench_upstream")
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else checkout


UPSTREAM_DIR = _upstream_dir()
"""Ready-to-file reports, <id>.md, and their standalone repros, <id>.py."""


def report_paths(issue_id: str, folder: Path = UPSTREAM_DIR) -> tuple[Path, Path]:
    """(report, repro script) of an entry, present or not."""
    return folder / f"{issue_id}.md", folder / f"{issue_id}.py"


def status(issue: known_issues.KnownIssue, folder: Path = UPSTREAM_DIR) -> str:
    """ "linked <url>", "ready to file docs/upstream/<id>.md" (report and repro both present) or
    "missing"."""
    if issue.upstream:
        return f"linked {issue.upstream}"
    md, py = report_paths(issue.id, folder)
    return f"ready to file docs/upstream/{md.name}" if md.is_file() and py.is_file() else "missing"


def _versions(issue: known_issues.KnownIssue) -> str:
    return ", ".join(f"{package} {spec.replace('|', ' or ')}" for package, spec in issue.versions.items())


def listing(markdown: bool, folder: Path = UPSTREAM_DIR) -> str:
    """One line per entry: id, versions, upstream status; a markdown table with `markdown`. Written
    by hand, not with tabulate: `bugs` runs in every environment, and tabulate is an extra there."""
    headers = ("id", "claimed on", "upstream")
    rows = [(i.id, _versions(i), status(i, folder)) for i in known_issues.registry()]
    if markdown:
        lines = [headers, ("---",) * 3, *rows]
        return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)
    widths = [max(len(r[k]) for r in (headers, *rows)) for k in range(2)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in (headers, *rows))


def inline_repro(text: str, script: Path) -> str:
    """The report with the line that links its repro script replaced by the script, fenced."""
    link = f"[{script.name}]({script.name})"
    fenced = f"```python\n{script.read_text().rstrip()}\n```"
    lines = [fenced if line.strip() == link else line for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def report(issue_id: str, markdown: bool, folder: Path = UPSTREAM_DIR) -> str:
    issue = next((i for i in known_issues.registry() if i.id == issue_id), None)
    if issue is None:
        raise InputError(f"no known issue {issue_id!r}; `rnnbench bugs` lists them")
    md, py = report_paths(issue_id, folder)
    if md.is_file():
        text = md.read_text()
        return inline_repro(text, py) if markdown and py.is_file() else text
    if not issue.upstream:
        raise InputError(
            f"{issue_id} has no upstream link and no report docs/upstream/{md.name} (a source checkout "
            "has one for every entry)"
        )
    return (
        f"{issue.title}\n\nUpstream: {issue.upstream}\nMatch: {issue.upstream_match}\n"
        f"Versions: {_versions(issue)}\n\n{issue.symptom}\n"
    )
