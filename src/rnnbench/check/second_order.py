"""The second-order check: a driver's Hessian-vector product (Prepared.hvp) against a float64
oracle (check/hvp.py) along a seeded random direction, with the known-issues registry applied.

Statuses: "ok"; "hvp_mismatch" (some (H v)[input] is off, including identically zero where the
oracle is not); "hvp_error" (the framework raised); "ill_conditioned" (the oracle disagrees with
itself between step sizes, so nothing is compared); "unsupported" (the driver has no second-order
path); and, through the registry, known_issue:<id> / known_issue_fixed:<id>.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Mapping, Optional

import numpy as np

from rnnbench.check.compare import InputError, compare_grads, describe
from rnnbench.check.finite_diff import input_value
from rnnbench.check.hvp import GRADIENT_STEP, LOSS_STEP, finite_difference_hvp, gradient_difference_hvp
from rnnbench.check.judge import registered
from rnnbench.check.tolerance import hvp_tolerance
from rnnbench.drivers.base import Prepared
from rnnbench.model import Case, Model, reference_loss
from rnnbench.status import InputStatus, OracleKind, Status

COARSE = 2.0  # the self-consistency step is this many times the oracle's step


@dataclass
class HvpOracle:
    """direction v and want = H v, keyed like the gradients; kind names the tolerance; reason is
    None or why this draw is ill-conditioned."""

    v: dict[str, np.ndarray]
    want: dict[str, np.ndarray]
    kind: str
    reason: Optional[str]


@dataclass
class SecondOrder:
    status: str
    report: str = ""
    raw_status: str = ""
    errors: list[InputError] = field(default_factory=list)


def direction(model: Model, case: Case, seed: int) -> dict[str, np.ndarray]:
    """A seeded direction with entries uniform in [-1, 1], one array per compared input."""
    rng = np.random.default_rng([seed, 0x4856])
    return {n: rng.uniform(-1.0, 1.0, np.shape(input_value(model, case, n))) for n in case.wrt_names(model.carry_names)}


def hvp_oracle(model: Model, case: Case, seed: int = 0) -> HvpOracle:
    """Gradient differences of the analytic oracle where the model has one, else loss differences."""
    v = direction(model, case, seed)
    if model.oracle is not None and model.oracle_kind != OracleKind.FINITE_DIFFERENCES:
        kind, fine = OracleKind.GRADIENT_DIFFERENCES_HVP, gradient_difference_hvp(model, case, v)
        coarse = gradient_difference_hvp(model, case, v, step=COARSE * GRADIENT_STEP)
    else:
        kind, fine = OracleKind.FINITE_DIFFERENCES_HVP, finite_difference_hvp(model, case, v)
        coarse = finite_difference_hvp(model, case, v, step=COARSE * LOSS_STEP)
    names = case.wrt_names(model.carry_names)
    tol = hvp_tolerance(kind, reference_loss(model, case))
    bad = [e.name for e in compare_grads(coarse, fine, names, tol) if e.status != InputStatus.OK]
    reason = f"the {kind} oracle disagrees with itself between step sizes for {bad}" if bad else None
    return HvpOracle(v, fine, kind, reason)


def check_second_order(model: Model, driver_name: str, case: Case, prepared: Prepared,
                       oracle: Optional[HvpOracle] = None, seed: int = 0) -> SecondOrder:
    """Compare prepared.hvp(v) with the oracle's H v at float64 (second order is checked at float64
    only: the oracle's own error, ~1e-10, would otherwise be invisible under float32 roundoff)."""
    if prepared.hvp is None:
        return SecondOrder(Status.UNSUPPORTED, f"{driver_name} has no second-order path")
    oracle = oracle or hvp_oracle(model, case, seed)
    if oracle.reason is not None:
        return SecondOrder(Status.ILL_CONDITIONED, oracle.reason)
    tol = hvp_tolerance(oracle.kind, reference_loss(model, case))
    names = case.wrt_names(model.carry_names)
    try:
        got: Mapping = prepared.hvp(oracle.v)
    except Exception as exc:  # a framework that refuses double backward: a result, not a crash
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        result = SecondOrder(Status.HVP_ERROR, f"{type(exc).__name__}: {str(exc).strip()[:300]}\n{tb}")
    else:
        errors = compare_grads(got, oracle.want, names, tol)
        status = Status.OK if all(e.status == InputStatus.OK for e in errors) else Status.HVP_MISMATCH
        result = SecondOrder(status, "Hessian-vector product:\n" + describe(errors, 0.0, tol), errors=errors)
    return registered(result, driver_name, model, case, "float64", order=2)
