"""The dual-number oracle (rnnbench.check.differentiation.dual, dual_eval, oracle): every Ops field has a derivative
rule, checked against a closed form at float64 and at 50 digits (the cases are generated from the
Ops dataclass's fields: an op added to Ops without a case here fails); points without a derivative
are reported; the oracle agrees with every hand oracle of the registry, first and second order; the
ladder picks and records its rung."""

from __future__ import annotations

import dataclasses

import mpmath
import numpy as np
import pytest

from _sizes import halved
from rnnbench import registry
from rnnbench.check.compare import compare_grads
from rnnbench.check.differentiation import dual, kink_log
from rnnbench.check.differentiation.dual_eval import evaluate, to_mp
from rnnbench.check.differentiation.hvp import gradient_difference_hvp
from rnnbench.check.oracles.oracle import oracle_grads
from rnnbench.check.tolerance import hvp_tolerance, tolerance
from rnnbench.check.verdicts.second_order import direction, hvp_oracle
from rnnbench.model import reference_loss
from rnnbench.ops import Ops

X = np.array([0.3, -0.7, 1.2])  # away from every kink and pole
Y = np.array([0.5, 0.9, -0.4])
M = np.array([[0.2, -0.5, 0.1], [0.7, 0.3, -0.2]])


def _d(x: np.ndarray) -> dual.Dual:
    """x with one tangent per entry (K = x.size), the identity seed."""
    return dual.Dual(x, np.eye(x.size).reshape((x.size,) + x.shape))


def _jac(out) -> np.ndarray:
    """d out / d input as (K, *out.shape), float64."""
    return np.asarray(dual.primal(out.tangent)).astype(np.float64)


def _elementwise(f, df):
    """An elementwise op: its Jacobian is diag(df(x))."""
    return lambda ops: (_jac(f(ops)(_d(X))), np.diag(df(X)))


UNARY = {
    "tanh": (lambda x: 1 - np.tanh(x) ** 2),
    "sigmoid": (lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2),
    "exp": np.exp,
    "sin": np.cos,
    "cos": (lambda x: -np.sin(x)),
    "tan": (lambda x: 1 / np.cos(x) ** 2),
    "log": (lambda x: 1 / x),
    "sqrt": (lambda x: 0.5 / np.sqrt(x)),
    "abs": np.sign,
}
POSITIVE = {"log", "sqrt"}  # evaluated at |x|


def _unary_case(name: str):
    def check(ops: Ops):
        x = np.abs(X) if name in POSITIVE else X
        return _jac(getattr(ops, name)(_d(x))), np.diag(UNARY[name](x))

    return check


def _matmul(ops: Ops):
    # d (M x) / d x = M^T rows: tangent k is M e_k
    return _jac(ops.matmul(M, _d(X))), M.T


def _linear(ops: Ops):
    w = M  # (O=2, I=3), x (I,) -> x @ w.T + b
    return _jac(ops.linear(_d(X), w, np.array([1.0, 2.0]))), M.T


CASES = {
    **{name: _unary_case(name) for name in UNARY},
    "where": lambda ops: (_jac(ops.where(X > 0, _d(X) * 2.0, 3.0 * _d(X))), np.diag(np.where(X > 0, 2.0, 3.0))),
    "maximum": lambda ops: (_jac(ops.maximum(_d(X), Y)), np.diag((X > Y).astype(float))),
    "minimum": lambda ops: (_jac(ops.minimum(_d(X), Y)), np.diag((X < Y).astype(float))),
    "stop_gradient": lambda ops: (_jac(_d(X) + ops.stop_gradient(_d(X) * 5.0)), np.eye(3)),
    "matmul": _matmul,
    "linear": _linear,
    "split": lambda ops: (_jac(ops.split(_d(np.arange(6.0) / 7), 3)[1]), np.eye(6)[:, 2:4]),
    "stack": lambda ops: (_jac(ops.stack([_d(X), 2.0 * _d(X)])), np.stack([np.eye(3), 2 * np.eye(3)], axis=1)),
    "unstack": lambda ops: (_jac(ops.unstack(ops.reshape(_d(X), (3, 1)))[2]), np.eye(3)[:, 2:3]),
    "concat": lambda ops: (_jac(ops.concat([_d(X), Y], axis=0)), np.concatenate([np.eye(3), np.zeros((3, 3))], 1)),
    "sum": lambda ops: (_jac(ops.sum(_d(X) * Y)), Y),
    "mean": lambda ops: (_jac(ops.mean(_d(X))), np.full((3, 1), 1 / 3)),
    "reshape": lambda ops: (_jac(ops.reshape(_d(X), (3, 1))), np.eye(3).reshape(3, 3, 1)),
    "flip": lambda ops: (_jac(ops.flip(_d(X))), np.eye(3)[:, ::-1]),
    "zeros": lambda ops: (np.shape(ops.zeros((2, 3), _d(X))), (2, 3)),  # constants: no tangent
    "zeros_like": lambda ops: (ops.zeros_like(_d(X)), np.zeros(3)),
    "ones_like": lambda ops: (ops.ones_like(_d(X)), np.ones(3)),
    "eye": lambda ops: (ops.eye(3, _d(X)), np.eye(3)),
    "transpose": lambda ops: (_jac(ops.transpose(ops.reshape(_d(X), (3, 1)))), np.eye(3).reshape(3, 1, 3)),
    "cast_like": lambda ops: (_jac(ops.cast_like(_d(X), Y)), np.eye(3)),
    "fp32_island": lambda ops: (_jac(_fp32(ops)), np.diag(1 - np.tanh(X) ** 2)),
}


def _fp32(ops: Ops):
    with ops.fp32_island():
        return ops.tanh(_d(X))


OP_FIELDS = [f.name for f in dataclasses.fields(Ops) if f.name != "name"]


@pytest.mark.parametrize("op", OP_FIELDS)
def test_every_op_has_a_rule_matching_its_closed_form(op: str) -> None:
    assert op in CASES, f"Ops.{op} has no closed-form case here: give the dual backend a rule and a case"
    got, want = CASES[op](dual.dual_ops())
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_elementwise_rules_at_fifty_digits(op: str) -> None:
    """The same rules on mpmath numbers: the derivative agrees with mpmath's own to ~50 digits."""
    x = np.abs(X) if op in POSITIVE else X
    with mpmath.workdps(50):
        out = getattr(dual.dual_ops(), op)(dual.Dual(to_mp(x), np.eye(3)))
        f = {"abs": abs, "sigmoid": lambda v: 1 / (1 + mpmath.exp(-v))}.get(op) or getattr(mpmath, op)
        for i, xi in enumerate(x):
            want = mpmath.diff(f, mpmath.mpf(xi))
            assert abs(out.tangent[i, i] - want) <= mpmath.mpf(10) ** -40 * max(1, abs(want))


@pytest.mark.parametrize(
    ("what", "make"),
    [
        ("abs at 0", lambda ops, x: ops.abs(x)),
        ("a tie in maximum", lambda ops, x: ops.maximum(x, np.array([0.0, 5.0]))),
        ("where on its boundary", lambda ops, x: ops.where(x > 0, x, 0.0 * x)),
        ("sqrt at 0", lambda ops, x: ops.sqrt(x)),  # sqrt(x * x) gives 0 * inf = nan: a non-finite entry
    ],
)
def test_points_without_a_derivative_are_reported(what: str, make) -> None:
    x = dual.Dual(np.array([0.0, 1.0]), np.eye(2))
    with kink_log.kinks() as found:
        make(dual.dual_ops(), x)
    assert found, f"{what}: not reported"
    assert list(found[0][1]) == [True, False], found  # only the entry at the kink
    with kink_log.kinks() as found:
        make(dual.dual_ops(), dual.Dual(np.array([0.5, 1.0]), np.eye(2)))
    assert not found, f"{what} away from the kink reported {found}"


EXACT = [n for n, m in registry.models().items() if m.oracle is not None and m.oracle_kind != "finite_differences"]


@pytest.mark.parametrize("name", EXACT)
def test_dual_oracle_matches_the_hand_oracle(name: str) -> None:
    """One more independent check of every hand oracle (and of the dual backend on every model)."""
    model = registry.get_model(name)
    case = model.make_case(halved(model), seed=1)
    want = model.oracle(case)
    names = [n for n in case.wrt_names(model.carry_names) if n in want]
    got = evaluate(model, case, names)
    assert not got.kinks, got.kinks
    errors = compare_grads(got.grads, want, names, tol=tolerance("float64", "dual"))
    assert all(e.status == "ok" for e in errors), errors


@pytest.mark.parametrize("name", [n for n in EXACT if registry.get_model(n).suite == "core"])
def test_nested_dual_hvp_matches_gradient_differences(name: str) -> None:
    model = registry.get_model(name)
    case = model.make_case(halved(model), seed=1)
    v = direction(model, case, seed=1)
    oracle = hvp_oracle(model, case, seed=1)
    assert oracle.kind in ("dual_hvp", "dual_mp_hvp") and oracle.reason is None
    by_gradient = gradient_difference_hvp(model, case, v)
    names = case.wrt_names(model.carry_names)
    errors = compare_grads(
        by_gradient, oracle.want, names, tol=hvp_tolerance("gradient_differences_hvp", reference_loss(model, case))
    )
    assert all(e.status == "ok" for e in errors), errors


def test_the_ladder_records_its_rung() -> None:
    rnn = registry.get_model("rnn")
    case = rnn.make_case(halved(rnn), seed=0)
    assert oracle_grads(rnn, case).kind == "hand_bptt"
    assert oracle_grads(rnn, case, "dual").kind == "dual"
    assert oracle_grads(rnn, case, "finite_differences").kind == "finite_differences"
    forced = oracle_grads(
        registry.get_model("decay"), registry.get_model("decay").make_case({"T": 4, "n": 2}, 0), "dual_mp"
    )
    assert forced.kind == "dual_mp" and forced.reason.startswith("50 digits")
    with pytest.raises(ValueError, match="unknown oracle"):
        oracle_grads(rnn, case, "nope")


def test_a_kink_falls_back_to_finite_differences_for_its_entries_only() -> None:
    from rnnbench.losses import weighted
    from rnnbench.model import Case, Model

    def step(ops, params, carry, x):
        (h,) = carry
        return (ops.tanh(h * params["a"]) + ops.abs(params["b"]),), h

    case = Case(
        "kink",
        {"T": 3},
        0,
        {"a": np.array([0.5, -0.3]), "b": np.array([0.0, 0.7])},
        (np.array([0.1, 0.2]),),
        None,
        3,
        {"wy": np.ones((3, 2)), "wc0": np.ones(2)},
    )
    model = Model(
        name="kink",
        summary="",
        carry_names=("h",),
        default_sizes={"T": 3},
        make_case=lambda s, seed: case,
        step=step,
        loss=weighted,
    )
    oracle = oracle_grads(model, case)
    assert oracle.kind == "finite_differences" and "abs at 0" in oracle.reason
    assert np.all(oracle.error_of("a") == 0)  # dual values where the derivative exists
    assert oracle.error_of("b")[0] == np.inf and oracle.error_of("b")[1] == 0  # no derivative: never a mismatch


def test_the_chaotic_body_of_seed_7_is_no_false_alarm() -> None:
    """The false alarm that motivated the dual oracle: `rnnbench fuzz --seed 7` body 52 (c0 grows
    like (1.5 - p1)^12 and feeds a cosine) was a grad_mismatch on every driver: finite differences
    were off by up to 2e5 relative. The gradient is ~1e13 and float64 cannot resolve it: the float64
    dual oracle, torch and jax differ from the 50-digit value, and from each other, by a few %. The
    ladder takes the 50-digit rung with float64 rounding as the bound: ok or cannot_decide with
    that reason on every driver, never a mismatch."""
    from rnnbench import losses
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import judged_body
    from rnnbench.rows.pair import check_gradients

    for form in ("sum_carry", "last_y"):
        fc = build(judged_body(7, 52 * len(losses.CHECKED) + losses.CHECKED.index(form), losses.CHECKED))
        assert "(c0 * 1.5) - (p1 * c0)" in fc.body.source() and fc.ill_conditioned is None
        assert fc.oracle.kind == "dual_mp" and "condition number" in fc.oracle.reason
        for driver in ("torch_loop", "jax_lax_scan", "torch_scan"):
            chk, _ = check_gradients(
                fc.model, registry.get_driver(driver), fc.case, dtype="float64", device="cpu", oracle=fc.oracle
            )
            assert chk.raw_status in ("ok", "cannot_decide"), f"{form} {driver}: {chk.report}"
            if chk.raw_status == "cannot_decide":
                assert "float64 rounding alone" in chk.report, chk.report


def test_check_recurrence_takes_an_oracle() -> None:
    import rnnbench
    from rnnbench.errors import InputError

    def step(ops, params, carry, x):
        (h,) = carry
        return (ops.tanh(params["w"] * h + x),), h

    args = dict(
        params={"w": np.array([0.5, -0.3])},
        carry0=(np.zeros(2),),
        xs=np.ones((4, 2)),
        drivers=["torch_loop"],
        order=1,
        losses=["weighted"],
    )
    assert rnnbench.check_recurrence(step, **args).oracle_kind == "dual"
    forced = rnnbench.check_recurrence(step, oracle="finite_differences", **args)
    assert forced.as_registered and forced.oracle_kind == "finite_differences", str(forced)
    with pytest.raises(InputError, match="oracle must be one of"):
        rnnbench.check_recurrence(step, oracle="exact please", **args)


@pytest.mark.parametrize(
    ("name", "args"),
    [("sqrt", (-1.0,)), ("log", (-1.0,)), ("log", (0.0,)), ("divide", (1.0, 0.0)), ("divide", (0.0, 0.0))]
    + [("divide", (-1.0, 0.0)), ("power", (0.0, -1.0)), ("power", (-2.0, 0.5)), ("power", (0.0, 0.5))],
)
def test_fifty_digit_base_arithmetic_meets_domain_edges_as_numpy(name: str, args: tuple) -> None:
    """mpmath raises on 1 / 0 and 0 ** -1 and turns complex on sqrt(-1): the 50-digit rung gives
    numpy's inf / nan there instead, as the float64 rungs do (no ZeroDivisionError, no complex)."""
    from rnnbench.check.differentiation.dual_base import base_functions

    f = base_functions()[name]
    with np.errstate(all="ignore"), mpmath.workdps(50):
        want = f(*(np.float64(a) for a in args))
        got = f(*(to_mp(a) for a in args))
    assert np.asarray(got).dtype == object
    np.testing.assert_equal(float(np.asarray(got).item()), float(want))


def test_sqrt_of_an_exact_zero_with_no_tangent_at_fifty_digits() -> None:
    """where(x != 0, sqrt(w x^2), 0) at x == 0: 0.5 / sqrt(0) in the unselected branch is inf (a NaN
    tangent there, dropped by where); mpmath raised ZeroDivisionError on it. Both precisions agree."""
    x = np.array([0.0, 2.0])
    for extended in (False, True):
        conv = to_mp if extended else np.asarray
        with mpmath.workdps(50), np.errstate(all="ignore"):
            w = dual.Dual(conv(np.array([0.5, 0.3])), np.eye(2))
            out = dual.total(dual.where(x != 0, dual.sqrt(w * (x * x)), 0.0))
        np.testing.assert_allclose(np.asarray(dual.primal(out.tangent), dtype=np.float64), [0.0, 1 / np.sqrt(0.3)])


def test_equality_compares_values_and_duals_are_unhashable() -> None:
    a = _d(X)
    np.testing.assert_array_equal(a == X, [True, True, True])
    np.testing.assert_array_equal(a != np.array([0.3, 0.0, 1.2]), [False, True, False])
    np.testing.assert_array_equal(0.3 == a, [True, False, False])  # reflected
    with pytest.raises(TypeError):
        hash(a)
    with kink_log.kinks() as found:
        _ = a == np.array([0.3, 0.0, 0.0])  # a tie at entry 0, moving along column 0 only
    assert [(what, list(cols)) for what, cols in found] == [("a comparison at equality", [True, False, False])]
