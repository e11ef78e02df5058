"""Run fuzzed bodies on drivers: the first-order check (rnnbench.run.row.check_gradients, the judge,
cached float64 finite differences), the second-order check (rnnbench.check.second_order against
loss-difference H v) where the driver has one, both with the known-issues registry applied, and
shrinking of each failure to a minimal body that fails the same way."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from rnnbench.check.second_order import check_second_order
from rnnbench.drivers.base import Driver
from rnnbench.fuzz.cases import FuzzCase, build
from rnnbench.fuzz.grammar import Body, body_wrt, judged_body, shrink_candidates, size
from rnnbench.run.row import check_gradients
from rnnbench.status import DRIVER_ERRORS, WRONG_GRADIENT, Status, is_fixed, is_known

FIRST_ORDER_FAILURES = WRONG_GRADIENT
ERRORS = DRIVER_ERRORS  # crash, timeout: the worker's isolation
COLUMNS = ("tried", "agree", "undecided", "mismatch", "known", "error", "hvp_tried", "hvp_agree", "hvp_mismatch", "hvp_known",
           "hvp_error", "hvp_ill_cond")


@dataclass
class Outcome:
    """One (body, driver) result. status: the first-order status after the registry; hvp_status:
    the second-order one, or None where the driver has none or first order already failed."""

    index: int
    driver: str
    status: str
    hvp_status: Optional[str] = None
    report: str = ""
    body: Optional[Body] = None
    minimal: Optional[Body] = None
    localization: str = ""
    repro: str = ""

    @property
    def failed(self) -> bool:
        """A gradient the oracle contradicts and no registry entry explains."""
        return self.status in FIRST_ORDER_FAILURES or self.hvp_status == Status.HVP_MISMATCH

    @property
    def known(self) -> bool:
        return is_known(self.status) or is_known(self.hvp_status)

    @property
    def errored(self) -> bool:
        return self.status in ERRORS or self.hvp_status in ERRORS

    @property
    def first_order_ok(self) -> bool:
        return _first_order_ok(self.status)

    @property
    def kind(self) -> str:
        """What shrinking preserves: the first-order status, else the second-order one."""
        return _kind_of(self.status, self.hvp_status)


def run_driver(fc: FuzzCase, driver: Driver, dtype: str, second_order: bool, device: str = "cpu") -> tuple[str, Optional[str], str]:
    """(status, hvp_status, report) of one driver on one well-conditioned body."""
    chk, prepared = check_gradients(fc.model, driver, fc.case, dtype, device, oracle=fc.oracle)
    first_ok = chk.raw_status == Status.OK
    if not first_ok or prepared is None or prepared.hvp is None or not second_order or dtype != "float64":
        return chk.status, None, chk.report if not first_ok else ""
    result = check_second_order(fc.model, driver.name, fc.case, prepared, oracle=fc.hvp_oracle())
    return chk.status, result.status, "" if result.status == Status.OK else result.report


def _first_order_ok(status: str) -> bool:
    """Right at first order (a body a registry entry covers but that came out right included)."""
    return status == Status.OK or is_fixed(status)


def _kind_of(status: str, hvp_status: Optional[str]) -> str:
    return str(hvp_status) if _first_order_ok(status) else status


def shrink(body: Body, driver: Driver, dtype: str, kind: str, device: str = "cpu", budget: int = 60) -> Body:
    """Greedy: take the first one-step-simpler body that fails with the same status `kind`; repeat
    to a fixpoint or until `budget` candidate checks are spent."""
    current, spent, progress = body, 0, True
    while progress and spent < budget:
        progress = False
        for cand in shrink_candidates(current):
            if spent >= budget:
                break
            if size(cand) >= size(current):
                continue
            spent += 1
            fc = build(cand, dtype=dtype)
            if fc.ill_conditioned is None and _kind_of(*run_driver(fc, driver, dtype, True, device)[:2]) == kind:
                current, progress = cand, True
                break
    return current


@dataclass
class FuzzSummary:
    drivers: list[str]
    bodies: int
    seed: int
    dtype: str
    device: str = "cpu"
    losses: tuple[str, ...] = ("weighted",)  # every body is judged under each
    ill_conditioned: Counter = field(default_factory=Counter)
    outcomes: list[Outcome] = field(default_factory=list)

    def counts(self) -> dict[str, Counter]:
        per: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            c = per[o.driver]
            c["tried"] += 1
            if o.status in FIRST_ORDER_FAILURES:
                c["mismatch"] += 1
            elif is_known(o.status):
                c["known"] += 1
            elif o.status in ERRORS:
                c["error"] += 1
            elif o.status == Status.CANNOT_DECIDE:  # the oracle's error bound is wider than the tolerance
                c["undecided"] += 1
            else:  # ok, or a body a registry entry covers that came out right
                c["agree"] += 1
                c["covered_ok"] += is_fixed(o.status)
            if o.hvp_status is None:
                continue
            if o.hvp_status == Status.ILL_CONDITIONED:
                c["hvp_ill_cond"] += 1
                continue
            c["hvp_tried"] += 1
            c[{Status.HVP_MISMATCH: "hvp_mismatch", Status.HVP_ERROR: "hvp_error"}.get(o.hvp_status, "")
              or ("hvp_known" if is_known(o.hvp_status) else "hvp_agree")] += 1
        return per

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    def format(self) -> str:
        counts = self.counts()
        skipped = sum(self.ill_conditioned.values())
        lines = [f"fuzz: {self.bodies} bodies x {len(self.losses)} losses ({', '.join(self.losses)}; seed {self.seed}, "
                 f"{self.dtype}, {self.device}); {skipped} cases skipped as ill-conditioned"
                 + (" (" + ", ".join(f"{n} {why}" for why, n in self.ill_conditioned.most_common()) + ")" if skipped else ""),
                 f"{'driver':<26}" + "".join(f"{c:>13}" for c in COLUMNS)]
        for d in self.drivers:
            lines.append(f"{d:<26}" + "".join(f"{counts[d][c]:>13}" for c in COLUMNS))
        covered = {d: counts[d]["covered_ok"] for d in self.drivers if counts[d]["covered_ok"]}
        if covered:
            lines.append(f"(agree includes bodies a known-issue entry covers that came out right: {covered})")
        failures = self.failures
        lines.append(f"\n{len(failures)} mismatches (gradients the oracle contradicts, no registry entry)"
                     + (":" if failures else ""))
        lines += [_describe(o) for o in failures]
        known = [o for o in self.outcomes if o.known and o.minimal is not None]
        if known:
            lines.append("\nknown upstream issues reproduced (one minimal body each):")
            lines += [_describe(o) for o in known]
        undecided = [o for o in self.outcomes if o.status == Status.CANNOT_DECIDE]
        if undecided:
            lines.append(f"\n{len(undecided)} outcomes the check cannot decide (beyond the tolerance, but within the "
                         "oracle's error bound or what rounding alone does; not failures), the first:")
            lines.append(_describe(undecided[0]))
        errors = [o for o in self.outcomes if o.errored]
        if errors:
            lines.append(f"\n{len(errors)} driver errors (the framework raised; not gradient mismatches):")
            lines += [_describe(o) for o in errors if o.minimal is not None or o.status in (Status.CRASH, Status.TIMEOUT)]
        return "\n".join(lines)


def _describe(o: Outcome) -> str:
    b = o.minimal or o.body
    under = f" under loss {b.loss}" if b is not None else ""
    head = f"\n== case {o.index}{under} on {o.driver}: {o.status}" + (f", second order {o.hvp_status}" if o.hvp_status not in (None, Status.OK) else "")
    parts = [head]
    if b is not None:
        wrt = body_wrt(b)  # the effective flags: a leaf that cannot reach the loss is not differentiated
        grad = [f"carry0.{c}" in wrt for c in b.carry_names]
        parts.append(f"{'minimal ' if o.minimal is not None else ''}body (T={b.length}, n={b.n}, xs={'yes' if b.has_xs else 'no'}, "
                     f"carry0 requires grad={grad}):\n{b.source().rstrip()}")
    parts += [s.rstrip() for s in (o.report, o.localization) if s.strip()]
    if o.repro:
        parts.append(f"repro: {o.repro}")
    return "\n".join(parts)


def explain_outcome(index: int, fc: FuzzCase, driver: Driver, dtype: str, second_order: bool, shrink_per_kind: int,
                    shrunk: Counter, on_failure: Optional[Callable[[Outcome, FuzzCase, Driver], None]] = None,
                    device: str = "cpu") -> Outcome:
    """One well-conditioned body on one driver. The first `shrink_per_kind` outcomes of each
    (driver, status) that fail, error or reproduce a known issue are shrunk to a minimal body and
    passed to on_failure (localization, repro export); `shrunk` counts them across calls."""
    status, hvp_status, report = run_driver(fc, driver, dtype, second_order, device)
    out = Outcome(index, driver.name, status, hvp_status, report, fc.body)
    if (out.failed or out.known or out.errored) and shrunk[(driver.name, out.kind)] < shrink_per_kind:
        shrunk[(driver.name, out.kind)] += 1
        out.minimal = shrink(fc.body, driver, dtype, out.kind, device)
        minimal = build(out.minimal, dtype=dtype)
        out.report = run_driver(minimal, driver, dtype, second_order, device)[2]
        if on_failure is not None:
            on_failure(out, minimal, driver)
    return out


def fuzz(
    cases: int,
    seed: int,
    drivers: list[Driver],
    dtype: str = "float64",
    second_order: bool = True,
    shrink_per_kind: int = 1,
    progress: Optional[Callable[[str], None]] = None,
    on_failure: Optional[Callable[[Outcome, FuzzCase, Driver], None]] = None,
    device: str = "cpu",
    losses: Sequence[str] = ("weighted",),
) -> FuzzSummary:
    """Bodies generate(seed, 0..cases-1), each under every loss form of `losses` (judged_body), on
    every driver, in this process (fuzz/isolated.py runs each driver in a worker process instead)."""
    summary = FuzzSummary([d.name for d in drivers], cases, seed, dtype, device, tuple(losses))
    shrunk: Counter = Counter()
    for index in range(cases * len(losses)):
        fc = build(judged_body(seed, index, tuple(losses)), dtype=dtype)
        if fc.ill_conditioned:
            summary.ill_conditioned[fc.ill_conditioned.split(" for ")[0]] += 1
        else:
            for driver in drivers:
                summary.outcomes.append(explain_outcome(index, fc, driver, dtype, second_order, shrink_per_kind,
                                                        shrunk, on_failure, device))
        if progress is not None:
            progress(f"case {index + 1}/{cases * len(losses)}")
    return summary
