"""Verdicts at the edges of ordinary steps (issue 37's classes 1-10), each through the
public API (`rnnbench.check_recurrence`) at float64 and float32 on tiny sizes: the sigmoid tails, a
compiler more accurate than the numpy reference, float32 forwards no float32 computation can give,
smooth composites of kinked ops at the kink, NaN oracle entries, and known-issue attribution.
Each case is a row of EDGES; tests/test_edges_planted.py plants a wrong derivative beside each."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

import rnnbench
from rnnbench import ops as ops_module

DRIVERS = ["torch_loop", "jax_loop"]
OK = {"float64": {"ok"}, "float32": {"ok"}}


@dataclass(frozen=True)
class Edge:
    """One step at an edge: its inputs, and the row statuses every driver must get per dtype."""

    name: str
    step: Callable
    params: dict
    expected: dict  # dtype -> the set of allowed statuses (every driver, every row)
    xs: np.ndarray = field(default_factory=lambda: np.ones((2, 2)))
    carry0: tuple = field(default_factory=lambda: (np.zeros(2),))
    # H v is judged on some entry a plant reaches (False: the first order leaves it unchecked: a NaN or
    # a pole it cannot decide)
    hvp_judged: bool = True
    # a correct framework's H v the suite still calls hvp_mismatch here (why): a strict xfail until judged right
    hvp_false_alarm: str = ""
    # a correct framework's H v may be a tie's convention here, within the corners' H v: ill_conditioned
    hvp_convention: bool = False
    # the frameworks split a tie's cotangent where the exact H v exists (v decides the tie: its sides
    # agree along v to first order and differ at second), half a side's curvature: why their H v is wrong
    hvp_split: str = ""
    carry0_requires_grad: bool = False


def no_plant(ops, c):
    """The hook where tests/test_edges_planted.py plants a wrong derivative beside the edge."""
    return c


def log_sigmoid_tail(ops, params, carry, x, plant=no_plant):
    """log(sigmoid(x)) in the left tail, where 0.5 (1 + tanh(x / 2)) has no digit left."""
    (h,) = carry
    h = plant(ops, ops.log(ops.sigmoid(params["w"] * x - 40.0))) * 0.01 + 0.5 * h
    return (h,), h


def sigmoid_left_tail(ops, params, carry, x, plant=no_plant):
    """sigmoid near -33: the tanh form is 8.7e-4 off there, every driver was forward_mismatch."""
    (h,) = carry
    h = plant(ops, ops.log(ops.sigmoid(params["w"] * x - 33.0))) * 0.01 + 0.5 * h
    return (h,), h


def sqrt_at_domain_boundary(ops, params, carry, x, plant=no_plant):
    """sqrt(w x) with w[0] = 0: the finite differences of that entry evaluate sqrt of a negative
    number (NaN), the other entries have a derivative."""
    (h,) = carry
    h = plant(ops, ops.tanh(params["v"] * x + h)) + ops.sqrt(params["w"] * x)
    return (h,), h


def sqrt_pole_beside_smooth(ops, params, carry, x, plant=no_plant):
    """sqrt(w x) with w[0] = 0 (a pole) beside a smooth term in v that its cotangent does not reach
    (the carry is linear): the H v oracle holds v at 0 on w[0], the frameworks' H v is NaN only
    there, and v's and w[1]'s H v are judged."""
    (h,) = carry
    h = 0.5 * h + ops.sqrt(params["w"] * x) + plant(ops, ops.tanh(params["v"] * x))
    return (h,), h


def sqrt_abs_pole(ops, params, carry, x, plant=no_plant):
    """sqrt(|w x|) with w[0] = 0: a pole defined on both sides, with no derivative (infinite either way).
    The frameworks' inf / NaN there is no finite answer's opposite: undecided, never grad_mismatch."""
    (h,) = carry
    h = ops.sqrt(ops.abs(params["w"] * x)) + 0.5 * h + plant(ops, ops.tanh(params["v"] * x))
    return (h,), h


def sqrt_max_pole(ops, params, carry, x, plant=no_plant):
    """sqrt(maximum(w x, 0)) with w[0] = 0: the same pole, one side clipped."""
    (h,) = carry
    h = ops.sqrt(ops.maximum(params["w"] * x, 0.0)) + 0.5 * h + plant(ops, ops.tanh(params["v"] * x))
    return (h,), h


def sqrt_pole_upstream(ops, params, carry, x, plant=no_plant):
    """sqrt(w x) with w[0] = 0 (a pole) whose cotangent depends on v: the frameworks' H v is NaN on
    the entries upstream of it (their infinite gradient times v = 0), undecided, never a mismatch;
    their finite entries are judged."""
    (h,) = carry
    h = ops.tanh(params["v"] * x + h) + ops.sqrt(params["w"] * x) + plant(ops, ops.tanh(params["v"] * x))
    return (h,), h


def folded_cancellation(ops, params, carry, x, plant=no_plant):
    """(1 + u) - 1 with u ~ 1e-9: the numpy reference rounds there, XLA under jit folds it into u
    and lands closer to the exact value."""
    (h,) = carry
    u = params["w"] * x * 1e-9 + 0.1 * h
    h = plant(ops, (1.0 + u) - 1.0) * 1e6
    return (h,), h


def float32_overflow(ops, params, carry, x, plant=no_plant):
    """exp(100) inside the recurrence: float32 cannot hold the forward, nor the gradient of w[0]."""
    (h,) = carry
    h = ops.exp(params["w"] * x * 100.0) * 1e-40 + plant(ops, ops.tanh(params["v"] * x)) + 0.5 * h
    return (h,), h


def float32_cancellation(ops, params, carry, x, plant=no_plant):
    """(1e5 + tanh(.)) - 1e5: float32 keeps about 3 digits of the tanh."""
    (h,) = carry
    h = (1e5 + plant(ops, ops.tanh(params["w"] * x + h))) - 1e5
    return (h,), h


def relu_pair_at_kink(ops, params, carry, x, plant=no_plant):
    """relu(z) - relu(-z) is z: differentiable at z = 0, where each relu is not (w[0] = 0)."""
    (h,) = carry
    z = params["w"] * x
    h = 0.5 * h + plant(ops, ops.where(z > 0, z, 0.0) - ops.where(-z > 0, -z, 0.0))
    return (h,), h


def abs_at_kink(ops, params, carry, x, plant=no_plant):
    """|z| at z = 0 (w[0] = 0): no derivative, every one-sided value is defensible."""
    (h,) = carry
    h = 0.5 * h + plant(ops, ops.abs(params["w"] * x))
    return (h,), h


def learned_power(ops, params, carry, x, plant=no_plant):
    """x ** a with a differentiated exponent (class 2: the dual numbers raised TypeError)."""
    (h,) = carry
    h = plant(ops, (ops.abs(x) + 1.0 + 0.1 * h * h) ** params["a"]) * 0.1 + 0.5 * h
    return (h,), h


def equality_gate(ops, params, carry, x, plant=no_plant):
    """== on a differentiated value (class 3: the oracle compared identities, every driver was wrong)."""
    (h,) = carry
    z = params["w"] * x
    h = ops.where(z == 0.5, 0.0, plant(ops, ops.tanh(z + h)))
    return (h,), h


def safe_sqrt_at_zero(ops, params, carry, x, plant=no_plant):
    """The safe-sqrt idiom where(u > 0, sqrt(where(u > 0, u, 1)), 0) at u == 0 (class 1: the 50-digit
    rung raised ZeroDivisionError): sqrt has no derivative there, the frameworks' finite 0 is one answer."""
    (h,) = carry
    u = params["w"] * x
    h = plant(ops, ops.tanh(params["v"] * x + h)) + ops.where(u > 0, ops.sqrt(ops.where(u > 0, u, 1.0)), 0.0)
    return (h,), h


def identity_gate_at_tie(ops, params, carry, x, plant=no_plant):
    """Class 7: where(z * z > 0, z, z / 2) is z everywhere; at z == 0 (w[0] = 0) both sides of the
    comparison are stationary and every framework takes the z / 2 branch: half the derivative."""
    (h,) = carry
    z = params["w"] * x
    h = 0.5 * h + plant(ops, ops.where(z * z > 0, z, 0.5 * z))
    return (h,), h


def saturated_at_stationary_tie(ops, params, carry, x, plant=no_plant):
    """min(h + w^2, 0.5) with h on the bound and w[0] = 0: a tie whose sides depend on w but do not
    move (a tie of stationary values); v's derivative never flows through it."""
    (h,) = carry
    s = ops.minimum(h + params["w"] * params["w"], 0.5)
    return (s,), plant(ops, params["v"] * x) + s


# Issue 49: where(c, f(u), g(u)) with f NaN or inf at the point (u = w x, w[0] on the trap, strictly
# inside the unselected region: no tie). Every framework's backward gives the unselected branch a zero
# cotangent times f's derivative there: 0 * inf or 0 * NaN, a NaN gradient where the exact one (g's) is
# finite. Wrong at every dtype. TRAPS: name -> (the branch, where it is selected, w[0], dtypes it traps at).
ABOVE_HALF, BELOW_50, BOTH = (lambda u: u > 0.5), (lambda u: u < 50.0), ("float64", "float32")
TRAPS = {
    "log_at_zero": (lambda ops, u: ops.log(u), ABOVE_HALF, 0.0, BOTH),
    "division_by_zero": (lambda ops, u: 1.0 / u, ABOVE_HALF, 0.0, BOTH),
    "fractional_power_at_zero": (lambda ops, u: u**0.5, ABOVE_HALF, 0.0, BOTH),
    "sqrt_of_negative": (lambda ops, u: ops.sqrt(u), ABOVE_HALF, -1.0, BOTH),
    "exp_overflow_float32": (lambda ops, u: ops.exp(u), BELOW_50, 100.0, ("float32",)),  # float64 holds exp(100)
    "exp_overflow": (lambda ops, u: ops.exp(u), BELOW_50, 800.0, BOTH),
}


def where_trap(branch, selected, *, safe: bool):
    """h' = 0.5 h + tanh(v x) + where(selected(u), branch(u), u) with u = w x. safe: the double where
    that feeds the branch a harmless value where it is not selected (the idiom docs/api.md teaches):
    the same loss, finite derivatives."""

    def step(ops, params, carry, x, plant=no_plant):
        (h,) = carry
        u = params["w"] * x
        chosen = selected(u)
        inner = ops.where(chosen, u, 1.0) if safe else u
        h = 0.5 * h + plant(ops, ops.tanh(params["v"] * x)) + ops.where(chosen, branch(ops, inner), u)
        return (h,), h

    return step


def lru_decay_one(ops, params, carry, x, plant=no_plant):
    """An LRU-like linear recurrence h' = a h + gamma(a) x, its input normalization sqrt(1 - a^2) switched
    off where the decay saturates (a >= 0.99); a[0] = 1.0 exactly: sqrt(0) in the unselected branch."""
    (h,) = carry
    a = params["a"]
    gamma = ops.where(a < 0.99, ops.sqrt(1.0 - a * a), 0.0)
    h = a * h + gamma * plant(ops, ops.tanh(params["v"] * x))
    return (h,), h


def lru_decay_one_safe(ops, params, carry, x, plant=no_plant):
    """lru_decay_one with the double where: sqrt never sees 0 where it is not selected."""
    (h,) = carry
    a = params["a"]
    open_ = a < 0.99
    gamma = ops.where(open_, ops.sqrt(1.0 - ops.where(open_, a, 0.0) ** 2), 0.0)
    h = a * h + gamma * plant(ops, ops.tanh(params["v"] * x))
    return (h,), h


def ill_conditioned_forward(ops, params, carry, x, plant=no_plant):
    """(1e5 w + tanh(.)) - 1e5 with w = 1: the loss's condition number is ~1e5, so float32 rounding alone
    moves the loss beyond the tolerance (the forward is undecided) while the gradients stay judged."""
    (h,) = carry
    h = (params["w"] * 1e5 + plant(ops, ops.tanh(params["v"] * x + h))) - 1e5
    return (h,), h


TRAP_V = np.array([0.3, -0.2])

EDGES = [
    Edge("sigmoid_left_tail", sigmoid_left_tail, {"w": np.array([1.0, 0.5])}, {"float64": {"ok"}, "float32": {"ok"}}),
    Edge("log_sigmoid_tail", log_sigmoid_tail, {"w": np.array([1.0, 0.5])}, {"float64": {"ok"}, "float32": {"ok"}}),
    # the classes of check/differentiation/dual.py (1, 2, 3), beside which the planted family goes too
    Edge("learned_power", learned_power, {"a": np.array([0.7, 1.3])}, {"float64": {"ok"}, "float32": {"ok"}}),
    Edge("equality_gate", equality_gate, {"w": np.array([1.0, 0.3])}, {"float64": {"ok"}, "float32": {"ok"}}),
    Edge(
        "safe_sqrt_at_zero",
        safe_sqrt_at_zero,
        {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"cannot_decide"}, "float32": {"cannot_decide"}},
        hvp_judged=False,
    ),
    # class 5: a driver closer to the exact loss than the float64 reference is not wrong
    Edge(
        "folded_cancellation",
        folded_cancellation,
        {"w": np.array([1.0, 0.5])},
        # float32: torch's (1 + u) - 1 is 0, as any float32 computation of it (cannot_decide); XLA folds it (ok)
        {"float64": {"ok"}, "float32": {"ok", "cannot_decide"}},
    ),
    # class 6: a float32 forward no float32 computation can give is cannot_decide, as its gradient is
    Edge(
        "float32_overflow",
        float32_overflow,
        {"w": np.array([1.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"ok"}, "float32": {"cannot_decide"}},
    ),
    Edge(
        "float32_cancellation",
        float32_cancellation,
        {"w": np.array([1.0, 0.5])},
        {"float64": {"ok"}, "float32": {"ok", "cannot_decide"}},
    ),
    # class 8: the frameworks' subgradients (0 at the tie) are not the derivative (1 per unit of z)
    Edge(
        "relu_pair_at_kink",
        relu_pair_at_kink,
        {"w": np.array([0.0, 0.5])},
        {"float64": {"subgradient_differs"}, "float32": {"subgradient_differs"}},
    ),
    # class 7: a comparison at an exact tie is a branch point, with stationary sides too
    Edge(
        "identity_gate_at_tie",
        identity_gate_at_tie,
        {"w": np.array([0.0, 0.5])},
        {"float64": {"subgradient_differs"}, "float32": {"subgradient_differs"}},
    ),
    # ... and a tie of stationary values: every entry's oracle is undecided there, yet v's derivative
    # meets no kink (a planted v is a mismatch, not a subgradient convention)
    Edge(
        "saturated_at_stationary_tie",
        saturated_at_stationary_tie,
        {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"ok"}, "float32": {"ok"}},
        carry0=(np.full(2, 0.5),),
        # min(0.5 + w^2, 0.5) is 0.5 for every w: along v the side 0.5 is taken on both sides of w = 0, so
        # the exact H v in w is 0; jax's minimum splits the tie's cotangent (1/2, 1/2) and gives half the
        # side 0.5 + w^2's curvature (it was ill_conditioned, within the corners' H v)
        hvp_split="jax's minimum splits the tie: half the curvature of the side v never takes",
    ),
    # ... the same tie with h differentiated: along v its sides cross (h moves at first order), the
    # corners' H v really disagree, and a split is one convention among them (ill_conditioned)
    Edge(
        "saturated_at_moving_tie",
        saturated_at_stationary_tie,
        {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"cannot_decide"}, "float32": {"cannot_decide"}},
        carry0=(np.full(2, 0.5),),
        hvp_convention=True,
        carry0_requires_grad=True,
    ),
    # ... and where no derivative exists, a subgradient is no more wrong than another (torch 0, jax 1)
    Edge(
        "abs_at_kink",
        abs_at_kink,
        {"w": np.array([0.0, 0.5])},
        {"float64": {"ok", "cannot_decide"}, "float32": {"ok", "cannot_decide"}},
    ),
    # class 9: the NaN entry cannot be decided; the others agree, so never ok, never a mismatch
    Edge(
        "sqrt_at_domain_boundary",
        sqrt_at_domain_boundary,
        {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"cannot_decide"}, "float32": {"cannot_decide"}},
    ),
    # issue 49: H v beside a pole (v held at 0 there): judged where the frameworks' H v is finite
    Edge(
        "sqrt_pole_beside_smooth",
        sqrt_pole_beside_smooth,
        {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"cannot_decide"}, "float32": {"cannot_decide"}},
    ),
    Edge(
        "sqrt_pole_upstream",
        sqrt_pole_upstream,
        {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
        {"float64": {"cannot_decide"}, "float32": {"cannot_decide"}},
    ),
    # a pole defined on both sides has no derivative: the finite-difference fallback cannot call inf / NaN wrong
    *(
        Edge(
            name,
            step,
            {"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
            {"float64": {"cannot_decide"}, "float32": {"cannot_decide"}},
            hvp_judged=False,
        )
        for name, step in (("sqrt_abs_pole", sqrt_abs_pole), ("sqrt_max_pole", sqrt_max_pole))
    ),
    # issue 49: a NaN gradient where the exact derivative is finite is wrong at every dtype; the safe form is ok
    *(
        Edge(
            f"where_trap_{name}",
            where_trap(branch, selected, safe=False),
            {"w": np.array([w0, 0.7]), "v": TRAP_V},
            {d: {"grad_mismatch"} if d in traps else {"ok"} for d in ("float64", "float32")},
            hvp_judged="float64" not in traps,  # a float64 NaN leaves H v unjudged
        )
        for name, (branch, selected, w0, traps) in TRAPS.items()
    ),
    *(
        Edge(f"safe_where_{name}", where_trap(branch, selected, safe=True), {"w": np.array([w0, 0.7]), "v": TRAP_V}, OK)
        for name, (branch, selected, w0, _) in TRAPS.items()
    ),
    Edge(
        "lru_decay_one",
        lru_decay_one,
        {"a": np.array([1.0, 0.5]), "v": TRAP_V},
        {"float64": {"grad_mismatch"}, "float32": {"grad_mismatch"}},
        carry0=(np.array([0.3, 0.2]),),
        hvp_judged=False,
    ),
    Edge(
        "lru_decay_one_safe",
        lru_decay_one_safe,
        {"a": np.array([1.0, 0.5]), "v": TRAP_V},
        OK,
        carry0=(np.array([0.3, 0.2]),),
    ),
    # ... and a forward rounding leaves undecided at float32 still has its gradients judged, its lines agreeing
    Edge(
        "ill_conditioned_forward",
        ill_conditioned_forward,
        {"w": np.array([1.0, 1.0]), "v": TRAP_V},
        {"float64": {"ok"}, "float32": {"cannot_decide"}},
    ),
]


def check(edge: Edge, dtype: str, step: Callable | None = None, order: int = 1) -> rnnbench.RecurrenceReport:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # sqrt / log at the domain boundary, as numpy says
        return rnnbench.check_recurrence(
            step or edge.step,
            params=edge.params,
            carry0=edge.carry0,
            xs=edge.xs,
            drivers=DRIVERS,
            losses=["weighted"],
            dtype=dtype,
            order=order,
            carry0_requires_grad=edge.carry0_requires_grad,
        )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("edge", EDGES, ids=lambda e: e.name)
def test_edge_verdicts(edge: Edge, dtype: str) -> None:
    report = check(edge, dtype)
    got = {r.status for r in report.results}
    assert got <= edge.expected[dtype] and len(report.results) == len(DRIVERS), str(report)


def test_numpy_sigmoid_is_accurate_in_both_tails() -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    xs = np.array([-745.0, -300.0, -40.0, -33.0, -20.0, -1e-9, 0.0, 1e-9, 5.0, 20.0, 40.0])
    got = ops_module.numpy_ops().sigmoid(xs)
    want = np.array([float(1 / (1 + mpmath.exp(-mpmath.mpf(x)))) for x in xs])
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)
    assert np.all(np.isfinite(np.log(got[1:])))  # log sigmoid(-300) = -300, as the frameworks compute it


@pytest.mark.parametrize(
    ("grads", "attributed"),
    [({"w": np.array([0.4, 0.7])}, True), ({"w": np.array([np.nan, 0.7])}, False), ({"w": None}, True)],
    ids=["finite wrong values", "a NaN in lane 0", "no gradient"],
)
def test_attribution_checks_the_mechanism_predicts_the_values(grads: dict, attributed: bool) -> None:
    """Class 10: the lane-0 expanded-carry entry copies lane 0's finite cotangent to the other lanes,
    so a NaN (one every driver shares: the safe-sqrt idiom at 0 under sum_carry) is not its failure,
    though its conditions hold. Run through check_recurrence on torch_scan_compiled this costs minutes
    of inductor compiles; the registry's own entry is judged here on the two kinds of failure."""
    from types import SimpleNamespace

    from rnnbench.check.bugs.known_issues import classify, registry

    entry = next(i for i in registry() if i.id == "torch-inductor-scan-expanded-carry-cotangent")
    status, note = classify("grad_mismatch", "!! w mismatch", [entry], SimpleNamespace(grads=grads))
    assert (status == f"known_issue:{entry.id}") is attributed, note
    if not attributed:
        assert status == "grad_mismatch" and "does not match" in note


def test_a_nan_oracle_never_passes_a_gradient_or_an_hvp() -> None:
    """Class 9 where the public API cannot reach it cheaply: an all-NaN H v oracle (a difference
    oracle across a domain boundary) leaves every H v undecided (ill_conditioned), whatever the
    driver says; one NaN entry is undecided while a wrong entry beside it is still a mismatch."""
    from rnnbench.check.compare import compare_grads
    from rnnbench.check.tolerance import hvp_tolerance, tolerance
    from rnnbench.check.verdicts.second_order import HvpOracle, _judged

    nan = np.full(3, np.nan)
    oracle = HvpOracle({"w": np.ones(3)}, {"w": nan}, "finite_differences_hvp", None)
    for got in (np.zeros(3), np.array([1e3, -2.0, 7.0]), nan):
        assert _judged({"w": got}, oracle, ["w"], hvp_tolerance("finite_differences_hvp", 1.0)).status == (
            "ill_conditioned"
        )
    want = np.array([np.nan, 1.0, 2.0])
    tol = tolerance("float64", "dual")
    assert [e.status for e in compare_grads({"w": np.array([5.0, 1.0, 2.0])}, {"w": want}, ["w"], tol=tol)] == [
        "cannot_decide"
    ]
    assert [e.status for e in compare_grads({"w": np.array([5.0, 1.5, 2.0])}, {"w": want}, ["w"], tol=tol)] == [
        "mismatch"
    ]


SMOOTH_TIES = {
    # name: (the step's tied expression of p at p = 0, whose sides agree to first order there; whether
    # the frameworks split that tie's cotangent)
    "maximum(p^2, 0)": (lambda ops, p: ops.maximum(p * p, 0.0), True),
    "minimum(-p^2, 0)": (lambda ops, p: ops.minimum(-(p * p), 0.0), True),
    "maximum(p^2 + p, p)": (lambda ops, p: ops.maximum(p * p + p, p), True),
    "where(p^2 > 0, p^2, 0)": (lambda ops, p: ops.where(p * p > 0.0, p * p, 0.0), False),
    "abs(p^2)": (lambda ops, p: ops.abs(p * p), False),
}


@pytest.mark.parametrize("units", [1, 12], ids=["one tie", "24 ties"])
@pytest.mark.parametrize("name", sorted(SMOOTH_TIES))
def test_a_halved_curvature_at_a_smooth_tie_is_an_hvp_mismatch(name: str, units: int) -> None:
    """max(p^2, 0) at p = 0 is p^2 for every p (H v 2 w v): the tie's sides agree to first order and
    differ at second, so along v the side p^2 is taken on both sides of 0 and the exact H v exists.
    Both frameworks split the tie of maximum and minimum (w v, half of it): hvp_mismatch (it was
    ill_conditioned, within the corners' H v). `where` and abs take one side at the tie: the one v
    takes is ok (jax's abs' slope 1), the other (torch's 0) gives that side's curvature, 0 here. With
    12 units over 2 steps (24 ties, beyond the 8 corners enumerated) interval tangents say which
    entries' gradients are the same at every corner, and the pass v decides gives their H v."""
    tied, split = SMOOTH_TIES[name]

    def step(ops, params, carry, x):
        return (tied(ops, params["p"]) + 0.5 * carry[0],), carry[0]

    report = rnnbench.check_recurrence(
        step,
        params={"p": np.zeros(units)},
        carry0=(np.full(units, 0.3),),
        length=1 if units == 1 else 2,
        drivers=DRIVERS,
        losses=["weighted"],
    )
    assert {r.status for r in report.results} <= {"ok", "hvp_mismatch"}, str(report)
    for r in report.results:
        assert r.status == r.hvp_status, str(report)
        if r.hvp_status == "ok":
            assert not split, str(report)
            continue
        # the exact H v is the branch's (2 w v for p^2, bound 0)
        [(got, want)] = re.findall(r"!! p +(?:mismatch|missing) .*got (\S+), want (\S+?)(?:\s|$)", r.report, re.M)
        assert float(want) != 0 and float(got) == (pytest.approx(float(want) / 2, rel=1e-9) if split else 0.0), r.report


# ---- issue 49: non-finite driver gradients, the float32 rows' lines ----
def _nonfinite_lines(result) -> list:
    return [e for e in result.grad_errors if e.status == "mismatch" and not np.isfinite(e.got) and np.isfinite(e.want)]


@pytest.mark.parametrize(
    ("name", "dtype"), [(n, d) for n, (_, _, _, traps) in TRAPS.items() for d in traps], ids="-".join
)
def test_a_where_trap_names_its_nan_entry(name: str, dtype: str) -> None:
    """The row is grad_mismatch at every dtype it traps at, and its w line names the trapped entry: got
    nan, the exact value beside it (the float32 row hid it behind cannot_decide)."""
    [edge] = [e for e in EDGES if e.name == f"where_trap_{name}"]
    for r in check(edge, dtype).results:
        [line] = _nonfinite_lines(r)
        assert (r.status, line.name, line.index) == ("grad_mismatch", "w", (0,)), r.report
        assert "at [0]: got nan, want" in r.report and "wrong at any precision" in r.report, r.report


def test_a_float32_loss_overflow_stays_undecided_with_its_reason() -> None:
    """float32_overflow: the float32 forward itself overflows (exp(100) * 1e-40), so w[0]'s entry has
    no float32 value: cannot_decide, saying why and naming the entry, never a mismatch line."""
    [edge] = [e for e in EDGES if e.name == "float32_overflow"]
    for r in check(edge, "float32").results:
        assert r.status == "cannot_decide", r.report
        assert "float32 cannot hold it" in r.report and "cannot decide them at [0] (got " in r.report, r.report
        assert not [e for e in r.grad_errors if e.status in ("mismatch", "missing")], r.report


def test_lines_under_an_undecided_forward_agree_with_the_row() -> None:
    """ill_conditioned_forward at float32: the forward is undecided (condition ~1e5), the w line was
    'mismatch' against the float64 bound under a cannot_decide row; now undecided against what float32
    rounding alone does."""
    [edge] = [e for e in EDGES if e.name == "ill_conditioned_forward"]
    for r in check(edge, "float32").results:
        assert r.status == "cannot_decide", r.report
        statuses = {e.name: e.status for e in r.grad_errors}
        assert "mismatch" not in statuses.values() and statuses["w"] == "cannot_decide", r.report
        assert "within what float32 rounding alone does" in r.report, r.report


@pytest.mark.parametrize(
    "edge",
    [
        e
        for e in EDGES
        if ("sqrt" in e.name and "pole" in e.name and e.hvp_judged) or e.name == "sqrt_at_domain_boundary"
    ],
    ids=lambda e: e.name,
)
def test_hvp_beside_a_pole_is_not_called_wrong(edge: Edge) -> None:
    """Unplanted, H v beside a pole (v held at 0 there): the frameworks' NaN entries (their infinite
    gradient at the pole times v = 0) are undecided, named, and no row is hvp_mismatch."""
    report = check(edge, "float64", order=2)
    assert all(r.hvp_status in ("ok", "ill_conditioned") for r in report.results), str(report)
    assert all(r.status in edge.expected["float64"] for r in report.results), str(report)
