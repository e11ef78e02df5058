"""Run fuzzed bodies on drivers: each (body, driver) pair checked by rnnbench.rows.pair.check_pair
(first order, then H v where the driver has a second-order path, against the body's cached oracles
from the ladder, with the known-issues registry applied), and shrinking of each failure to a minimal
body that fails the same way. fuzz() runs a Campaign in this process (rnnbench.fuzz.isolated: in
worker processes); its records are rnnbench.fuzz.campaign's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rnnbench import registry
from rnnbench.drivers.base import Driver
from rnnbench.fuzz.campaign import Campaign
from rnnbench.fuzz.cases import FuzzCase, build
from rnnbench.fuzz.grammar import Body, shrink_candidates, size
from rnnbench.fuzz.outcome import Outcome, kind_of
from rnnbench.fuzz.summary import FuzzSummary
from rnnbench.modes import VJP
from rnnbench.rows.pair import PairPlan, agrees, check_pair
from rnnbench.status import Status


@dataclass(frozen=True)
class Judged:
    """One driver's verdict on one body: the first-order status, the H v status (None where the
    driver has no second-order path), the report, and the oracle kind that judged them."""

    status: str
    hvp_status: str | None
    report: str
    oracle_kind: str


def run_driver(
    fc: FuzzCase, driver: Driver, dtype: str, *, second_order: bool, device: str = "cpu", mode: str = VJP
) -> Judged:
    """The verdict of one driver on one well-conditioned body in differentiation mode `mode`
    (rnnbench.modes), checked by rnnbench.rows.pair.check_pair against the body's cached oracles
    (shrinking checks many bodies: only the shrunk one is localized, by on_failure)."""
    plan = PairPlan(
        order=2 if second_order else 1,
        oracle=fc.oracle,
        hvp_oracle=fc.hvp_oracle,
        example_oracles=fc.example_oracles,
        repeat=False,
        localize=False,
        mode=mode,
    )
    pair = check_pair(fc.model, driver, fc.case, dtype=dtype, device=device, plan=plan)
    chk, hvp_status = pair.check, pair.hvp_status
    if hvp_status is None:
        # a row undecided at its kinks only agrees enough for H v, not enough to drop its report
        report = "" if agrees(chk) and not chk.kinks_only else chk.report
        return Judged(status=chk.status, hvp_status=None, report=report, oracle_kind=chk.oracle_kind)
    # an undecided first order keeps its reason beside the H v report (a campaign classes it by that reason)
    parts = ([] if chk.status == Status.OK else [chk.report]) + (
        [] if hvp_status == Status.OK else [pair.hvp["report"]]
    )
    oracle_kind = f"{chk.oracle_kind}+{pair.hvp['oracle_kind']}"
    return Judged(status=chk.status, hvp_status=hvp_status, report="\n".join(parts), oracle_kind=oracle_kind)


def _kind(judged: Judged) -> str:
    """What shrinking preserves of a verdict (fuzz.outcome.kind_of)."""
    return kind_of(judged.status, judged.hvp_status)


def shrink(
    body: Body, driver: Driver, dtype: str, *, kind: str, device: str = "cpu", budget: int = 60, mode: str = VJP
) -> Body:
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
            if (
                fc.ill_conditioned is None
                and _kind(run_driver(fc, driver, dtype, second_order=True, device=device, mode=mode)) == kind
            ):
                current, progress = cand, True
                break
    return current


def explain_outcome(
    *,
    index: int,
    fc: FuzzCase,
    driver: Driver,
    dtype: str,
    second_order: bool,
    shrink_per_kind: int,
    shrunk: Counter,
    on_failure: Callable[[Outcome, FuzzCase, Driver], None] | None = None,
    device: str = "cpu",
    mode: str = VJP,
) -> Outcome:
    """One well-conditioned body on one driver, in differentiation mode `mode`. The first
    `shrink_per_kind` outcomes of each (driver, status) that fail, error or reproduce a known issue
    are shrunk to a minimal body and passed to on_failure (localization, repro export); `shrunk`
    counts them across calls."""
    judged = run_driver(fc, driver, dtype, second_order=second_order, device=device, mode=mode)
    out = Outcome(
        index=index,
        driver=driver.name,
        status=judged.status,
        hvp_status=judged.hvp_status,
        report=judged.report,
        body=fc.body,
        oracle_kind=judged.oracle_kind,
    )
    if (out.failed or out.known or out.errored) and shrunk[(driver.name, out.kind)] < shrink_per_kind:
        shrunk[(driver.name, out.kind)] += 1
        out.minimal = shrink(fc.body, driver, dtype, kind=out.kind, device=device, mode=mode)
        minimal = build(out.minimal, dtype=dtype)
        out.report = run_driver(minimal, driver, dtype, second_order=second_order, device=device, mode=mode).report
        if on_failure is not None:
            on_failure(out, minimal, driver)
    return out


def fuzz(
    campaign: Campaign,
    drivers: Sequence[Driver] | None = None,
    progress: Callable[[str], None] | None = None,
    on_failure: Callable[[Outcome, FuzzCase, Driver], None] | None = None,
) -> FuzzSummary:
    """The campaign's bodies (Campaign.body: each under every loss form of its losses) on every
    driver, in this process (fuzz/isolated.py runs each driver in a worker process instead).
    drivers: the campaign's drivers as objects where the registry does not hold them (a planted one)."""
    drivers = drivers or [registry.get_driver(name) for name in campaign.drivers]
    summary = campaign.summary(())
    shrunk: Counter = Counter()
    for index in range(campaign.judged):
        fc = build(campaign.body(index), dtype=campaign.dtype)
        if fc.ill_conditioned:
            summary.ill_conditioned[fc.ill_conditioned.split(" for ")[0]] += 1
        else:
            summary.outcomes += [
                explain(campaign, index, fc, driver=driver, shrunk=shrunk, on_failure=on_failure) for driver in drivers
            ]
        if progress is not None:
            progress(f"case {index + 1}/{campaign.judged}")
    return summary


def explain(
    campaign: Campaign,
    index: int,
    fc: FuzzCase,
    *,
    driver: Driver,
    shrunk: Counter,
    on_failure: Callable[[Outcome, FuzzCase, Driver], None] | None = None,
) -> Outcome:
    """explain_outcome under the campaign's settings (dtype, second order, shrinking, device)."""
    return explain_outcome(
        index=index,
        fc=fc,
        driver=driver,
        dtype=campaign.dtype,
        second_order=campaign.second_order,
        shrink_per_kind=campaign.shrink_per_kind,
        shrunk=shrunk,
        on_failure=on_failure,
        device=campaign.device,
        mode=campaign.mode,
    )
