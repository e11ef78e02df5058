"""Public API: check a recurrence you wrote, on every available driver, against finite differences.

    import numpy as np
    import rnnbench

    def step(ops, params, carry, x):          # written once; ops is numpy, torch or jax
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))
    print(report)            # one row per (driver, loss form): status, max relative error, the
    assert report.ok         # oracle's own error bound, and the Hessian-vector product's verdict
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from rnnbench.model import Case, Model
from rnnbench.status import OracleKind, Status, is_known


@dataclass(frozen=True)
class DriverResult:
    """One driver under one loss form. status: the row's verdict (rnnbench.status: ok, grad_mismatch,
    hvp_mismatch, ..., known_issue:<id>), first order, then second order where first order agrees;
    hvp_status: the H v check's own status ("-" where not asked for or not judged)."""

    driver: str
    status: str
    max_rel_error: Optional[float]
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
        lines = [f"{'driver':<{w}} {'loss':<{lw}} {'status':<{sw}} max rel err  oracle error  H v  "
                 f"({self.dtype}, oracle: {self.oracle_kind})"]
        for r in self.results:
            err = "-" if r.max_rel_error is None else f"{r.max_rel_error:.2e}"
            bound = max((e.oracle_error for e in r.grad_errors), default=None)
            lines.append(f"{r.driver:<{w}} {r.loss:<{lw}} {r.status:<{sw}} {err:<12} "
                         f"{'-' if bound is None else f'{bound:.1e}':<13} {r.hvp_status}".rstrip())
        for r in self.results:
            if r.status not in (Status.OK, Status.UNAVAILABLE):
                lines.append(f"\n== {r.driver} under loss {r.loss}: {r.status}\n{r.report}")
        return "\n".join(lines)


def check_recurrence(
    step: Callable,
    params: Mapping[str, np.ndarray],
    carry0: Sequence[np.ndarray],
    xs: Optional[np.ndarray] = None,
    length: Optional[int] = None,
    loss: Optional[Callable] = None,
    consts: Optional[Mapping[str, np.ndarray]] = None,
    carry0_requires_grad: bool | Sequence[bool] = False,
    xs_requires_grad: bool = False,
    dtype: str = "float64",
    drivers: Optional[Sequence[str]] = None,
    device: str = "cpu",
    seed: int = 0,
    losses: Optional[Sequence[str]] = None,
    order: int = 2,
) -> RecurrenceReport:
    """Run `step(ops, params, carry, x_t) -> (carry, y_t)` on every available driver and compare
    its gradients (and Hessian-vector products) with float64 finite differences of the numpy forward.

    params: name -> array. carry0: tuple of arrays (a pytree of 1..n leaves). xs: (T, ...) per-step
    inputs, or None with `length` = T. loss(ops, consts, ys, carry_T) -> scalar, where ys is
    (T, ...). Without `loss`, every driver is judged under each loss form of `losses` (names from
    rnnbench.losses; default rnnbench.losses.CHECKED: random weights, an unweighted sum of the final
    carry, the mean of the outputs, the last output only): a driver bug can hide behind one
    cotangent pattern. dtype: "float64" or "float32" (inputs are rounded to it; the oracle uses the
    rounded values). order: 2 also checks H v along a seeded direction where the driver has a
    second-order path (float64 only; rnnbench.check.second_order); 1 skips it.
    """
    from rnnbench import losses as loss_forms
    from rnnbench import registry
    from rnnbench.run.row import Job, check_gradients, localization, second_order_record, unavailable_reason

    carry0 = tuple(np.asarray(c, dtype=np.float64) for c in carry0)
    if xs is None and not length:
        raise ValueError("give xs (T, ...) or a trip count `length`")
    T = len(xs) if xs is not None else int(length)
    carry_names = tuple(f"c{i}" for i in range(len(carry0)))
    if isinstance(carry0_requires_grad, bool):
        carry0_requires_grad = (carry0_requires_grad,) * len(carry0)
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    if loss is not None and losses:
        raise ValueError("give either a loss function or loss forms (`losses`), not both")
    forms = [loss_forms.MODEL_LOSS] if loss is not None else loss_forms.parse(",".join(losses or ()), loss_forms.CHECKED)
    if loss is None and loss_forms.MODEL_LOSS in forms:
        raise ValueError("loss form 'model' needs a loss function (`loss`)")
    case = Case(
        model="user",
        sizes={"T": T},
        seed=seed,
        params={k: np.asarray(v, dtype=np.float64) for k, v in params.items()},
        carry0=carry0,
        xs=None if xs is None else np.asarray(xs, dtype=np.float64),
        length=T,
        consts=dict(consts or {}),
        carry0_requires_grad=tuple(carry0_requires_grad),
        xs_requires_grad=xs_requires_grad,
    ).rounded_to(dtype)
    base = Model(name="user", summary="user-defined recurrence", carry_names=carry_names, default_sizes={"T": T},
                  make_case=lambda s, seed: case, step=step, loss=loss or loss_forms.weighted)
    from rnnbench.check.finite_diff import oracle_grads
    from rnnbench.run.environments import current

    # The loss form's weights come from the float64 forward; a float32 check rounds them too.
    judged = {form: loss_forms.with_loss(base, case, form) for form in forms}
    judged = {form: (model, form_case.rounded_to(dtype)) for form, (model, form_case) in judged.items()}
    oracles = {}  # per form, computed once for all drivers
    results = []
    oracle_kind = OracleKind.FINITE_DIFFERENCES
    for name in drivers or list(registry.drivers()):
        driver = registry.get_driver(name)
        reason = unavailable_reason(base, driver, Job("user", name, dtype, device, environment=current()))
        if reason is not None:
            results.append(DriverResult(name, Status.UNAVAILABLE, None, reason, loss="-"))
            continue
        for form, (model, form_case) in judged.items():
            oracle = oracles.setdefault(form, oracle_grads(model, form_case))
            chk, prepared = check_gradients(model, driver, form_case, dtype, device, oracle=oracle)
            oracle_kind = chk.oracle_kind
            localization(chk, model, driver, form_case, dtype, device)
            status, report, hvp_status = chk.status, chk.report, "-"
            if order == 2:
                job = Job("user", name, dtype, device, seed=seed, environment=current(), loss_form=form, order=2)
                hvp = second_order_record(model, driver, form_case, job, prepared if chk.status == Status.OK else None)
                hvp_status = str(hvp["status"])
                if chk.status == Status.OK and hvp["status"] not in (Status.OK, Status.UNSUPPORTED, Status.SKIPPED):
                    status, report = hvp["status"], hvp["report"]
            results.append(DriverResult(name, status, chk.max_rel_error if chk.errors else None, report, chk.errors,
                                        form, hvp_status))
    return RecurrenceReport(dtype, oracle_kind, results)
