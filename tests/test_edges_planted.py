"""Planted wrong derivatives beside every edge of tests/test_edges.py, through the public API: one
framework's step adds k (c - stop_gradient(c)) at the edge (its value unchanged, torch's derivative
off by k dc) or k (c - stop_gradient(c))^2 (value and gradient unchanged, H v off by 2k dc (dc . v)).
Each must be flagged on torch, and the untouched framework keep the edge's own verdict. The cases
are generated from the edge table: a new edge is planted with no edit here."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import rnnbench
from test_edges import EDGES, Edge, check

K = 0.5
WRONG = {"grad_mismatch", "missing_grad"}


def torch_only(plant):
    """plant(ops, c) on torch; c itself on every other framework (and on the numpy oracle)."""

    def hook(ops, c):
        return plant(ops, c) if ops.name == "torch" else c

    return hook


def first_order(ops, c):
    return c + K * (c - ops.stop_gradient(c))


def second_order(ops, c):
    return c + K * (c - ops.stop_gradient(c)) ** 2


def rows(report, driver: str) -> list:
    return [r for r in report.results if r.driver == driver]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("edge", EDGES, ids=lambda e: e.name)
def test_a_planted_gradient_is_flagged(edge: Edge, dtype: str) -> None:
    report = check(edge, dtype, functools.partial(edge.step, plant=torch_only(first_order)))
    assert all(r.status in WRONG for r in rows(report, "torch_loop")), str(report)
    assert all(r.status in edge.expected[dtype] for r in rows(report, "jax_loop")), str(report)


@pytest.mark.parametrize(
    "edge",
    [
        pytest.param(e, marks=pytest.mark.xfail(strict=True, reason=e.hvp_false_alarm)) if e.hvp_false_alarm else e
        for e in EDGES
    ],
    ids=lambda e: e.name,
)
def test_a_planted_hvp_is_flagged(edge: Edge) -> None:
    """Where H v is judged (the gradients agree, or differ only at kinks within what their one-sided
    derivatives allow: H v is then judged on the entries whose H v does not depend on a kink, by
    nested dual numbers, check/oracles/kink_range.py, or by differences that agree between step sizes), the
    plant is hvp_mismatch. Where it is not (a NaN entry or a pole: first order cannot_decide), the
    row is flagged by its first-order verdict. Never ok."""
    report = check(edge, "float64", functools.partial(edge.step, plant=torch_only(second_order)), order=2)
    torch_rows, jax_rows = rows(report, "torch_loop"), rows(report, "jax_loop")
    # a split tie's H v (Edge.hvp_split) is wrong: then it decides the row
    assert all(r.status in edge.expected["float64"] or edge.hvp_split for r in jax_rows), str(report)
    if edge.hvp_judged:
        assert all(r.status == r.hvp_status == "hvp_mismatch" for r in torch_rows), str(report)
        wanted = ("hvp_mismatch",) if edge.hvp_split else ("ok", "ill_conditioned")
        assert all(r.hvp_status in wanted for r in jax_rows), str(report)
    else:
        assert all(r.status in edge.expected["float64"] and r.hvp_status != "ok" for r in torch_rows), str(report)
    if edge.expected["float64"] == {"ok"}:
        allowed = ("hvp_mismatch",) if edge.hvp_split else ("ok", "ill_conditioned") if edge.hvp_convention else ("ok",)
        assert all(r.hvp_status in allowed for r in jax_rows), str(report)


# ---- a planted wrong derivative AT the kink: outside every value its one-sided derivatives allow ----
AT = 3.0  # torch's derivative at the kink off by 3 per unit of z: beyond every kink's slopes here
KINKS = {
    # name: (the kinked expression of z, the range of its local derivative at z == 0)
    "relu_pair": lambda ops, z: ops.where(z > 0, z, 0.0) - ops.where(-z > 0, -z, 0.0),  # [0, 2]
    "abs": lambda ops, z: ops.abs(z),  # [-1, 1]
    "maximum_tie": lambda ops, z: ops.maximum(z, 0.0),  # [0, 1]
    "identity_gate": lambda ops, z: ops.where(z * z > 0, z, 0.5 * z),  # [0.5, 1]
}


def at_kink(kink, planted: bool):
    """h' = 0.5 h + kink(w x), with torch's derivative planted wrong on w[0] only (z[0] = 0 sits on
    the kink; w[1] is off it and stays unplanted)."""

    def step(ops, params, carry, x):
        (h,) = carry
        z = params["w"] * x
        d = z - ops.stop_gradient(z)
        plant = AT * ops.concat([d[:1], 0.0 * d[1:]]) if planted and ops.name == "torch" else 0.0
        h = 0.5 * h + kink(ops, z) + plant
        return (h,), h

    return step


def _at_kink_report(name: str, dtype: str, planted: bool):
    edge = Edge(name, at_kink(KINKS[name], planted), {"w": np.array([0.0, 0.5])}, {}, xs=np.ones((1, 2)))
    return check(edge, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(KINKS))
def test_a_planted_gradient_at_the_kink_is_a_mismatch(name: str, dtype: str) -> None:
    """Torch's derivative is planted wrong exactly on the kinked entry; no subgradient convention
    gives its value, so it is grad_mismatch (it was subgradient_differs or cannot_decide: issue 37);
    jax, unplanted, keeps the verdict a correct framework gets there."""
    report = _at_kink_report(name, dtype, planted=True)
    assert [r.status for r in rows(report, "torch_loop")] == ["grad_mismatch"], str(report)
    assert "outside every value the kinks' one-sided derivatives allow" in str(report), str(report)
    # the input's own line says so too (it said cannot_decide under a grad_mismatch row)
    [w] = [e for e in rows(report, "torch_loop")[0].grad_errors if e.name == "w"]
    lo, hi = w.want - w.oracle_error * w.scale, w.want + w.oracle_error * w.scale
    assert (w.status, w.index) == ("mismatch", (0,)) and not lo <= w.got <= hi, w
    assert all(r.status in {"ok", "cannot_decide", "subgradient_differs"} for r in rows(report, "jax_loop"))


# ---- issue 49: a planted NaN derivative, finite value, where the exact derivative is finite ----
def nan_derivative(ops, c):
    """c, with a NaN derivative: sqrt at 0 in a where's unselected branch (0 * inf in the backward)."""
    d = c - ops.stop_gradient(c)
    return c + ops.where(d > 1.0, ops.sqrt(d), 0.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("edge", EDGES, ids=lambda e: e.name)
def test_a_planted_nan_gradient_is_a_mismatch(edge: Edge, dtype: str) -> None:
    """Beside every edge (a float32 loss overflow included: the planted entries do not overflow), torch's
    NaN is grad_mismatch at both dtypes with a line naming a non-finite entry; jax keeps the edge's verdict."""
    report = check(edge, dtype, functools.partial(edge.step, plant=torch_only(nan_derivative)))
    for r in rows(report, "torch_loop"):
        assert r.status == "grad_mismatch", str(report)
        assert any(e.status == "mismatch" and not np.isfinite(e.got) for e in r.grad_errors), r.report
    assert all(r.status in edge.expected[dtype] for r in rows(report, "jax_loop")), str(report)


# ---- many dead units: a planted wrong derivative through 16 ties (beyond the 8 corners enumerated) ----
DEAD_UNITS = 16
DEAD = {
    # name: a relu as users write it, at a unit whose pre-activation is exactly 0
    "relu_where": lambda ops, z: ops.where(z > 0, z, 0.0),
    "relu_maximum": lambda ops, z: ops.maximum(z, 0.0),
    "relu_minimum": lambda ops, z: -ops.minimum(-z, 0.0),
    "abs": lambda ops, z: ops.abs(z),
    "clip": lambda ops, z: ops.minimum(ops.maximum(z, -0.5), 0.5),
}


def _dead_units_report(name: str, dtype: str, *, planted: bool, loss: str = "weighted"):
    """h' = 0.5 h + kink(w x) over DEAD_UNITS units at w == 0 (a tie each; clip's bounds at w x == 0.5)
    and one live unit; torch's derivative planted wrong (AT per unit of z) on unit 0 alone."""
    w = np.zeros(DEAD_UNITS + 1)
    w[-1] = 0.25
    if name == "clip":
        w[:DEAD_UNITS] = 0.5  # on clip's upper bound
    return rnnbench.check_recurrence(
        at_kink(DEAD[name], planted),
        params={"w": w},
        carry0=(np.zeros(DEAD_UNITS + 1),),
        xs=np.ones((1, DEAD_UNITS + 1)),
        drivers=["torch_loop", "jax_loop"],
        losses=[loss],
        dtype=dtype,
        order=1,
    )


@pytest.mark.parametrize("loss", ["weighted", "sum_carry"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(DEAD))
def test_a_planted_gradient_through_many_dead_units_is_a_mismatch(name: str, dtype: str, loss: str) -> None:
    """16 ties are beyond the corners' reach (8); interval tangents bound every convention's value in
    one pass (check/differentiation/dual_interval.py), so the plant is grad_mismatch (it was cannot_decide: '16 tied
    entries ... more than the 8 enumerated'), and a correct framework stays within the range."""
    planted = _dead_units_report(name, dtype, planted=True, loss=loss)
    assert [r.status for r in rows(planted, "torch_loop")] == ["grad_mismatch"], str(planted)
    assert "outside every value the kinks' one-sided derivatives allow" in str(planted), str(planted)
    for report in (planted, _dead_units_report(name, dtype, planted=False, loss=loss)):
        correct = rows(report, "jax_loop") + ([] if report is planted else rows(report, "torch_loop"))
        assert all(r.status in {"ok", "cannot_decide", "subgradient_differs"} for r in correct), str(report)
        assert "more than the 8 enumerated" not in str(report), str(report)
