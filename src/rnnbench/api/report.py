"""check_recurrence's report: one DriverResult per (driver, loss form), and RecurrenceReport, their
table and the full report of every row that is not ok.

Three answers, each to one question (docs/api.md#what-the-report-answers):
- ok: may I trust every driver it reports? True only when every driver that ran agrees with the
  oracle on every row; a registered upstream bug on any driver makes it False.
- trusted_drivers: which drivers may I use for this step? Those whose every row is ok.
- known_wrong: which drivers compute a wrong result here under a registered upstream bug, and which.
as_registered keeps the test-suite question (nothing failed that the registry does not expect)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rnnbench import registry
from rnnbench.check.bugs import known_issues
from rnnbench.model import promotion_note
from rnnbench.status import KNOWN_PREFIX, WRONG_GRADIENT, Status, is_known

# A registered issue with one of these symptoms returns numbers, wrong ones, rather than raising.
WRONG_RESULT = frozenset(str(s) for s in (*WRONG_GRADIENT, Status.HVP_MISMATCH))


@dataclass(frozen=True)
class DriverResult:
    """One driver under one loss form. status: the row's verdict (rnnbench.status: ok, grad_mismatch,
    hvp_mismatch, ..., known_issue:<id>), first order, then second order where first order agrees;
    hvp_status: the H v check's own status ("-" where not asked for or not judged); computed_dtype:
    the wider dtype the driver computed in where the step promotes the asked one (rnnbench.model.promoted),
    "" where it computed at the asked dtype; mode: the differentiation mode (rnnbench.modes)."""

    driver: str
    status: str
    max_rel_error: float | None
    report: str
    grad_errors: list = field(default_factory=list)
    loss: str = "model"
    hvp_status: str = "-"
    computed_dtype: str = ""
    mode: str = "vjp"  # the differentiation mode its gradients came by (rnnbench.modes)
    oracle_kind: str = ""  # the oracle it was judged against ("" where it did not run)


@dataclass(frozen=True)
class RecurrenceReport:
    dtype: str
    oracle_kind: str
    results: list[DriverResult]
    left_out: tuple[str, ...] = ()  # drivers the default selection did not run (api.validate.runs_by_default)
    integer: tuple[str, ...] = ()  # integer leaves of carry0 and xs (indices): kept integer, no gradient

    @property
    def ok(self) -> bool:
        """True when at least one driver ran and every driver that ran agrees with the oracle on
        every row (every loss form; H v where judged): what `assert report.ok` should mean before a
        user picks any of them. A registered upstream bug (known_issue:<id>) makes it False like any
        other failure: the driver still computes what the bug says. Which drivers are safe anyway:
        trusted_drivers; which compute wrong numbers under a registered bug: known_wrong."""
        ran = [r for r in self.results if r.status != Status.UNAVAILABLE]
        return bool(ran) and all(r.status == Status.OK for r in ran)

    @property
    def as_registered(self) -> bool:
        """True when at least one driver ran and every row that ran is ok or fails exactly as a
        registered upstream issue says (known_issue:<id>): nothing unexpected. The question a test
        suite of these drivers asks; not a user's question (ok is)."""
        ran = [r for r in self.results if r.status != Status.UNAVAILABLE]
        return bool(ran) and all(r.status == Status.OK or is_known(r.status) for r in ran)

    @property
    def trusted_drivers(self) -> tuple[str, ...]:
        """The drivers this step can be trusted with: each ran and every one of its rows that ran is ok
        (a differentiation mode it cannot run is no row of it)."""
        rows: dict[str, list[str]] = {}
        for r in self.results:
            rows.setdefault(r.driver, [])
            if r.status != Status.UNAVAILABLE:
                rows[r.driver].append(r.status)
        return tuple(d for d, statuses in rows.items() if statuses and all(s == Status.OK for s in statuses))

    @property
    def known_wrong(self) -> dict[str, tuple[str, ...]]:
        """{driver: ids of the registered issues under which it computes a wrong result here}: rows
        known_issue:<id> where the issue's registered symptom is a wrong gradient or H v (grad_mismatch,
        missing_grad, forward_mismatch, hvp_mismatch) rather than an error."""
        wrong = {i.id for i in known_issues.registry() if WRONG_RESULT & set(i.statuses)}
        out: dict[str, tuple[str, ...]] = {}
        for r in self.results:
            issue = r.status.removeprefix(KNOWN_PREFIX) if is_known(r.status) else None
            if issue in wrong and issue not in out.get(r.driver, ()):
                out[r.driver] = (*out.get(r.driver, ()), issue)
        return out

    def __str__(self) -> str:
        w = max([len("driver")] + [len(r.driver) for r in self.results])
        lw = max([len("loss")] + [len(r.loss) for r in self.results])
        sw = max([len("status")] + [len(r.status) for r in self.results])
        with_mode = any(r.mode != "vjp" for r in self.results)  # the column as before modes where all are vjp
        mw = max([len("mode")] + [len(r.mode) for r in self.results])
        mode = lambda text: f"{text:<{mw}} " if with_mode else ""
        lines = [
            f"{'driver':<{w}} {'loss':<{lw}} {mode('mode')}{'status':<{sw}} max rel err  oracle error  H v  "
            f"({self.dtype}, oracle: {self.oracle_kind})"
        ]
        for r in self.results:
            err = "-" if r.max_rel_error is None else f"{r.max_rel_error:.2e}"
            bound = max((e.oracle_error for e in r.grad_errors), default=None)
            wider = f"  computed in {r.computed_dtype}" if r.computed_dtype else ""
            lines.append(
                f"{r.driver:<{w}} {r.loss:<{lw}} {mode(r.mode)}{r.status:<{sw}} {err:<12} "
                f"{'-' if bound is None else f'{bound:.1e}':<13} {r.hvp_status}{wider}".rstrip()
            )
        lines.append(self.verdict())
        for r in self.results:
            if r.computed_dtype:  # said for ok rows too: their reports are not shown below
                lines.append(f"{r.driver} under loss {r.loss}: {promotion_note(self.dtype, r.computed_dtype)}")
        for r in self.results:  # a mode a driver cannot run: why, in one line
            if with_mode and r.status == Status.UNAVAILABLE and r.mode != "vjp":
                lines.append(f"{r.driver} {r.mode} unavailable: {r.report.splitlines()[0] if r.report else ''}")
        for r in self.results:
            if r.status not in (Status.OK, Status.UNAVAILABLE):
                how = f", {r.mode}" if with_mode else ""
                lines.append(f"\n== {r.driver} under loss {r.loss}{how}: {r.status}\n{r.report}")
        return "\n".join(lines)

    def _left_out_by_reason(self) -> str:
        """The drivers the default left out, grouped by why: inductor's C++ compiles, or a bug-class configuration."""
        every = registry.drivers()
        slow = [n for n in self.left_out if n not in every or every[n].slow_to_compile]
        bugs = [n for n in self.left_out if n not in slow]
        groups = [("slow to compile", slow), ("bug-class configurations (--suite bugs)", bugs)]
        return "; ".join(f"{why}: {', '.join(names)}" for why, names in groups if names)

    def verdict(self) -> str:
        """The three answers in words, under the table: ok, the trusted drivers, the known wrong ones."""
        wrong = "; ".join(f"{d} ({', '.join(ids)})" for d, ids in self.known_wrong.items())
        not_run = (
            f"\nnot run by default (drivers='all' runs them): {self._left_out_by_reason()}" if self.left_out else ""
        )
        integer = (
            f"\ninteger leaves (indices; kept integer, no gradient by definition): {', '.join(self.integer)}"
            if self.integer
            else ""
        )
        return (
            f"\nok: {self.ok}\ntrusted drivers: {', '.join(self.trusted_drivers) or 'none'}"
            f"\nknown wrong (registered upstream bugs): {wrong or 'none'}{not_run}{integer}"
        )
