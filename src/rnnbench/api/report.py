"""check_recurrence's report: one DriverResult per (driver, loss form), and RecurrenceReport, their
table and the full report of every row that is not ok."""

from __future__ import annotations

from dataclasses import dataclass, field

from rnnbench.status import Status, is_known


@dataclass(frozen=True)
class DriverResult:
    """One driver under one loss form. status: the row's verdict (rnnbench.status: ok, grad_mismatch,
    hvp_mismatch, ..., known_issue:<id>), first order, then second order where first order agrees;
    hvp_status: the H v check's own status ("-" where not asked for or not judged)."""

    driver: str
    status: str
    max_rel_error: float | None
    report: str
    grad_errors: list = field(default_factory=list)
    loss: str = "model"
    hvp_status: str = "-"


@dataclass(frozen=True)
class RecurrenceReport:
    dtype: str
    oracle_kind: str
    results: list[DriverResult]

    @property
    def ok(self) -> bool:
        """True when every driver that could run agrees with the oracle under every loss form, or
        fails only as a registered upstream issue says it does (and at least one ran)."""
        ran = [r for r in self.results if r.status != Status.UNAVAILABLE]
        return bool(ran) and all(r.status == Status.OK or is_known(r.status) for r in ran)

    def __str__(self) -> str:
        w = max([len("driver")] + [len(r.driver) for r in self.results])
        lw = max([len("loss")] + [len(r.loss) for r in self.results])
        sw = max([len("status")] + [len(r.status) for r in self.results])
        lines = [
            f"{'driver':<{w}} {'loss':<{lw}} {'status':<{sw}} max rel err  oracle error  H v  "
            f"({self.dtype}, oracle: {self.oracle_kind})"
        ]
        for r in self.results:
            err = "-" if r.max_rel_error is None else f"{r.max_rel_error:.2e}"
            bound = max((e.oracle_error for e in r.grad_errors), default=None)
            lines.append(
                f"{r.driver:<{w}} {r.loss:<{lw}} {r.status:<{sw}} {err:<12} "
                f"{'-' if bound is None else f'{bound:.1e}':<13} {r.hvp_status}".rstrip()
            )
        for r in self.results:
            if r.status not in (Status.OK, Status.UNAVAILABLE):
                lines.append(f"\n== {r.driver} under loss {r.loss}: {r.status}\n{r.report}")
        return "\n".join(lines)
