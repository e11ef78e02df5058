"""Every status a row, a second-order check or a fuzz outcome can have, and every oracle kind, in
one place. Both are `str` enums: a member compares equal to its string and serializes as it, so
records keep their plain-string form ("ok", "grad_mismatch", ...) and readers of old records need
no change.

Row statuses, what each means and whether it fails a run: docs/checking.md#statuses. The staged
check decides them in the order of the members UNAVAILABLE to CANNOT_DECIDE, then ok.
Second order (rnnbench.check.verdicts.second_order): ok, hvp_mismatch, hvp_error, ill_conditioned, unsupported.
The known-issues registry turns an expected failure into "known_issue:<id>" and a covered row that
passed into "known_issue_fixed:<id>" (rnnbench.check.bugs.known_issues).
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    OK = "ok"
    UNAVAILABLE = "unavailable"
    SKIPPED = "skipped"
    ERROR = "error"
    COMPILE_ERROR = "compile_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    FORWARD_MISMATCH = "forward_mismatch"
    MISSING_GRAD = "missing_grad"
    GRAD_MISMATCH = "grad_mismatch"
    # the loss is differentiable at a kink of its ops (relu(z) - relu(-z) at 0: the one-sided
    # differences agree) and the framework's subgradient convention gives another value
    SUBGRADIENT_DIFFERS = "subgradient_differs"
    CANNOT_DECIDE = "cannot_decide"
    HVP_MISMATCH = "hvp_mismatch"
    HVP_ERROR = "hvp_error"
    ILL_CONDITIONED = "ill_conditioned"
    UNSUPPORTED = "unsupported"

    def __str__(self) -> str:  # f-strings and tables show "ok", not "Status.OK"
        return self.value


KNOWN_PREFIX = "known_issue:"
FIXED_PREFIX = "known_issue_fixed:"

WRONG_GRADIENT = frozenset({Status.FORWARD_MISMATCH, Status.MISSING_GRAD, Status.GRAD_MISMATCH})
"""The driver ran and the oracle contradicts it (first order)."""

DRIVER_ERRORS = frozenset({Status.ERROR, Status.COMPILE_ERROR, Status.HVP_ERROR, Status.CRASH, Status.TIMEOUT})
"""The framework raised, died or hung: no gradient to judge."""

FAILING = WRONG_GRADIENT | {Status.HVP_MISMATCH} | (DRIVER_ERRORS - {Status.HVP_ERROR})
"""Row statuses that fail a run (exit code 1), besides known_issue_fixed:<id>. ok, unavailable and
skipped do not; nor does known_issue:<id> (a failure the registry expects: reported, never timed)."""


def known(issue_id: str) -> str:
    return KNOWN_PREFIX + issue_id


def fixed(issue_id: str) -> str:
    return FIXED_PREFIX + issue_id


def is_known(status: str | None) -> bool:
    return (status or "").startswith(KNOWN_PREFIX)


def is_fixed(status: str | None) -> bool:
    return (status or "").startswith(FIXED_PREFIX)


def is_failing(status: str) -> bool:
    """True when a row with this status fails the run (the CLI's exit code 1)."""
    return status in FAILING or is_fixed(status)


class InputStatus(str, Enum):
    """How one compared input's gradient (or H v) came out (rnnbench.check.compare.InputError)."""

    OK = "ok"
    MISMATCH = "mismatch"
    MISSING = "missing"
    UNDECIDED = "cannot_decide"  # within the oracle's error bound, beyond the tolerance

    def __str__(self) -> str:
        return self.value


class OracleKind(str, Enum):
    """Where the wanted gradient comes from. The tolerance policy distinguishes finite differences
    (an approximation with its own error) from every exact kind (rnnbench.check.tolerance)."""

    FINITE_DIFFERENCES = "finite_differences"
    HAND_BPTT = "hand_bptt"  # hand-derived backpropagation through time
    HAND_ADJOINT = "hand_adjoint"  # hand-derived adjoint recurrence
    CLOSED_FORM = "closed_form"
    FORWARD_TANGENTS = "forward_tangents"  # forward-mode tangents of the numpy recurrence
    DUAL = "dual"  # dual numbers over the numpy step, float64 (check/differentiation/dual.py)
    DUAL_MP = "dual_mp"  # the same at 50 digits, where float64 cannot resolve the gradient
    DUAL_HVP = "dual_hvp"  # second order: nested dual numbers (forward over forward), float64
    DUAL_MP_HVP = "dual_mp_hvp"  # the same at 50 digits
    FINITE_DIFFERENCES_HVP = "finite_differences_hvp"  # second order: mixed loss differences
    GRADIENT_DIFFERENCES_HVP = "gradient_differences_hvp"  # second order: differences of an exact gradient

    def __str__(self) -> str:
        return self.value
