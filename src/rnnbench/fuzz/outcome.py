"""One (body, driver) result of a fuzz campaign and how it is classed: the running
(rnnbench.fuzz.runner), the records (rnnbench.fuzz.campaign) and the summary read it."""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.fuzz.grammar import Body
from rnnbench.status import DRIVER_ERRORS, WRONG_GRADIENT, Status, is_fixed, is_known

FIRST_ORDER_FAILURES = WRONG_GRADIENT
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
        return first_order_ok(self.status)

    @property
    def kind(self) -> str:
        """What shrinking preserves: the first-order status, else the second-order one."""
        return kind_of(self.status, self.hvp_status)


def first_order_ok(status: str) -> bool:
    """Right at first order (a body a registry entry covers but that came out right included)."""
    return status == Status.OK or is_fixed(status)


def kind_of(status: str, hvp_status: str | None) -> str:
    return str(hvp_status) if first_order_ok(status) else status
