"""Run fuzzed bodies on drivers: first-order check (rnnbench.run.row.check_gradients against cached
float64 finite differences), second-order check (Prepared.hvp against finite-difference H v) where
the driver provides it, and shrinking of failures to a minimal body."""

from __future__ import annotations

import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional

from rnnbench.check.compare import compare_grads, describe
from rnnbench.check.tolerance import tolerance
from rnnbench.drivers.base import Driver
from rnnbench.fuzz.cases import FuzzCase, build
from rnnbench.fuzz.grammar import Body, generate, shrink_candidates, size
from rnnbench.run.row import check_gradients

FIRST_ORDER_FAILURES = ("grad_mismatch", "missing_grad", "forward_mismatch")
HVP_FAILURES = ("hvp_mismatch", "hvp_missing")


@dataclass
class Outcome:
    """One (body, driver) result. status: first-order row status; hvp_status: "ok", "hvp_mismatch",
    "hvp_missing", "hvp_error", "ill_conditioned" or None (driver has no hvp / first order failed)."""

    index: int
    driver: str
    status: str
    hvp_status: Optional[str] = None
    report: str = ""
    body: Optional[Body] = None
    minimal: Optional[Body] = None
    localization: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FIRST_ORDER_FAILURES or self.hvp_status in HVP_FAILURES


def run_driver(fc: FuzzCase, driver: Driver, dtype: str, second_order: bool) -> tuple[str, Optional[str], str]:
    """(status, hvp_status, report) of one driver on one well-conditioned body."""
    chk, prepared = check_gradients(fc.model, driver, fc.case, dtype, "cpu")
    if chk.status != "ok" or prepared is None or prepared.hvp is None or not second_order or dtype != "float64":
        return chk.status, None, chk.report if chk.status != "ok" else ""
    v, want, reason = fc.hvp_oracle()
    if reason is not None:
        return chk.status, "ill_conditioned", reason
    try:
        got = prepared.hvp(v)
    except Exception as exc:  # an hvp the framework refuses is an error, not a wrong number
        return chk.status, "hvp_error", f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=-3))
    tol = tolerance(dtype, "finite_differences_hvp")
    errors = compare_grads(got, want, fc.case.wrt_names(fc.model.carry_names), tol)
    if any(e.status == "missing" for e in errors):
        status = "hvp_missing"
    elif any(e.status == "mismatch" for e in errors):
        status = "hvp_mismatch"
    else:
        status = "ok"
    return chk.status, status, "" if status == "ok" else "Hessian-vector product:\n" + describe(errors, 0.0, tol)


def _same_failure(body: Body, driver: Driver, dtype: str, status: str, hvp_status: Optional[str]) -> bool:
    fc = build(body)
    if fc.ill_conditioned:
        return False
    got = run_driver(fc, driver, dtype, second_order=hvp_status is not None)
    if status in FIRST_ORDER_FAILURES:
        return got[0] == status
    return got[1] == hvp_status


def shrink(body: Body, driver: Driver, dtype: str, status: str, hvp_status: Optional[str], budget: int = 60) -> Body:
    """Greedy: take the first one-step-simpler body that fails the same way; repeat to a fixpoint
    or until `budget` candidate checks are spent."""
    current, spent = body, 0
    progress = True
    while progress and spent < budget:
        progress = False
        for cand in shrink_candidates(current):
            if spent >= budget:
                break
            spent += 1
            if size(cand) < size(current) and _same_failure(cand, driver, dtype, status, hvp_status):
                current, progress = cand, True
                break
    return current


@dataclass
class FuzzSummary:
    drivers: list[str]
    bodies: int
    ill_conditioned: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    def counts(self) -> dict[str, Counter]:
        per: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            c = per[o.driver]
            c["tried"] += 1
            c["agree" if o.status == "ok" else ("mismatch" if o.status in FIRST_ORDER_FAILURES else o.status)] += 1
            if o.hvp_status is not None:
                c["hvp_" + ("tried" if o.hvp_status != "ill_conditioned" else "ill_conditioned")] += 1
                if o.hvp_status == "ok":
                    c["hvp_agree"] += 1
                elif o.hvp_status in HVP_FAILURES:
                    c["hvp_mismatch"] += 1
                elif o.hvp_status == "hvp_error":
                    c["hvp_error"] += 1
        return per

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    def format(self) -> str:
        counts = self.counts()
        cols = ("tried", "agree", "mismatch", "error", "compile_error", "hvp_tried", "hvp_agree", "hvp_mismatch", "hvp_error")
        lines = [f"fuzz: {self.bodies} bodies, {self.ill_conditioned} skipped as ill-conditioned "
                 f"(finite differences disagree between step sizes, or the loss overflows)",
                 f"{'driver':<28}" + "".join(f"{c:>14}" for c in cols)]
        for d in self.drivers:
            lines.append(f"{d:<28}" + "".join(f"{counts[d][c]:>14}" for c in cols))
        hvp_ill = sum(c["hvp_ill_conditioned"] for c in counts.values())
        if hvp_ill:
            lines.append(f"(second order skipped as ill-conditioned on {hvp_ill} (body, driver) pairs)")
        failures = self.failures
        lines.append(f"\n{len(failures)} mismatches" + (":" if failures else ""))
        for o in failures:
            lines.append(f"\n== body {o.index} on {o.driver}: {o.status}" + (f", second order {o.hvp_status}" if o.hvp_status in HVP_FAILURES else ""))
            if o.minimal is not None:
                lines.append(f"minimal body (T={o.minimal.length}, n={o.minimal.n}, xs={'yes' if o.minimal.has_xs else 'no'}, "
                             f"carry0 grad={list(o.minimal.carry_grad)}):\n{o.minimal.source().rstrip()}")
            lines.append(o.report.rstrip())
            if o.localization:
                lines.append(o.localization.rstrip())
        errors = [o for o in self.outcomes if o.status in ("error", "compile_error") or o.hvp_status == "hvp_error"]
        if errors:
            lines.append(f"\n{len(errors)} driver errors (not gradient mismatches); first: body {errors[0].index} on "
                         f"{errors[0].driver}: {errors[0].report.strip().splitlines()[0] if errors[0].report.strip() else ''}")
        return "\n".join(lines)


def fuzz(
    cases: int,
    seed: int,
    drivers: list[Driver],
    dtype: str = "float64",
    second_order: bool = True,
    shrink_per_driver: int = 2,
    progress: Optional[Callable[[str], None]] = None,
) -> FuzzSummary:
    """Bodies generate(seed, 0..cases-1) on every driver. The first `shrink_per_driver` failures of
    each (driver, kind) are shrunk to a minimal body; the rest are reported with their full body."""
    summary = FuzzSummary([d.name for d in drivers], cases)
    shrunk: Counter = Counter()
    for index in range(cases):
        body = generate(seed, index)
        fc = build(body)
        if fc.ill_conditioned:
            summary.ill_conditioned += 1
            continue
        for driver in drivers:
            status, hvp_status, report = run_driver(fc, driver, dtype, second_order)
            out = Outcome(index, driver.name, status, hvp_status, report, body)
            if out.failed:
                key = (driver.name, status if status != "ok" else hvp_status)
                out.minimal = body
                if shrunk[key] < shrink_per_driver:
                    shrunk[key] += 1
                    out.minimal = shrink(body, driver, dtype, status, hvp_status if status == "ok" else None)
                    if out.minimal is not body:
                        m = build(out.minimal)
                        out.report = run_driver(m, driver, dtype, status == "ok")[2]
            summary.outcomes.append(out)
        if progress is not None:
            progress(f"body {index + 1}/{cases}")
    return summary
