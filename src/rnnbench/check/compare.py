"""Compare a driver's loss and gradients with the oracle: one verdict per compared input."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from rnnbench.check.tolerance import UNIT_ROUNDOFF, Tolerance
from rnnbench.status import InputStatus, Status

FD_BOUND = "the finite-difference oracle's error bound"
_NAN_DETAIL = (
    "no value to compare with (NaN in the oracle, or beyond what float32 can hold) for some entries: cannot decide them"
)
# A NaN or inf gradient where the oracle's is finite: wrong at every dtype (docs/checking.md, "Non-finite
# gradients"); the judge leaves such an entry undecided only where float32 cannot hold it.
NOT_FINITE = "not finite where the oracle's derivative is finite: wrong at any precision"


@dataclass(frozen=True)
class InputError:
    """How one gradient compares. index is the entry that decided the status (the largest error
    beyond the oracle's own bound); got/want its values. max_rel_error: max |got - want| / scale;
    oracle_error: the bound at that entry / scale (0 for exact oracles): the bound the verdict used."""

    name: str
    status: str  # an InputStatus
    max_rel_error: float
    index: tuple[int, ...]
    got: float
    want: float
    scale: float
    detail: str = ""
    oracle_error: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["index"] = list(self.index)
        if not np.isfinite(self.oracle_error):
            d["oracle_error"] = None  # no bound (strict JSON has no Infinity)
        return d


def _judge_input(
    name: str,
    g_raw: np.ndarray | None,
    r: np.ndarray,
    *,
    bound: np.ndarray,
    t: Tolerance,
    scale: float,
    bound_name: str,
    no_derivative: np.ndarray | None = None,
) -> InputError:
    """One input's verdict (compare_grads): its gradient `g_raw` against the oracle's `r`, entry by
    entry, with the oracle's absolute error bound per entry."""
    oracle_error = float(np.max(bound)) / scale if r.size else 0.0  # the largest (a shape mismatch judges no entry)
    g = np.zeros_like(r) if g_raw is None else np.asarray(g_raw, dtype=np.float64)
    unjudged = _no_entry_judged(name, g, r, scale=scale, oracle_error=oracle_error)
    if unjudged is not None:
        return unjudged
    # An oracle entry that is NaN (a finite difference that evaluated sqrt of a negative number at a
    # domain boundary) says nothing about that entry: it is cannot_decide, the others are judged.
    # A NaN bound where the oracle has a value bounds nothing: unbounded, which holds every finite gradient.
    unknown = np.isnan(r)
    # Where no finite derivative exists (no_derivative: the dual numbers' own value was not finite, a pole defined
    # on both sides, sqrt(abs(u)) at 0), a non-finite gradient is not wrong.
    no_derivative = np.zeros(r.shape, dtype=bool) if no_derivative is None else np.asarray(no_derivative, dtype=bool)
    bound = np.where(np.isnan(bound), np.inf, bound)
    diff = np.abs(g - r)
    diff = np.where(unknown, 0.0, np.where(np.isnan(diff), np.inf, diff))
    bound = np.where(unknown, 0.0, bound)
    # how far each entry is from the oracle's error interval; an unbounded entry (the loss is not smooth at the
    # finite-difference step, or float32 rounding an exact oracle cannot bound) contains every finite gradient,
    # never a NaN / inf one, unless no finite derivative exists there at all (no_derivative)
    with np.errstate(invalid="ignore"):  # inf - inf where the bound is infinite: the branch not taken
        beyond = np.where(
            np.isfinite(bound), diff - bound, np.where(np.isfinite(diff) | no_derivative, -np.inf, np.inf)
        )
    allowed = t.max_rel_error * scale
    # the entry shown: the one furthest beyond the oracle's interval where that decides (a
    # mismatch), else the largest difference (what cannot be decided, or the worst agreement)
    flat = int(np.argmax(beyond) if np.max(beyond) > allowed else np.argmax(diff))
    idx = tuple(int(i) for i in np.unravel_index(flat, r.shape))
    err = float(np.max(diff) / scale)
    oracle_error = float(bound.flat[flat]) / scale  # the bound of the entry judged, not the largest one
    zero = "gradient is None (read as zero)" if g_raw is None else "gradient is identically zero"
    if not np.any(g) and np.any(np.abs(r) > allowed + bound):
        status, detail = InputStatus.MISSING, zero
    elif beyond.flat[flat] > allowed:
        status = InputStatus.MISMATCH
        detail = f"beyond the tolerance plus {bound_name} at this entry" if oracle_error else ""
        if not np.isfinite(g.flat[flat]) and np.isfinite(r.flat[flat]):
            detail = NOT_FINITE
    elif err > t.max_rel_error:
        status = InputStatus.UNDECIDED
        detail = (
            f"beyond tolerance, but within {bound_name} ({oracle_error:.2g} of scale): cannot decide"
            if np.isfinite(oracle_error)
            else "beyond tolerance, but the loss is not smooth at the finite-difference step (a step "
            "1000 times smaller disagrees): finite differences cannot decide"
            if bound_name == FD_BOUND
            else f"beyond tolerance, and {bound_name}: cannot decide"
        )
    elif np.any(unknown):
        first = tuple(int(i) for i in np.argwhere(unknown)[0])
        status = InputStatus.UNDECIDED
        detail = f"{_NAN_DETAIL} at {list(first)} (got {g[first]:.10g}); the other entries agree"
    else:
        status, detail = InputStatus.OK, ""
    return InputError(
        name,
        status=status,
        max_rel_error=err,
        index=idx,
        got=float(g.flat[flat]),
        want=float(r.flat[flat]),
        scale=scale,
        detail=detail,
        oracle_error=oracle_error,
    )


def _no_entry_judged(
    name: str, g: np.ndarray, r: np.ndarray, *, scale: float, oracle_error: float
) -> InputError | None:
    """The verdict where no entry can be compared (a shape mismatch, an empty input, an oracle that
    is NaN everywhere), else None."""
    if g.shape != r.shape:
        return InputError(
            name,
            status=InputStatus.MISMATCH,
            max_rel_error=float("inf"),
            index=(),
            got=float("nan"),
            want=0.0,
            scale=scale,
            detail=f"shape {g.shape} != oracle shape {r.shape}",
            oracle_error=oracle_error,
        )
    if r.size == 0:
        return InputError(name, status=InputStatus.OK, max_rel_error=0.0, index=(), got=0.0, want=0.0, scale=scale)
    if np.all(np.isnan(r)):
        return InputError(
            name,
            status=InputStatus.UNDECIDED,
            max_rel_error=float("nan"),
            index=(),
            got=float("nan"),
            want=float("nan"),
            scale=scale,
            detail=_NAN_DETAIL,
            oracle_error=float("nan"),
        )
    return None


def compare_grads(
    got: Mapping[str, np.ndarray | None],
    want: Mapping[str, np.ndarray],
    names: list[str],
    *,
    tol: Tolerance,
    per_name: Mapping[str, Tolerance] | None = None,
    error: Mapping[str, np.ndarray] | None = None,
    bound_name: str = FD_BOUND,
    no_derivative: Mapping[str, np.ndarray] | None = None,
) -> list[InputError]:
    """Per input in `names`, entry by entry, with scale = max(max|want|, tol.scale_floor * G,
    tol.absolute_scale) (see tolerance.py) and the oracle's error bound e_i (`error`, absolute;
    none for exact oracles):
      |got_i - want_i| <= tol * scale            agrees
      ... <= tol * scale + e_i                   cannot decide (only the oracle's error separates them)
      beyond that                                mismatch
    A gradient that is None (the framework says the input does not reach the loss) or identically
    zero is "missing" only where some want_i is nonzero beyond tol * scale + e_i: a true zero gradient
    is an answer. per_name overrides `tol` for some inputs (fp32 islands under autocast). no_derivative: per
    input, the entries where no finite derivative exists (Oracle.no_derivative): a NaN / inf gradient there is
    not wrong."""
    G = max((_largest(want[n]) for n in names), default=0.0)
    out = []
    for name in names:
        t = (per_name or {}).get(name, tol)
        r = np.asarray(want[name], dtype=np.float64)
        bound = np.broadcast_to(np.asarray((error or {}).get(name, 0.0), dtype=np.float64), r.shape)
        r_max = _largest(r)
        scale = max(r_max, t.scale_floor * G, t.absolute_scale) or 1.0
        out.append(
            _judge_input(
                name,
                got.get(name),
                r,
                bound=bound,
                t=t,
                scale=scale,
                bound_name=bound_name,
                no_derivative=(no_derivative or {}).get(name),
            )
        )
    return out


def _largest(r: np.ndarray) -> float:
    """max |r| over the entries that are not NaN (0 for none): a NaN oracle entry must not make the
    scale NaN, which would pass every comparison."""
    a = np.abs(np.asarray(r, dtype=np.float64))
    a = a[~np.isnan(a)]
    return float(np.max(a)) if a.size else 0.0


def loss_rel_error(got: float, want: float) -> float:
    """|got - want| / max(|want|, 1): losses here are sums of O(1) terms, so 1 is their scale."""
    if not np.isfinite(got):
        return float("inf")
    return abs(got - want) / max(abs(want), 1.0)


def verdict(loss_error: float, errors: list[InputError], tol: Tolerance, loss_condition: float = 0.0) -> str:
    """Row status from the staged check: forward first, then presence, then agreement; an input
    that only the oracle's own error keeps from agreeing makes the row cannot_decide, never a mismatch.
    loss_condition: the loss's condition number (forward_rounding_bound); a forward that rounding
    at the driver's dtype alone can move beyond the tolerance cannot be judged."""
    if loss_error > tol.max_rel_error:
        return Status.CANNOT_DECIDE if rounding_explains(loss_error, tol, loss_condition) else Status.FORWARD_MISMATCH
    if any(e.status == InputStatus.MISSING for e in errors):
        return Status.MISSING_GRAD
    if any(e.status == InputStatus.MISMATCH for e in errors):
        return Status.GRAD_MISMATCH
    if any(e.status == InputStatus.UNDECIDED for e in errors):
        return Status.CANNOT_DECIDE
    return Status.OK


def loss_condition(
    inputs: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray], bounds: Mapping[str, np.ndarray], loss: float
) -> float:
    """sum_i |x_i| (|dL/dx_i| + e_i) / max(|L|, 1) over the compared inputs: how much a relative
    perturbation of the inputs moves the loss, relative to the loss's scale (as loss_rel_error
    measures it). Infinite where the oracle cannot bound a derivative (a loss not smooth at the
    finite-difference step: a chaotic recurrence)."""
    total = 0.0
    for name, g in grads.items():
        x = np.abs(np.asarray(inputs[name], dtype=np.float64))
        total += float(np.sum(x * (np.abs(g) + np.asarray(bounds.get(name, 0.0)))))
    return total / max(abs(loss), 1.0) if np.isfinite(total) else float("inf")


def forward_rounding_bound(condition: float, dtype: str) -> float:
    """The loss's relative error that rounding at `dtype` alone can cause: unit roundoff times the
    condition number (first order; the recurrence's intermediate roundings act like perturbed
    carries, which the condition number of a compared initial carry covers)."""
    return UNIT_ROUNDOFF.get(dtype, 0.0) * condition


def rounding_explains(loss_error: float, tol: Tolerance, loss_condition: float) -> bool:
    """A loss beyond the tolerance that rounding at the dtype alone can put there."""
    return loss_error > tol.max_rel_error and forward_rounding_bound(loss_condition, tol.dtype) > tol.max_rel_error


def describe(errors: list[InputError], loss_error: float, tol: Tolerance, loss_condition: float = 0.0) -> str:
    """Readable multi-line report of what differed."""
    lines = [f"loss rel error {loss_error:.3g} (tolerance {tol.max_rel_error:g}, {tol.dtype}, {tol.oracle} oracle)"]
    if rounding_explains(loss_error, tol, loss_condition):
        lines[0] += (
            f": cannot decide, the loss's condition number is {loss_condition:.3g}, so {tol.dtype} rounding "
            f"alone can move it by {forward_rounding_bound(loss_condition, tol.dtype):.3g}"
            if np.isfinite(loss_condition)
            else f": cannot decide, the loss is not smooth at the finite-difference step (its condition number "
            f"is unbounded), so {tol.dtype} rounding alone can move it that far"
        )
    return "\n".join(lines + [describe_input(e) for e in errors])


def describe_input(e: InputError) -> str:
    """One input's line of describe()."""
    mark = "  " if e.status == InputStatus.OK else "!!"
    at = f"at {list(e.index)}: " if e.index else ""  # a 0-d input has no index, but still a value
    # a non-finite gradient's entry is named too: its error is infinite, but its index and the oracle's value are known
    shown = np.isfinite(e.max_rel_error) or e.detail == NOT_FINITE
    where = f"{at}got {e.got:.10g}, want {e.want:.10g}" if shown else ""
    bound = f" (bound {e.oracle_error:.2g} of scale at that entry)" if e.oracle_error else ""
    return f"{mark} {e.name:<10} {e.status:<8} rel err {e.max_rel_error:.3g}{bound} {where} {e.detail}".rstrip()
