"""Check one (driver, case) pair, in this process: the one path a run row, `check_recurrence`, the
fuzzer and the asv/pytest entry all take. `check_pair` runs the stages in order: whether the pair
can run here (`unavailable_reason`), the first-order verdict (`check_gradients`: prepare, first call,
the judge with the known-issues registry), repeatability, the H v verdict, the one rule for when
H v decides the pair's status (`hvp_decides`), and the localization of an unexplained wrong
gradient. A `PairPlan` says which of these a caller wants; callers only format the `PairCheck`."""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

from rnnbench import batch
from rnnbench.check.oracles.oracle import Oracle, oracle_grads
from rnnbench.check.tolerance import tolerance
from rnnbench.check.verdicts.judge import Check, judge
from rnnbench.check.verdicts.localize import Localization, localize
from rnnbench.check.verdicts.per_example import ExampleOracles, example_oracles, judge_examples
from rnnbench.check.verdicts.second_order import HvpOracle, check_second_order
from rnnbench.drivers.base import Driver, Prepared, derivatives
from rnnbench.machine import environments
from rnnbench.model import Case, Model, promoted, promotion_note
from rnnbench.modes import PER_EXAMPLE, VJP
from rnnbench.processes.compile_budget import budget
from rnnbench.rows.timing import timed_call
from rnnbench.status import Status, is_fixed, is_known

LOCALIZED = (Status.GRAD_MISMATCH, Status.MISSING_GRAD)  # unexplained wrong gradients get a localization
LOCALIZE_BUDGET_S = 60.0  # a compiled driver recompiles for every suffix: bound the walk
NOT_JUDGED = (Status.SKIPPED, Status.UNSUPPORTED)  # H v statuses that say the check did not run
# first-order statuses of a pair that may differ only at the step's kinks (Check.kinks_only)
UNDECIDED_AT_KINKS = frozenset({Status.SUBGRADIENT_DIFFERS, Status.CANNOT_DECIDE})


@dataclass(frozen=True, kw_only=True)
class PairPlan:
    """What to check of a pair besides the first-order verdict, and what the caller already has.

    order: 2 also checks H v along a seeded direction (float64 pairs whose driver has a second-order
    path). seed: that direction's seed. oracle: the case's first-order oracle when the caller
    computed it once for several drivers (None: computed here); hvp_oracle: gives the case's H v
    oracle, asked only when H v is checked (the fuzzer caches it per body; None: computed here).
    oracle_choice: a rung of the oracle ladder to force (None: the ladder). example_oracles: gives
    the oracle of each example's own case, asked only in the per_example mode (None: computed here).
    compile_budget_s:
    prepare + first call raise CompileBudgetExceeded after this long. repeat: call the driver a
    second time and record whether the gradients are bit-identical. localize: walk an unexplained
    wrong gradient to its first step (the fuzzer localizes only its shrunk bodies). fresh_compiles:
    the driver compiles from the framework's clean state, dropping what earlier compiles in this
    process made (False: under Framework.compiles_kept, for a caller that keeps several compiled
    pairs alive at once and resets between groups itself: the idiomatic comparison)."""

    order: int = 1
    seed: int = 0
    oracle: Oracle | None = None
    hvp_oracle: Callable[[], HvpOracle] | None = None
    example_oracles: Callable[[], ExampleOracles] | None = None
    oracle_choice: str | None = None
    compile_budget_s: float | None = None
    repeat: bool = True
    localize: bool = True
    fresh_compiles: bool = True
    mode: str = VJP


@dataclass
class PairCheck:
    """What checking a pair found. check: the first-order verdict (after the registry); prepared:
    the driver, ready to time, where it prepared; hvp: the H v record (status, report, errors,
    oracle_kind, check_s; None where order is 1); status / report: the pair's verdict, first order
    unless H v decides (hvp_decides); repeatable: None where the driver did not prepare or repeat
    was not asked for; localization: where an unexplained wrong gradient first goes wrong."""

    check: Check
    prepared: Prepared | None
    status: str
    report: str
    hvp: dict[str, Any] | None = None
    repeatable: dict[str, Any] | None = None
    localization: Localization | None = None

    @property
    def hvp_status(self) -> str | None:
        """The H v check's status where it judged (not skipped, not unsupported), else None."""
        return None if self.hvp is None or self.hvp["status"] in NOT_JUDGED else str(self.hvp["status"])


def check_pair(model: Model, driver: Driver, case: Case, *, dtype: str, device: str, plan: PairPlan) -> PairCheck:
    """Every verdict on one pair whose availability the caller has established. `case` is already
    rounded to `dtype`. Never raises for driver failures (they become the status); raises
    CompileBudgetExceeded when plan.compile_budget_s runs out."""
    chk, prepared = check_gradients(
        model,
        driver,
        case,
        dtype=dtype,
        device=device,
        oracle=plan.oracle,
        choice=plan.oracle_choice,
        budget_s=plan.compile_budget_s,
        fresh_compiles=plan.fresh_compiles,
        mode=plan.mode,
        examples=plan.example_oracles,
    )
    out = PairCheck(chk, prepared, chk.status, chk.report)
    if chk.status == Status.UNAVAILABLE:
        return out
    if prepared is not None and plan.repeat:
        out.repeatable = repeatability(prepared, chk, mode=plan.mode)
    if plan.order == 2 and plan.mode == VJP:
        out.hvp = second_order(model, driver, case, dtype=dtype, prepared=prepared if agrees(chk) else None, plan=plan)
        if hvp_decides(chk.status, out.hvp_status):
            out.status, out.report = out.hvp["status"], out.hvp["report"]
    if plan.localize and chk.status in LOCALIZED and not driver.anchor and plan.mode != PER_EXAMPLE:
        # not on a vendor layer: it does not run the model's step, so there is no step to blame; a per_example
        # row's lines already name the example and entry, and the suffix walk compares whole-batch gradients
        out.localization = localize(
            model, driver, case, dtype=dtype, device=device, budget_s=LOCALIZE_BUDGET_S, mode=plan.mode
        )
        chk.report = out.report = f"{chk.report.rstrip()}\n{out.localization.format()}"
    return out


def agrees(chk: Check) -> bool:
    """The first-order gradients agree with the oracle (a registered bug that did not reproduce
    included), or differ only at the step's kinks within what their one-sided derivatives allow
    (judge: kinks_only; H v of the other entries is defined): the condition for checking H v."""
    return chk.raw_status == Status.OK or chk.kinks_only


def first_order_ok(first_order: str, hvp_status: str | None = None) -> bool:
    """Whether a first-order verdict (after the registry) lets H v decide the pair: ok, or a
    registered bug that did not reproduce (known_issue_fixed), or undecided (UNDECIDED_AT_KINKS)
    beside an H v that was judged (hvp_status not None, PairCheck.hvp_status). H v is judged only where
    first order agrees (`agrees`), so an undecided first order beside it is undecided only at the
    step's kinks, and H v is defined on the other entries. With hvp_status None: right at first order."""
    return (
        first_order == Status.OK
        or is_fixed(first_order)
        or (hvp_status is not None and first_order in UNDECIDED_AT_KINKS)
    )


def hvp_decides(first_order: str, hvp_status: str | None) -> bool:
    """Whether a pair's H v verdict becomes its status (and a row gets no speed number): a wrong
    H v, a framework error in the double backward, or a registered (or fixed) second-order bug,
    once first order is ok (first_order_ok). hvp_status: the H v status where it was judged
    (PairCheck.hvp_status), None where it was not. An H v the oracle cannot resolve
    (ill_conditioned), a driver without a second-order path and an unchecked pair keep the
    first-order verdict."""
    return (
        hvp_status is not None
        and first_order_ok(first_order, hvp_status)
        and (hvp_status in (Status.HVP_MISMATCH, Status.HVP_ERROR) or is_known(hvp_status) or is_fixed(hvp_status))
    )


def pair_status(first_order: str, hvp_status: str | None) -> str:
    """The pair's status from its first-order status (after the registry) and its H v status where
    judged (None elsewhere): first order unless H v decides. check_pair's PairCheck.status and the
    fuzzer's classes (rnnbench.fuzz.outcome) are this one rule; a fuzz record's two statuses give it."""
    return str(hvp_status) if hvp_decides(first_order, hvp_status) else first_order


def check_gradients(
    model: Model,
    driver: Driver,
    case: Case,
    *,
    dtype: str,
    device: str,
    oracle: Oracle | None = None,
    choice: str | None = None,
    budget_s: float | None = None,
    fresh_compiles: bool = True,
    mode: str = VJP,
    examples: Callable[[], ExampleOracles] | None = None,
) -> tuple[Check, Prepared | None]:
    """The first-order stage: prepare the driver, run loss_and_grads once (timing both: the first
    call compiles) and ask the judge (rnnbench.check.verdicts.judge). Never raises for driver failures:
    they become the status. oracle: the case's oracle when the caller has it; choice: a forced
    rung of the ladder; budget_s: prepare + first call stop with CompileBudgetExceeded after this
    long; fresh_compiles: PairPlan.fresh_compiles; mode: the differentiation mode the gradients come
    by (rnnbench.modes): one the driver cannot run is Status.UNAVAILABLE with its reason, unjudged;
    so is per_example on a case without examples (rnnbench.batch.unavailable). examples: gives the
    oracle of each example's own case (per_example; None: computed here)."""
    missing = driver.mode_missing(mode)
    if missing is None and mode == PER_EXAMPLE:
        missing = batch.unavailable(model, case)
    if missing is not None:
        tol = tolerance(dtype, "", device)
        return Check(status=Status.UNAVAILABLE, oracle_kind="", tolerance=tol, report=missing, raw_status=""), None
    common = {
        "device": device,
        "driver_name": driver.name,
        "compiled": driver.compiled,
        "autocast": driver.autocast is not None,
    }
    if mode == PER_EXAMPLE:
        each = examples() if examples is not None else example_oracles(model, case, choice)
        verdict = partial(judge_examples, model, case, dtype, **common, oracles=each)
    else:
        oracle = oracle if oracle is not None else oracle_grads(model, case, choice)
        verdict = partial(judge, model, case, dtype, **common, oracle=oracle, mode=mode)
    try:
        with budget(budget_s), nullcontext() if fresh_compiles else driver.framework.compiles_kept():
            prepared, prepare_s = timed_call(lambda: driver.prepare(model, case, dtype, device))
            produced, first_call_s = timed_call(derivatives(prepared, mode))
    except Exception as exc:  # a driver failure is a result, not a crash of the suite
        failed = verdict(raised=exc)
        if mode != VJP and driver.framework.refuses(exc):  # declined, in the framework's own words
            failed.status = failed.raw_status = Status.UNAVAILABLE
            failed.report = f"{mode}: the framework declines it here: {failed.report.splitlines()[0]}"
        if driver.framework.collect_after_failure:  # the failed trace's tensors go with the frames' locals
            _clear_frames_of_chain(exc)
    else:
        result = verdict(produced=produced)
        result.prepare_s, result.first_call_s = prepare_s, first_call_s
        if driver.autocast is None and prepared.computed_dtype is not None:  # autocast mixes dtypes by design
            result.computed_dtype = promoted(dtype, prepared.computed_dtype())
        if result.computed_dtype:
            result.report = f"{result.report.rstrip()}\n{promotion_note(dtype, result.computed_dtype)}".lstrip()
        return result, prepared
    if driver.framework.collect_after_failure:  # `exc` is gone: what only reference cycles held goes too
        prepared = None  # the driver's closures may hold the failed trace's tensors in cycles of their own
        gc.collect()
    return failed, None


def _clear_frames_of_chain(exc: BaseException | None) -> None:
    """Clear the locals of every frame in the tracebacks of `exc` and of the exceptions it was raised
    from or while handling (a backward's error may wrap the one raised inside the traced step)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def second_order(
    model: Model, driver: Driver, case: Case, *, dtype: str, prepared: Prepared | None, plan: PairPlan
) -> dict[str, Any]:
    """The pair's H v check (rnnbench.check.verdicts.second_order) as a record: "skipped" with why where it
    is not judged (float32 pairs: the oracle's ~1e-10 error is invisible under float32 rounding;
    first order did not agree), "unsupported" where the driver has no second-order path."""
    if dtype != "float64":
        return {"status": Status.SKIPPED, "report": "second order is checked on float64 rows"}
    if prepared is None:
        return {"status": Status.SKIPPED, "report": "first-order gradients did not agree"}
    if not driver.second_order or prepared.hvp is None:
        return {"status": Status.UNSUPPORTED, "report": f"{driver.name} has no second-order path"}
    started = time.perf_counter()
    oracle = plan.hvp_oracle() if plan.hvp_oracle is not None else None
    result = check_second_order(
        model, driver.name, case, prepared=prepared, oracle=oracle, seed=plan.seed, choice=plan.oracle_choice
    )
    kind = result.oracle_kind or (oracle.kind if oracle is not None else "")
    return {
        "status": result.status,
        "raw_status": result.raw_status or result.status,
        "report": result.report,
        "errors": [e.to_dict() for e in result.errors],
        "check_s": time.perf_counter() - started,
        "oracle_kind": kind or None,
    }


def repeatability(prepared: Prepared, chk: Check, *, mode: str = VJP) -> dict[str, Any]:
    """Run loss_and_grads a second time: on CPU the same case should give bit-identical gradients.
    Where it does not (threaded reductions with run-dependent order), the record says by how much."""
    import numpy as np

    try:
        loss2, grads2 = derivatives(prepared, mode)()
    except Exception as exc:
        return {"bitwise": False, "why": f"second call raised {type(exc).__name__}"}
    loss1, grads1 = chk.loss, chk.grads
    # a per_example call gives each example's loss, the row keeps the batch's: its gradients are compared
    pairs = [] if mode == PER_EXAMPLE else [(np.asarray(loss1), np.asarray(loss2))]
    pairs += [(grads1[k], grads2.get(k)) for k in grads1 if grads1[k] is not None and grads2.get(k) is not None]
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in pairs)
    out: dict[str, Any] = {"bitwise": bool(same)}
    if not same:
        out["max_abs_diff"] = max(float(np.nanmax(np.abs(a - b))) if a.size else 0.0 for a, b in pairs)
        out["why"] = "two calls on the same inputs differ (non-deterministic reduction order or kernels)"
    return out


def unavailable_reason(
    model: Model,
    driver: Driver,
    *,
    dtype: str,
    device: str = "cpu",
    environment: str | None = None,
    trying: bool = False,
) -> str | None:
    """None, or why this pair cannot run: the one place that decides it. Whether the driver runs in
    `environment` (None: this process's) and that environment exists is decided anywhere; whether
    its framework is installed there, and supports the dtype, device and model, is decided
    (Driver.why_not) only by a process of that environment (the runner's parent for its own
    environment, else the worker). trying: this process may run the driver to decide
    (Driver.try_dtype): the worker."""
    here = environments.current()
    environment = environment or here
    if not environments.runs(driver, environment):
        return f"{driver.name} does not run in environment '{environment}'"
    reason = driver.supports(model) or environments.get(environment).missing_reason()
    if reason is None and environment == here:
        reason = driver.why_not(model, dtype, device, trying=trying)
    return reason
