"""pytest marks for the known-issues registry: a (driver, model, case) that an entry covers is a
strict xfail that only KnownIssueReproduced satisfies (see rnnbench.check.known_issues)."""

from __future__ import annotations

import pytest

from rnnbench.check import known_issues
from rnnbench.model import Case, Model


def known_issue_marks(driver_name: str, model: Model, case: Case, dtype: str, order: int = 1) -> list:
    issues = known_issues.covering(driver_name, model, case, dtype, order=order)
    if not issues:
        return []
    reason = " or ".join(f"known_issue:{issue.id}" for issue in issues)
    return [pytest.mark.xfail(strict=True, raises=known_issues.KnownIssueReproduced, reason=reason)]
