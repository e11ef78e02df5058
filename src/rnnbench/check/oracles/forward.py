"""The forward's error bar where the loss's condition number does not bound it: what rounding alone
does to a correct implementation's loss across the whole recurrence, measured, as the gradients'
bars are (check/differentiation/low_precision.py, the dual_mp rung).

Why: the judge compares a driver's loss with the float64 numpy reference, and calls a difference
that the compared inputs' condition number cannot explain forward_mismatch. Two kinds of correct
driver fail that: a compiler more accurate than the reference (XLA folds `(1 + u) - 1` into `u`, the
reference rounds there), and a float32 forward that no float32 implementation can compute (overflow
or underflow inside the recurrence, cancellation, chaos in a state that is not differentiated).
Asked only when a forward would fail, this module measures the truth and the bar:

  float64  truth: the loss at 50 digits (dual_eval at extended precision); bar: ROUNDING_SAFETY x
           the float64 reference's own distance from it
  float32  truth: the float64 reference; bar: ROUNDING_SAFETY x the float32 tape's distance from it
           (an infinite bar where the tape's float32 loss is not finite)

A driver within the tolerance of the truth passes the forward; beyond it but within the tolerance
plus the bar, the forward cannot be decided (the gradients are still judged); beyond both, it is
forward_mismatch. The same policy as the gradients' at both dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnnbench.check.compare import loss_rel_error
from rnnbench.check.differentiation.dual_eval import evaluate
from rnnbench.check.differentiation.low_precision import ROUNDING_SAFETY, float32_loss
from rnnbench.model import Case, Model

# A forward at 50 digits costs orders of magnitude more than float64: beyond this many input entries
# the float64 forward keeps the reference's verdict.
MP_MAX_INPUT_ENTRIES = 4096

PASSES, UNDECIDED, FAILS = "passes", "cannot_decide", "fails"


@dataclass(frozen=True)
class ForwardBound:
    """error: the driver's loss error (loss_rel_error) from `truth`; bound: the relative error that
    rounding alone gives a correct implementation at the driver's dtype; note: the report's line."""

    truth: float
    error: float
    bound: float
    note: str

    def outcome(self, tolerance: float) -> str:
        if self.error <= tolerance:
            return PASSES
        return UNDECIDED if self.error <= tolerance + self.bound else FAILS


def forward_bound(model: Model, case: Case, dtype: str, *, loss: float, reference: float) -> ForwardBound | None:
    """The truth and the rounding bar for a driver's `loss` at `dtype` (module docstring); None where
    neither can be measured (another dtype, a case too large for 50 digits, a step the tapes cannot run)."""
    try:
        if dtype == "float64":
            return _float64(model, case, loss, reference)
        if dtype == "float32":
            return _float32(model, case, loss, reference)
    except Exception:  # a step outside the tapes' vocabulary keeps the reference's verdict
        return None
    return None


def _float64(model: Model, case: Case, loss: float, reference: float) -> ForwardBound | None:
    entries = sum(np.size(v) for v in (*case.params.values(), *case.carry0, *([] if case.xs is None else [case.xs])))
    if entries > MP_MAX_INPUT_ENTRIES:
        return None
    exact = evaluate(model, case, [], extended=True).loss
    ref_error = loss_rel_error(reference, exact)
    bound = ROUNDING_SAFETY * ref_error
    error = loss_rel_error(loss, exact)
    note = (
        f"forward judged against the loss at 50 digits ({exact:.17g}): the driver is off it by {error:.3g}, "
        f"the float64 numpy reference by {ref_error:.3g} ({ROUNDING_SAFETY:g}x that bounds what float64 "
        "rounding alone does)"
    )
    return ForwardBound(exact, error, bound, note)


def _float32(model: Model, case: Case, loss: float, reference: float) -> ForwardBound:
    tape = float32_loss(model, case)
    tape_error = loss_rel_error(tape, reference)
    bound = ROUNDING_SAFETY * tape_error
    tape_says = "an independent float32 computation of this loss (check/differentiation/low_precision.py)"
    what = (
        f"{tape_says} is off the float64 value by {tape_error:.3g}"
        if np.isfinite(tape_error)
        else f"{tape_says} gives {tape:g}: float32 cannot hold it"
    )
    note = f"float32 forward: {what}; {ROUNDING_SAFETY:g}x that bounds what float32 rounding alone does to the loss"
    return ForwardBound(reference, loss_rel_error(loss, reference), bound, note)
