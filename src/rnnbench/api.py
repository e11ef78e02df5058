"""Public API: check a recurrence you wrote, on every available driver, against finite differences.

    import numpy as np
    import rnnbench

    def step(ops, params, carry, x):          # written once; ops is numpy, torch or jax
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))
    print(report)            # one row per driver: status, max relative error, the oracle's own error bound
    assert report.ok
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from rnnbench.model import Case, Model
from rnnbench.status import OracleKind, Status


@dataclass(frozen=True)
class DriverResult:
    driver: str
    status: str  # a row status (rnnbench.status): ok, grad_mismatch, ..., known_issue:<id>
    max_rel_error: Optional[float]
    report: str
    grad_errors: list = field(default_factory=list)


@dataclass(frozen=True)
class RecurrenceReport:
    dtype: str
    oracle_kind: str
    results: list[DriverResult]

    @property
    def ok(self) -> bool:
        """True when every driver that could run agrees with the oracle (and at least one ran)."""
        ran = [r for r in self.results if r.status != Status.UNAVAILABLE]
        return bool(ran) and all(r.status == Status.OK for r in ran)

    def __str__(self) -> str:
        w = max([len("driver")] + [len(r.driver) for r in self.results])
        lines = [f"{'driver':<{w}} {'status':<16} max rel err  oracle error  ({self.dtype}, oracle: {self.oracle_kind})"]
        for r in self.results:
            err = "-" if r.max_rel_error is None else f"{r.max_rel_error:.2e}"
            bound = max((e.oracle_error for e in r.grad_errors), default=None)
            lines.append(f"{r.driver:<{w}} {r.status:<16} {err:<12} {'-' if bound is None else f'{bound:.1e}'}".rstrip())
        for r in self.results:
            if r.status not in (Status.OK, Status.UNAVAILABLE):
                lines.append(f"\n== {r.driver}: {r.status}\n{r.report}")
        return "\n".join(lines)


def _default_loss(ops, consts, ys, carry):
    """sum(ys * wy) + sum_i sum(carry_i * wc_i) with fixed random weights: every output and every
    final carry leaf reaches the loss, and random signs avoid symmetric cancellation."""
    total = ops.sum(ys * consts["wy"])
    for i, leaf in enumerate(carry):
        total = total + ops.sum(leaf * consts[f"wc{i}"])
    return total


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
) -> RecurrenceReport:
    """Run `step(ops, params, carry, x_t) -> (carry, y_t)` on every available driver and compare
    its gradients with float64 central finite differences of the numpy forward.

    params: name -> array. carry0: tuple of arrays (a pytree of 1..n leaves). xs: (T, ...) per-step
    inputs, or None with `length` = T. loss(ops, consts, ys, carry_T) -> scalar, where ys is
    (T, ...); default: fixed random weighted sum of ys and the final carry. dtype: "float64" or
    "float32" (inputs are rounded to it; the oracle uses the rounded values).
    """
    from rnnbench import registry
    from rnnbench.run.row import Job, check_gradients, localization, unavailable_reason

    carry0 = tuple(np.asarray(c, dtype=np.float64) for c in carry0)
    if xs is None and not length:
        raise ValueError("give xs (T, ...) or a trip count `length`")
    T = len(xs) if xs is not None else int(length)
    carry_names = tuple(f"c{i}" for i in range(len(carry0)))
    if isinstance(carry0_requires_grad, bool):
        carry0_requires_grad = (carry0_requires_grad,) * len(carry0)
    if loss is None:
        from rnnbench.model import rollout
        from rnnbench.ops import numpy_ops

        probe = Model(name="user", summary="", carry_names=carry_names, default_sizes={}, make_case=None,
                      step=step, loss=_default_loss)
        ys, _ = rollout(numpy_ops(), probe, {k: np.asarray(v, np.float64) for k, v in params.items()}, carry0, xs, T)
        rng = np.random.default_rng(seed)
        consts = {"wy": rng.uniform(-1, 1, ys.shape), **{f"wc{i}": rng.uniform(-1, 1, c.shape) for i, c in enumerate(carry0)}}
        loss = _default_loss
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
    model = Model(name="user", summary="user-defined recurrence", carry_names=carry_names, default_sizes={"T": T},
                  make_case=lambda s, seed: case, step=step, loss=loss)
    from rnnbench.run.environments import current

    results = []
    oracle_kind = OracleKind.FINITE_DIFFERENCES
    for name in drivers or list(registry.drivers()):
        driver = registry.get_driver(name)
        reason = unavailable_reason(model, driver, Job("user", name, dtype, device, environment=current()))
        if reason is not None:
            results.append(DriverResult(name, Status.UNAVAILABLE, None, reason))
            continue
        chk, _ = check_gradients(model, driver, case, dtype, device)
        oracle_kind = chk.oracle_kind
        localization(chk, model, driver, case, dtype, device)
        results.append(DriverResult(name, chk.status, chk.max_rel_error if chk.errors else None, chk.report, chk.errors))
    return RecurrenceReport(dtype, oracle_kind, results)
