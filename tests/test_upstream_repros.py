"""Every registered upstream bug is linked to its upstream report (with the evidence) or has a
ready-to-file report, docs/upstream/<id>.md, with a standalone repro, docs/upstream/<id>.py. Each
repro runs here in every environment where its framework is installed and must agree with the
registry: exit 1 where the registry claims the bug on the installed versions, else 0 (fixed), or 3
("another failure hides it") only where the committed version table cannot decide either."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rnnbench.check.bugs import known_issues
from rnnbench.check.bugs.known_issues import installed_version, version_matches
from rnnbench.report import bugs

CANNOT_DECIDE = 3  # a repro's exit code when another failure comes first


def test_every_entry_is_linked_or_ready_to_file() -> None:
    for issue in known_issues.registry():
        md, py = bugs.report_paths(issue.id)
        assert issue.upstream and issue.upstream_match or md.is_file() and py.is_file(), issue.id
        if md.is_file():
            assert f"[{py.name}]({py.name})" in md.read_text(), f"{md.name} must link its repro"


def test_markdown_report_inlines_the_repro_and_an_unknown_id_is_bad_input(capsys) -> None:
    from rnnbench.cli import main

    issue_id = "torch-inductor-stacked-scan-gradient"
    assert main(["bugs", issue_id, "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "```python" in out and "sys.exit" in out and f"({issue_id}.py)" not in out
    assert main(["bugs"]) == 0 and issue_id in capsys.readouterr().out
    assert main(["bugs", "no-such-bug"]) == 2


def _claimed_here(issue: known_issues.KnownIssue) -> bool:
    """Whether the repro should reproduce here: the entry's repro_versions where it states them (its
    smallest case is narrower than its witnesses), else the versions the registry claims."""
    versions = issue.repro_versions if issue.repro_versions is not None else issue.versions
    return all(version_matches(installed_version(p) or "0", spec) for p, spec in versions.items())


def _undecided_here(issue: known_issues.KnownIssue) -> bool:
    """The committed bug x version table cannot decide this entry on the installed versions."""
    from rnnbench import results_file
    from rnnbench.report import bug_table

    tables = sorted((known_issues.REGISTRY_PATH.parents[2] / "docs" / "results").glob("*-bug-versions.jsonl"))
    measured = bug_table.reproduced_versions(results_file.load([tables[-1]])).get(issue.id, {})
    return any(
        (installed_version(p) or "").split("+")[0] in cells
        and cells[(installed_version(p) or "").split("+")[0]] is None
        for p, cells in measured.items()
    )


@pytest.mark.parametrize("issue_id", [i.id for i in known_issues.registry() if bugs.report_paths(i.id)[1].is_file()])
def test_repro_agrees_with_the_registry(issue_id: str) -> None:
    issue = next(i for i in known_issues.registry() if i.id == issue_id)
    missing = [p for p in issue.versions if installed_version(p) is None]
    if missing:
        pytest.skip(f"{issue_id}'s repro needs {missing}, not installed here")
    script = bugs.report_paths(issue_id)[1]
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")},
    )
    output = proc.stdout + proc.stderr[-3000:]
    if _claimed_here(issue):
        assert proc.returncode == 1, (
            f"the registry claims {issue_id} here but its repro says {proc.returncode}\n{output}"
        )
    elif proc.returncode == CANNOT_DECIDE:
        assert _undecided_here(issue), f"{issue_id}'s repro cannot decide here, but the version table does\n{output}"
    else:
        assert proc.returncode == 0, (
            f"the registry does not claim {issue_id} here but its repro says {proc.returncode}\n{output}"
        )
