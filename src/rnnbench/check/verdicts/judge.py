"""The one judge: what a driver produced (its loss and canonical gradients, or the exception it
raised) against the oracle, with the one tolerance policy, then the known-issues registry, applied
here and nowhere else. `rnnbench run`, `check_recurrence`, the fuzzer, asv and pytest all get their
verdicts from `judge` (first order) and `registered` (both orders).

Stages (rnnbench.status): the driver raised -> error / compile_error; the loss disagrees with the
float64 reference forward -> forward_mismatch; a gradient is absent where the oracle's is not ->
missing_grad; a gradient disagrees beyond tolerance and the oracle's error bound -> grad_mismatch;
beyond tolerance but within the bound -> cannot_decide; else ok.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rnnbench.check.bugs import known_issues
from rnnbench.check.compare import (
    NOT_FINITE,
    InputError,
    compare_grads,
    describe,
    describe_input,
    loss_condition,
    loss_rel_error,
    verdict,
)
from rnnbench.check.differentiation.finite_diff import input_value, one_sided
from rnnbench.check.differentiation.low_precision import ROUNDING_SAFETY, float32_gradients, float32_holds, float32_tape
from rnnbench.check.oracles.forward import PASSES, UNDECIDED, forward_bound
from rnnbench.check.oracles.kink_range import kink_range
from rnnbench.check.oracles.oracle import Oracle, oracle_grads
from rnnbench.check.oracles.oracle_cache import COMPUTED
from rnnbench.check.tolerance import Tolerance, at_loss_scale, island_tolerance, tolerance
from rnnbench.model import Case, Model, reference_loss
from rnnbench.modes import JVP, VJP
from rnnbench.status import InputStatus, Status

COMPILE_ERROR_MODULES = ("torch._dynamo", "torch._inductor", "torch._higher_order_ops", "jax.errors", "jax._src.errors")


@dataclass
class Check:
    """Outcome of the staged check: forward loss, then presence, then agreement of gradients."""

    status: str  # after the known-issues registry: may be known_issue:<id> / known_issue_fixed:<id>
    oracle_kind: str
    tolerance: Tolerance
    loss: float = float("nan")
    reference_loss: float = float("nan")
    loss_error: float = float("nan")
    errors: list[InputError] = field(default_factory=list)
    grads: dict[str, Any] = field(default_factory=dict)  # the driver's gradients (float64 numpy)
    first_call_s: float = float("nan")
    prepare_s: float = float("nan")  # the driver's prepare before that first call (rows/pair.py times both)
    report: str = ""
    raw_status: str = ""  # the check's own verdict, before the known-issues registry
    # "" (the forward judged against the reference), or check/oracles/forward.py's outcome against the truth:
    # "passes" / "cannot_decide" (then the gradients are judged all the same)
    forward: str = ""
    forward_note: str = ""
    # undecided (subgradient_differs / cannot_decide) only at kinked entries whose range holds the
    # driver: H v is still defined, and judged, on the other entries (rows/pair.py)
    kinks_only: bool = False
    # where the oracle judged against came from (check.oracles.oracle.Oracle.source): "computed", or the
    # hand-oracle cache's "cache:<key>" / "recomputed:<key>"; the record's oracle_source
    oracle_source: str = COMPUTED
    # the dtype the driver's loss came back in where wider than the row's (model.promoted): the step
    # promotes, so this row's arithmetic and timing are not its dtype's; "" where it computed at its dtype
    computed_dtype: str = ""

    @property
    def max_rel_error(self) -> float:
        return max((e.max_rel_error for e in self.errors), default=0.0)


def is_compile_error(exc: BaseException) -> bool:
    """Errors raised while tracing/compiling (dynamo, inductor, jax tracing), judged by where the
    exception class lives, anywhere in the cause chain."""
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.startswith(COMPILE_ERROR_MODULES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def failure_report(exc: BaseException) -> str:
    """What the framework said, then the last frames of the traceback. A compiler's wrapper
    ("backend='inductor' raised:") carries the real message on its next lines and in its cause
    chain: both are shown, one line per distinct exception."""
    lines, seen = [], set()
    link: BaseException | None = exc
    while link is not None and len(lines) < 4:
        text = [line.strip() for line in str(link).splitlines() if line.strip()]
        head = " ".join(text[:2]) if text and text[0].endswith(":") else (text[0] if text else "")
        line = f"{type(link).__name__}: {head}"
        if head not in seen:
            lines.append(line if not lines else f"  caused by {line}")
            seen.add(head)
        link = link.__cause__ or link.__context__
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "\n".join(lines) + "\n" + "".join(tb[-6:])


def judge(
    model: Model,
    case: Case,
    dtype: str,
    *,
    device: str,
    driver_name: str,
    produced: tuple[float, Mapping[str, np.ndarray | None]] | None = None,
    raised: BaseException | None = None,
    compiled: bool = False,
    autocast: bool = False,
    oracle: Oracle | None = None,
    mode: str = VJP,
) -> Check:
    """The verdict on one driver's first-order result on `case` at `dtype`.

    produced: (loss, {compared input: gradient or None}) in canonical layout, float64 numpy; or
    raised: the exception the driver raised (compiled: it compiles, so tracing errors are
    compile_error). autocast: the driver runs under bf16 autocast, so inputs in the model's fp32
    island get the float32 tolerance. oracle: the oracle when already computed. mode: the
    differentiation mode (rnnbench.modes) the gradients came by: every mode is judged alike against
    the one oracle; the registry's entries are scoped by it."""
    oracle = oracle if oracle is not None else oracle_grads(model, case)
    kind = oracle.kind
    tol = tolerance(dtype, kind, device)
    result = Check(status=Status.ERROR, oracle_kind=kind, tolerance=tol, oracle_source=oracle.source)
    if raised is not None or produced is None:
        exc = raised if raised is not None else RuntimeError("the driver produced nothing")
        result.status = Status.COMPILE_ERROR if compiled and is_compile_error(exc) else Status.ERROR
        result.report = failure_report(exc)
        return registered(result, driver_name, model, case=case, dtype=dtype, mode=mode)
    loss, grads = produced
    result.loss, result.grads = loss, dict(grads)
    result.reference_loss = reference_loss(model, case)
    result.loss_error = loss_rel_error(loss, result.reference_loss)
    tol = result.tolerance = at_loss_scale(tol, result.reference_loss)
    per_name = (
        {n: at_loss_scale(island_tolerance(kind, device), result.reference_loss) for n in model.island_grads}
        if autocast
        else None
    )
    names = case.wrt_names(model.carry_names)
    bounds, condition = _against(result, model, case, oracle=oracle, names=names, tol=tol, per_name=per_name)
    if result.status == Status.FORWARD_MISMATCH and not autocast:
        _forward_against_truth(result, model, case, dtype=dtype, tol=tol, condition=condition)
    if dtype == "float64" and result.status in WRONG_GRADIENTS and oracle.refine is not None:
        # Before calling a float64 gradient wrong: what float64 rounding alone does to it (dual_mp).
        # Adopted where it changes the verdict; a wrong gradient stays judged by the float64 dual.
        refined, finer = dataclasses.replace(result), oracle.refine()
        _against(refined, model, case, oracle=finer, names=names, tol=tol, per_name=per_name)
        if refined.status not in WRONG_GRADIENTS:
            result, oracle = refined, finer
            result.oracle_kind, result.oracle_source = finer.kind, finer.source
        else:
            result.report += "\n(the same at 50 digits: float64 rounding does not explain the difference)"
    rounded = False  # the lines are judged with what float32 rounding alone does
    if dtype == "float32" and (result.status in WRONG_GRADIENTS or _wrong_lines(result)) and not autocast:
        # float64 only is refined above, so bounds and condition are still those of `oracle`
        rounded = _with_rounding_bounds(
            result, model, case, oracle=oracle, names=names, bounds=bounds, tol=tol, condition=condition, mode=mode
        )
    _lines_under_undecided_forward(result, rounded=rounded)
    if result.status == Status.CANNOT_DECIDE:
        _at_differentiable_kinks(result, model, case, oracle=oracle, names=names, tol=tol, dtype=dtype)
    if result.status != Status.OK and oracle.reason:
        result.report += f"\noracle: {oracle.kind} ({oracle.reason})"
    return registered(result, driver_name, model, case=case, dtype=dtype, mode=mode)


WRONG_GRADIENTS = (Status.GRAD_MISMATCH, Status.MISSING_GRAD)


def _against(
    result: Check,
    model: Model,
    case: Case,
    *,
    oracle: Oracle,
    names: list[str],
    tol: Tolerance,
    per_name: Mapping[str, Tolerance] | None,
) -> tuple[dict[str, np.ndarray], float]:
    """result's errors, status and report against `oracle`, with the bound the oracle states;
    returns (that bound per name, the loss's condition number)."""
    bounds = {n: oracle.error_of(n) for n in names}
    result.errors = compare_grads(
        result.grads,
        oracle.grads,
        names,
        tol=tol,
        per_name=per_name,
        error=bounds,
        bound_name=oracle.bound_name,
        no_derivative=oracle.no_derivative,
    )
    condition = loss_condition(
        {n: input_value(model, case, n) for n in names},
        {n: oracle.grads[n] for n in names},
        bounds,
        result.reference_loss,
    )
    result.status = _verdict(result, result.errors, tol, condition)
    result.report = describe(result.errors, result.loss_error, tol, condition) + _forward_note(result)
    return bounds, condition


def _verdict(result: Check, errors: list[InputError], tol: Tolerance, condition: float) -> str:
    """compare.verdict, with the forward as check/oracles/forward.py settled it where it did: a forward that
    passes against the truth or cannot be decided leaves the gradients to decide (never ok when undecided)."""
    if not result.forward:
        return verdict(result.loss_error, errors, tol, condition)
    grads = verdict(0.0, errors, tol, condition)
    return Status.CANNOT_DECIDE if result.forward == UNDECIDED and grads == Status.OK else grads


def _forward_note(result: Check) -> str:
    return f"\n{result.forward_note}" if result.forward else ""


def _forward_against_truth(
    result: Check, model: Model, case: Case, *, dtype: str, tol: Tolerance, condition: float
) -> None:
    """A forward_mismatch re-judged against the truth with what rounding alone does to a correct
    implementation's loss across the whole recurrence (check/oracles/forward.py)."""
    bound = forward_bound(model, case, dtype, loss=result.loss, reference=result.reference_loss)
    if bound is None:
        return
    outcome = bound.outcome(tol.max_rel_error)
    if outcome not in (PASSES, UNDECIDED):
        result.report += f"\n{bound.note}, and the driver is beyond it"
        return
    result.forward, result.forward_note = outcome, bound.note
    result.status = _verdict(result, result.errors, tol, condition)
    result.report = describe(result.errors, result.loss_error, tol, condition) + _forward_note(result)


def _with_rounding_bounds(
    result: Check,
    model: Model,
    case: Case,
    *,
    oracle: Oracle,
    names: list[str],
    bounds: Mapping[str, np.ndarray],
    tol: Tolerance,
    condition: float,
    mode: str = VJP,
) -> bool:
    """Re-judge a failing float32 row with what float32 rounding alone does to these gradients
    (check/differentiation/low_precision.py) added to the oracle's bounds: a difference that a correct float32
    computation also makes is cannot_decide, not a wrong gradient. False where the float32 tape
    could not run (the row is left as it was)."""
    try:
        loss32, tape = float32_tape(model, case, names)
    except Exception as exc:  # a step the float32 tape cannot run (an op outside the ops namespace)
        result.report += (
            f"\n(no float32 rounding bound: the float32 reference tape failed: {type(exc).__name__}: {exc})"
        )
        return False
    # An entry float32 cannot hold (the float32 loss itself overflows through it, or the exact value is
    # beyond float32's range: low_precision.float32_holds) has no value to compare a driver's with: it
    # cannot be decided. Where float32 holds it but the tape's own derivative is not finite (0 * inf behind
    # a where's unselected branch, as every framework computes it) the tape says nothing of rounding: the
    # entry is unbounded, which holds every finite value and never a NaN or inf one.
    want, rounding = {}, {}
    for n in names:
        exact = np.asarray(oracle.grads[n], dtype=np.float64)
        held = float32_holds(loss32, tape[n], exact)
        if mode == JVP and not np.isfinite(loss32):
            # forward mode carries every tangent through the loss's own value, which float32 cannot hold
            # here (inf * a zero tangent is NaN): no entry has a float32 value to compare with
            held = np.zeros(np.shape(exact), dtype=bool)
        with np.errstate(invalid="ignore"):
            distance = ROUNDING_SAFETY * np.abs(tape[n] - exact)
        want[n] = np.where(held, exact, np.nan)
        rounding[n] = np.where(held, np.where(np.isfinite(distance), distance, np.inf), 0.0)
    widened = {n: bounds[n] + rounding[n] for n in names}
    errors = compare_grads(
        result.grads,
        want,
        names,
        tol=tol,
        per_name=None,
        error=widened,
        bound_name=f"what float32 rounding alone does (plus {oracle.bound_name})",
        no_derivative=oracle.no_derivative,
    )
    finite = {n: rounding[n][np.isfinite(rounding[n])] for n in names}
    worst = max((float(np.max(finite[n])) / e.scale for n, e in zip(names, errors) if np.size(finite[n])), default=0.0)
    note = (
        f"\nfloat32 rounding bound: an independent float32 computation (check/differentiation/low_precision.py) "
        f"of these gradients is off by up to {worst / ROUNDING_SAFETY:.2g} of scale; {ROUNDING_SAFETY:g}x that bounds "
        f"what rounding alone does"
    )
    status = _verdict(result, errors, tol, condition)
    if status == Status.CANNOT_DECIDE:
        result.errors, result.status = errors, status
        result.report = describe(errors, result.loss_error, tol, condition) + _forward_note(result) + note
    else:
        result.report += note + ", and the difference is beyond it"
    return True


def _wrong_lines(result: Check) -> bool:
    """Some input's line says mismatch or missing although the row does not (a forward that rounding
    alone can move beyond the tolerance makes compare.verdict stop before the gradients)."""
    return result.status not in WRONG_GRADIENTS and any(
        e.status in (InputStatus.MISMATCH, InputStatus.MISSING) for e in result.errors
    )


def _lines_under_undecided_forward(result: Check, *, rounded: bool) -> None:
    """A cannot_decide row whose input lines still say mismatch or missing: its forward is undecided
    (rounding at its dtype alone can move the loss beyond the tolerance, compare.verdict), and it
    stopped there. The gradients still decide where they can, as after check/oracles/forward.py: a non-finite
    gradient where the oracle's is finite is wrong whatever the forward, and so is one beyond what
    float32 rounding alone does to it (`rounded`: the lines were judged with that bound) --
    grad_mismatch, the entry named. Any other such line (float64, no float32 bound) says undecided,
    so that the lines agree with the row."""
    if result.status != Status.CANNOT_DECIDE or not _wrong_lines(result):
        return
    wrong = [e for e in result.errors if e.status in (InputStatus.MISMATCH, InputStatus.MISSING)]
    if rounded or any(e.detail == NOT_FINITE for e in wrong):
        result.status = Status.GRAD_MISMATCH
        result.report += (
            "\nthe forward is undecided, but the gradient of "
            + ", ".join(e.name for e in wrong)
            + " is beyond what rounding alone does to it: wrong"
        )
        return
    for i, err in enumerate(result.errors):
        if err.status not in (InputStatus.MISMATCH, InputStatus.MISSING):
            continue
        why = "gradient is zero or None" if err.status == InputStatus.MISSING else "beyond the tolerance and the bound"
        undecided = dataclasses.replace(
            err,
            status=InputStatus.UNDECIDED,
            detail=f"{why}, but rounding at {result.tolerance.dtype} alone can move the loss beyond the "
            f"tolerance (the forward is undecided): cannot decide",
        )
        result.errors[i] = undecided
        result.report = result.report.replace(describe_input(err), describe_input(undecided), 1)


def _at_differentiable_kinks(
    result: Check, model: Model, case: Case, *, oracle: Oracle, names: list[str], tol: Tolerance, dtype: str
) -> None:
    """A row undecided at entries the oracle cannot bound (a kink, a loss not smooth at the
    difference step). At a kink, a driver outside every value the chain rule gives with each
    kink's local derivative between its one-sided derivatives (check/oracles/kink_range.py) is wrong:
    grad_mismatch; where that range cannot be computed the row stays cannot_decide, with the
    reason. Within it, or off the kinks, where the loss itself is differentiable (its one-sided
    differences agree, finite_diff.one_sided) and the driver is beyond that derivative's
    tolerance and bound, the framework's subgradient convention differs: subgradient_differs."""
    beyond, elsewhere = {}, 0  # elsewhere: entries beyond tolerance with a finite bound (or shapeless)
    for name, err in zip(names, result.errors):
        want, got = oracle.grads[name], result.grads.get(name)
        g = np.zeros(np.shape(want)) if got is None else np.asarray(got, dtype=np.float64)
        if g.shape != np.shape(want):
            elsewhere += 1
            continue
        allowed = tol.max_rel_error * err.scale
        outside = ~(np.abs(g - want) <= allowed)
        at = np.argwhere(np.isinf(oracle.error_of(name)) & outside)
        elsewhere += int(np.count_nonzero(outside)) - len(at)
        if len(at):
            beyond[name] = (g, allowed, [tuple(int(i) for i in idx) for idx in at], err)
    if not beyond:
        return
    span, slack = kink_range(model, case, list(beyond)), _rounding_slack(model, case, list(beyond), dtype)
    wrong, found, unknown = [], [], []
    poles = 0  # unknown entries where the oracle has no value (a pole: H v holds v at 0 there)
    worst: dict[str, InputError] = {}  # per input, its entry furthest outside the range
    for name, (g, allowed, entries, err) in beyond.items():
        for idx in entries:
            lo, hi = span.of(name, idx)
            if span.kinked[name][idx] and not (np.isfinite(lo) and np.isfinite(hi)):
                unknown.append(f"{name} at {list(idx)} ({span.reason or 'a corner has no finite derivative'})")
                poles += int(np.isnan(oracle.grads[name][idx]))
                continue
            # An entry that meets no kink once only the undecided entries are differentiated (a tie of
            # values its derivative does not flow through) has its exact derivative in lo == hi.
            ranged = span.kinked[name][idx] or (np.isfinite(lo) and np.isfinite(hi))
            if ranged and not lo - allowed <= g[idx] <= hi + allowed:
                extra = slack(name, idx, lo, hi)
                if isinstance(extra, str):
                    unknown.append(f"{name} at {list(idx)} ({extra})")
                elif not lo - allowed - extra <= g[idx] <= hi + allowed + extra:
                    why = (
                        f"outside every value the kinks' one-sided derivatives allow: [{lo:.10g}, {hi:.10g}]"
                        if span.kinked[name][idx]
                        else f"its derivative is {lo:.10g} (no kink on its path once only the undecided entries are "
                        f"differentiated: exact)"
                    )
                    wrong.append(f"{name} at {list(idx)}: got {g[idx]:.10g}, {why}")
                    outside = _outside_range(err, idx, float(g[idx]), lo=lo, hi=hi, why=why)
                    if name not in worst or outside.max_rel_error > worst[name].max_rel_error:
                        worst[name] = outside
                continue
            derivative = one_sided(model, case, name, idx)
            if derivative is not None and not abs(g[idx] - derivative[0]) <= allowed + derivative[1]:
                found.append(f"{name} at {list(idx)}: got {g[idx]:.10g}, the derivative is {derivative[0]:.10g}")
    _kink_verdict(result, wrong, found, unknown)
    # The per-input lines agree with the row: an input with an entry outside the range is a mismatch.
    for i, err in enumerate(result.errors):
        if err.name in worst:
            result.errors[i] = worst[err.name]
            result.report = result.report.replace(describe_input(err), describe_input(worst[err.name]), 1)
    at_kinks = all(span.kinked[n][idx] for n, (_, _, entries, _) in beyond.items() for idx in entries)
    # An entry at a pole has no derivative, and the H v oracle holds v at 0 there
    # (second_order.hvp_oracle): the other entries' H v is defined, and judged.
    at_poles = len(unknown) == poles
    result.kinks_only = at_kinks and not (elsewhere or wrong) and at_poles and result.forward != UNDECIDED


def _outside_range(err: InputError, idx: tuple, got: float, *, lo: float, hi: float, why: str) -> InputError:
    """err's entry `idx` judged against the range [lo, hi] its kinks allow (lo == hi: its exact
    derivative): a mismatch, shown against the range's midpoint with its half-width as the bound."""
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    return dataclasses.replace(
        err,
        status=InputStatus.MISMATCH,
        max_rel_error=abs(got - mid) / err.scale,
        index=idx,
        got=got,
        want=mid,
        oracle_error=half / err.scale,
        detail=why,
    )


def _kink_verdict(result: Check, wrong: list[str], found: list[str], unknown: list[str]) -> None:
    if unknown:
        result.report += "\nno range of subgradients for " + "; ".join(unknown) + ": cannot decide"
    if wrong:
        result.status = Status.GRAD_MISMATCH
        result.report += "\nbeyond what any subgradient convention gives:\n  " + "\n  ".join(wrong)
    elif found and not unknown:
        result.status = Status.SUBGRADIENT_DIFFERS
        result.report += (
            "\nthe loss is differentiable where the step's ops are not (its one-sided differences agree), and "
            "the framework's subgradient convention gives another value:\n  " + "\n  ".join(found)
        )


def _rounding_slack(model: Model, case: Case, names: list[str], dtype: str) -> Any:
    """slack(name, idx, lo, hi): what rounding at `dtype` alone may add beyond the kinks' range: 0 at
    float64 (the tolerance covers it); at float32, ROUNDING_SAFETY x an independent float32
    computation's distance from the range (check/differentiation/low_precision.py: a correct float32 convention
    moved by rounding alone); a reason (str) where that cannot be bounded."""
    if dtype == "float64":
        return lambda name, idx, lo, hi: 0.0
    tape: dict[str, np.ndarray] | str = f"no rounding bound at {dtype}"
    if dtype == "float32":
        try:
            tape = float32_gradients(model, case, names)
        except Exception as exc:  # a step the float32 tape cannot run
            tape = f"no float32 rounding bound: {type(exc).__name__}: {exc}"

    def slack(name: str, idx: tuple, lo: float, hi: float) -> float | str:
        if isinstance(tape, str):
            return tape
        t = float(tape[name][idx])
        if not np.isfinite(t):
            return "the float32 computation's own derivative is not finite"
        return ROUNDING_SAFETY * max(lo - t, t - hi, 0.0)

    return slack


def registered(
    result: Any, driver_name: str, model: Model, *, case: Case, dtype: str, order: int = 1, mode: str = VJP
) -> Any:
    """Apply the known-issues registry to a verdict of derivative `order` in differentiation mode
    `mode` (anything with status, report and raw_status): an expected failure becomes
    known_issue:<id>, a covered row that came out right known_issue_fixed:<id>; raw_status keeps
    the check's own verdict."""
    result.raw_status = result.status
    expected = known_issues.covering(driver_name, model, case, dtype=dtype, order=order, mode=mode)
    result.status, note = known_issues.classify(result.status, result.report, expected, result)
    if note:
        result.report = f"{note}\n{result.report}"
    return result
