"""Run fuzzed bodies on drivers: the first-order check (rnnbench.run.row.check_gradients, the judge,
cached float64 finite differences), the second-order check (rnnbench.check.second_order against
loss-difference H v) where the driver has one, both with the known-issues registry applied, and
shrinking of each failure to a minimal body that fails the same way; and the fuzz records
(Campaign): one per (body, driver, dtype) outcome and one per ill-conditioned body, the summary
rebuilt from them."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnnbench import record
from rnnbench.check.second_order import check_second_order
from rnnbench.drivers.base import Driver
from rnnbench.fuzz.cases import FuzzCase, build
from rnnbench.fuzz.grammar import Body, judged_body, shrink_candidates, size
from rnnbench.run.row import check_gradients
from rnnbench.status import DRIVER_ERRORS, WRONG_GRADIENT, Status, is_fixed, is_known

if TYPE_CHECKING:
    from rnnbench.fuzz.summary import FuzzSummary

FIRST_ORDER_FAILURES = WRONG_GRADIENT
ERRORS = DRIVER_ERRORS  # crash, timeout: the worker's isolation
COLUMNS = (
    "tried",
    "agree",
    "undecided",
    "mismatch",
    "known",
    "error",
    "hvp_tried",
    "hvp_agree",
    "hvp_mismatch",
    "hvp_known",
    "hvp_error",
    "hvp_ill_cond",
)


@dataclass
class Outcome:
    """One (body, driver) result. status: the first-order status after the registry; hvp_status:
    the second-order one, or None where the driver has none or first order already failed."""

    index: int
    driver: str
    status: str
    hvp_status: str | None = None
    report: str = ""
    body: Body | None = None
    minimal: Body | None = None
    localization: str = ""
    repro: str = ""
    oracle_kind: str = ""  # the rung of the oracle ladder that judged it (first order; H v after a "+")

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


class Judged(tuple):
    """(status, hvp_status, report), and the oracle kind that judged them (`oracle_kind`)."""

    oracle_kind: str = ""


def _judged(status: str, hvp_status: str | None, report: str, oracle_kind: str) -> Judged:
    out = Judged((status, hvp_status, report))
    out.oracle_kind = oracle_kind
    return out


def run_driver(fc: FuzzCase, driver: Driver, dtype: str, second_order: bool, device: str = "cpu") -> Judged:
    """(status, hvp_status, report) of one driver on one well-conditioned body."""
    chk, prepared = check_gradients(fc.model, driver, fc.case, dtype, device, oracle=fc.oracle)
    first_ok = chk.raw_status == Status.OK
    if not first_ok or prepared is None or prepared.hvp is None or not second_order or dtype != "float64":
        return _judged(chk.status, None, chk.report if not first_ok else "", chk.oracle_kind)
    result = check_second_order(fc.model, driver.name, fc.case, prepared, oracle=fc.hvp_oracle())
    return _judged(
        chk.status,
        result.status,
        "" if result.status == Status.OK else result.report,
        f"{chk.oracle_kind}+{result.oracle_kind or fc.hvp_oracle().kind}",
    )


def _first_order_ok(status: str) -> bool:
    """Right at first order (a body a registry entry covers but that came out right included)."""
    return status == Status.OK or is_fixed(status)


def _kind_of(status: str, hvp_status: str | None) -> str:
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


def explain_outcome(
    index: int,
    fc: FuzzCase,
    driver: Driver,
    dtype: str,
    second_order: bool,
    shrink_per_kind: int,
    shrunk: Counter,
    on_failure: Callable[[Outcome, FuzzCase, Driver], None] | None = None,
    device: str = "cpu",
) -> Outcome:
    """One well-conditioned body on one driver. The first `shrink_per_kind` outcomes of each
    (driver, status) that fail, error or reproduce a known issue are shrunk to a minimal body and
    passed to on_failure (localization, repro export); `shrunk` counts them across calls."""
    judged = run_driver(fc, driver, dtype, second_order, device)
    status, hvp_status, report = judged
    out = Outcome(index, driver.name, status, hvp_status, report, fc.body, oracle_kind=judged.oracle_kind)
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
    progress: Callable[[str], None] | None = None,
    on_failure: Callable[[Outcome, FuzzCase, Driver], None] | None = None,
    device: str = "cpu",
    losses: Sequence[str] = ("weighted",),
) -> FuzzSummary:
    """Bodies generate(seed, 0..cases-1), each under every loss form of `losses` (judged_body), on
    every driver, in this process (fuzz/isolated.py runs each driver in a worker process instead)."""
    from rnnbench.fuzz.summary import FuzzSummary  # it reads Outcome from here

    summary = FuzzSummary([d.name for d in drivers], cases, seed, dtype, device, tuple(losses))
    shrunk: Counter = Counter()
    for index in range(cases * len(losses)):
        fc = build(judged_body(seed, index, tuple(losses)), dtype=dtype)
        if fc.ill_conditioned:
            summary.ill_conditioned[fc.ill_conditioned.split(" for ")[0]] += 1
        else:
            for driver in drivers:
                summary.outcomes.append(
                    explain_outcome(index, fc, driver, dtype, second_order, shrink_per_kind, shrunk, on_failure, device)
                )
        if progress is not None:
            progress(f"case {index + 1}/{cases * len(losses)}")
    return summary


# ---- records -------------------------------------------------------------------------------------
ILL_DRIVER = "-"  # the driver of an ill-conditioned body's record: the numpy forward decided, for every driver


def fuzz_settings(
    seed: int, second_order: bool, shrink_per_kind: int, device: str, losses: Sequence[str], timeout_s: float
) -> dict[str, Any]:
    """What determines a fuzz record's result besides its row key (its fingerprint; --resume
    refuses a file recorded with other settings)."""
    from rnnbench.run import environments

    return {
        "seed": seed,
        "second_order": second_order,
        "shrink": shrink_per_kind,
        "device": device,
        "losses": list(losses),
        "timeout": timeout_s,
        "versions": dict(environments.package_versions(environments.current())),
    }


@functools.cache
def _driver_identity(name: str) -> dict[str, Any]:
    """The driver fields of rnnbench.record.identity for a fuzz record (this environment's)."""
    from rnnbench import registry
    from rnnbench.run.environments import current

    if name == ILL_DRIVER:
        import numpy as np

        return {
            "framework": "numpy",
            "family": "numpy",
            "anchor": False,
            "environment": current(),
            "env_label": f"numpy {np.__version__}",
        }
    d = registry.get_driver(name)
    return {
        "framework": d.framework.name,
        "family": d.framework.family,
        "anchor": d.anchor,
        "environment": current(),
        "env_label": d.framework.label(),
    }


def body_fields(body: Body) -> dict[str, Any]:
    """A body as JSON-ready fields (expressions as nested lists): body_from_fields inverts it."""
    return dataclasses.asdict(body)


def body_from_fields(fields: dict[str, Any]) -> Body:
    def tupled(v: Any) -> Any:
        return tuple(tupled(x) for x in v) if isinstance(v, (list, tuple)) else v

    return Body(**{f.name: tupled(fields[f.name]) for f in dataclasses.fields(Body) if f.name in fields})


def is_ill(rec: dict[str, Any]) -> bool:
    return rec["status"] == Status.ILL_CONDITIONED


def outcome_from_record(rec: dict[str, Any]) -> Outcome:
    """The Outcome a fuzz record was written from (Campaign.to_record inverts it)."""
    return Outcome(
        rec["case"],
        rec["driver"],
        rec["status"],
        rec.get("hvp_status"),
        rec.get("report") or "",
        body_from_fields(rec["body"]),
        body_from_fields(rec["minimal"]) if rec.get("minimal") else None,
        rec.get("localization_report") or "",
        rec.get("repro") or "",
        rec.get("oracle_kind") or "",
    )


def shrunk_from_records(records: Iterable[dict[str, Any]]) -> Counter:
    """What a worker has shrunk already, per (driver, kind), from the records that carry a minimal
    body: a resumed campaign does not shrink those kinds again."""
    return Counter(
        (rec["driver"], _kind_of(rec["status"], rec.get("hvp_status"))) for rec in records if rec.get("minimal")
    )


@dataclass
class Campaign:
    """One fuzz run at one dtype, as records. Each (case, driver) outcome is one record, each
    ill-conditioned case one (driver "-", status ill_conditioned, with the reason): model
    "fuzz:<seed>:<body>", loss_form the case's loss, sizes T and n, the body's fields and source
    (enough to rebuild the case), status (first order), hvp_status, report, and where present the
    minimal body, localization_report and repro; identity fields as rnnbench.record.identity."""

    cases: int
    seed: int
    drivers: list[str]
    dtype: str
    device: str
    losses: tuple[str, ...]
    settings: dict[str, Any]

    @property
    def judged(self) -> int:
        return self.cases * len(self.losses)

    def body(self, index: int) -> Body:
        return judged_body(self.seed, index, self.losses)

    def identity(self, index: int, driver: str, body: Body | None = None) -> dict[str, Any]:
        body = body or self.body(index)
        rec = record.identity(
            model=f"fuzz:{self.seed}:{index // len(self.losses)}",
            driver=driver,
            **_driver_identity(driver),
            dtype=self.dtype,
            device=self.device,
            sizes={"T": body.length, "n": body.n},
            seed=self.seed,
            loss_form=body.loss,
            settings=self.settings,
        )
        rec["case"] = index
        return rec

    def _with_body(self, index: int, driver: str, body: Body | None = None) -> dict[str, Any]:
        body = body or self.body(index)
        return {**self.identity(index, driver, body), "body": body_fields(body), "source": body.source()}

    def to_record(self, o: Outcome) -> dict[str, Any]:
        rec = self._with_body(o.index, o.driver, o.body)
        rec.update(
            status=str(o.status), hvp_status=None if o.hvp_status is None else str(o.hvp_status), report=o.report
        )
        if o.oracle_kind:
            rec["oracle_kind"] = o.oracle_kind
        if o.hvp_status is not None:  # what `rnnbench table` shows in its H v column
            rec["hvp"] = {"status": str(o.hvp_status)}
        if o.minimal is not None:
            rec["minimal"] = body_fields(o.minimal)
            rec["minimal_source"] = o.minimal.source()
        if o.localization:
            rec["localization_report"] = o.localization
        if o.repro:
            rec["repro"] = o.repro
        return rec

    def ill_record(self, index: int, reason: str) -> dict[str, Any]:
        rec = self._with_body(index, ILL_DRIVER)
        rec.update(
            status=str(Status.ILL_CONDITIONED),
            hvp_status=None,
            reason=reason,
            report=f"case {index} skipped as ill-conditioned: {reason}",
        )
        return rec

    def wanted(self) -> list[tuple[tuple, str, dict[str, Any], str]]:
        """Every record this campaign writes, as rnnbench.record.resume_plan takes them: per case,
        its ill-conditioned record (written only if it is), then one per driver."""
        out = []
        for index in range(self.judged):
            base = self.identity(index, ILL_DRIVER)
            for driver in (ILL_DRIVER, *self.drivers):  # the key and fingerprint do not read the driver's framework
                rec = {**base, "driver": driver}
                out.append(
                    (
                        record.row_key(rec),
                        record.fingerprint(rec),
                        self.settings,
                        f"{rec['model']}/{driver}/{self.dtype}/{rec['loss_form']}",
                    )
                )
        return out

    def summary(self, records: Iterable[dict[str, Any]]) -> FuzzSummary:
        """The summary of this campaign's records (from a file, a run, or both): the same as the
        run that wrote them printed, however often it was interrupted and resumed."""
        from rnnbench.fuzz.summary import FuzzSummary  # it reads Outcome from here

        out = FuzzSummary(list(self.drivers), self.cases, self.seed, self.dtype, self.device, self.losses)
        ill: dict[int, str] = {}
        for rec in records:
            if is_ill(rec):
                ill[rec["case"]] = rec.get("reason") or ""
            else:
                out.outcomes.append(outcome_from_record(rec))
        order = {d: i for i, d in enumerate(self.drivers)}
        out.outcomes.sort(key=lambda o: (order.get(o.driver, len(order)), o.index))
        out.ill_conditioned = Counter(reason.split(" for ")[0] for reason in ill.values())
        return out


def resume(
    path: Path, existing: list[dict[str, Any]], campaigns: Sequence[Campaign]
) -> dict[str, list[dict[str, Any]]]:
    """The records of `existing` (a results file given to --resume) that these campaigns need not
    run again, per dtype. Refuses (InputError, naming the difference) a file of another schema or
    rnnbench version, with records of these rows under other settings, or with records of rows
    these campaigns do not have (another --seed, --losses, --drivers, fewer --cases)."""
    wanted = [w for c in campaigns for w in c.wanted()]
    todo = set(record.resume_plan(path, existing, wanted))
    record.refuse_other_rows(path, existing, wanted, campaigns[0].settings if campaigns else {})
    done = {(key, fp) for i, (key, fp, _, _) in enumerate(wanted) if i not in todo}
    kept = record.latest_per_row([rec for rec in existing if (record.row_key(rec), rec.get("fingerprint")) in done])
    return {c.dtype: [rec for rec in kept if rec["dtype"] == c.dtype] for c in campaigns}
