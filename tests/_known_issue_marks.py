"""pytest marks for the known-issues registry: a (driver, model, case) that an entry covers is a
strict xfail that only KnownIssueReproduced satisfies (see rnnbench.check.bugs.known_issues); where
every covering entry is not `certain` (it shows on some covered cases only) the xfail is not
strict, and the entry's witnesses (tests/test_known_issues.py) keep it from going stale."""

from __future__ import annotations

import pytest

from rnnbench.check.bugs import known_issues
from rnnbench.model import Case, Model


def known_issue_marks(driver_name: str, model: Model, case: Case, dtype: str, order: int = 1) -> list:
    issues = known_issues.covering(driver_name, model, case, dtype=dtype, order=order)
    if not issues:
        return []
    reason = " or ".join(f"known_issue:{issue.id}" for issue in issues)
    strict = any(issue.certain for issue in issues)
    return [pytest.mark.xfail(strict=strict, raises=known_issues.KnownIssueReproduced, reason=reason)]
