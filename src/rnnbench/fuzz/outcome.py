"""One (body, driver) result of a fuzz campaign and how it is classed: the running
(rnnbench.fuzz.runner), the records (rnnbench.fuzz.campaign) and the summary read it."""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.fuzz.grammar import Body
from rnnbench.rows.pair import first_order_ok, pair_status
from rnnbench.status import DRIVER_ERRORS, WRONG_GRADIENT, Status, is_known

FIRST_ORDER_FAILURES = WRONG_GRADIENT
FAILURES = WRONG_GRADIENT | {Status.HVP_MISMATCH}  # pair verdicts the oracle contradicts
ERRORS = DRIVER_ERRORS  # crash, timeout: the worker's isolation


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
    def verdict(self) -> str:
        """The status a run row of this pair gets (rnnbench.rows.pair.pair_status: first order unless
        H v decides), which every class below reads."""
        return pair_status(self.status, self.hvp_status)

    @property
    def failed(self) -> bool:
        """A gradient (or H v) the oracle contradicts and no registry entry explains."""
        return self.verdict in FAILURES

    @property
    def known(self) -> bool:
        return is_known(self.verdict)

    @property
    def errored(self) -> bool:
        return self.verdict in ERRORS

    @property
    def first_order_ok(self) -> bool:
        """First order lets H v decide (rnnbench.rows.pair.first_order_ok): a failure is H v's."""
        return first_order_ok(self.status, self.hvp_status)

    @property
    def kind(self) -> str:
        """What shrinking preserves: the pair's verdict."""
        return kind_of(self.status, self.hvp_status)


def kind_of(status: str, hvp_status: str | None) -> str:
    """The class of a (first-order, H v) status pair, as a run row has it (a record's two statuses give it)."""
    return pair_status(status, hvp_status)
