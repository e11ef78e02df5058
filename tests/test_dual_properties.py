"""Property tests of the dual numbers (check/differentiation/dual.py) with Hypothesis: every op and every Python
operator a step may use (docs/api.md, "The ops a step may use") has its first and second derivative
checked against mpmath at 50 digits, at random points that include the edges (0, -0, ties,
subnormals, large magnitudes, poles and domain boundaries).

- Scalar rules (elementwise ops, arithmetic operators, powers, comparisons through where,
  maximum, minimum): gradient and Hessian-vector product of the nested dual against closed forms
  evaluated by mpmath. Where the real function has no derivative there (abs at 0, a tie, sqrt or a
  power at 0, a negative base), the dual must say so: a recorded kink or a non-finite value, never
  a finite number passed off as the derivative.
- Structural ops (matmul, linear, indexing, reshape, ...): polynomials of degree <= 2 in their
  inputs, so central differences of step 1 evaluated on mpmath numbers are their exact derivatives.
- An operation the dual numbers do not define is refused with an InputError naming the step's line.

Derandomized with few examples, so CI is reproducible and the file runs in seconds.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rnnbench.check.differentiation import dual, kink_log
from rnnbench.check.differentiation.dual_eval import to_mp
from rnnbench.ops import Ops

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
OPS = dual.dual_ops()
EDGES = [0.0, -0.0, 5e-324, -5e-324, 2.2e-308, 1e-300, 1e-8, 1.0, -1.0, 0.5, 2.0, 3.0, 20.0, -20.0, -40.0, 700.0]
EDGES += [-745.0, 1e10, -1e10, 1e150, -1e150, 1e300, math.pi / 2, -math.pi / 2]
POINT = st.one_of(st.sampled_from(EDGES), st.floats(-50.0, 50.0), st.floats(allow_nan=False, allow_infinity=False))
PAIR = st.one_of(st.tuples(POINT, POINT), POINT.map(lambda x: (x, x)))  # ties drawn often
DIRECTION = (0.75, -1.25)  # the H v direction (for one input, its first entry)
BIG = 1e300  # a reference beyond this may overflow float64 on the way: inf is then a right answer


def _nested(z: tuple[float, ...]) -> list[dual.Dual]:
    """Each input as a second-order dual: inner level along DIRECTION, outer level one column each."""
    k = len(z)
    return [dual.Dual(dual.Dual(np.float64(x), np.array([DIRECTION[i]]), 1), np.eye(k)[i], 2) for i, x in enumerate(z)]


def _evaluate(f: Callable, z: tuple[float, ...]) -> tuple[float, np.ndarray, np.ndarray, list]:
    """(f, gradient (k,), H v (k,), kinks) of f at z by the nested dual numbers."""
    with kink_log.kinks() as found, np.errstate(all="ignore"):
        out = f(*_nested(z))
    value = float(dual.primal(out))
    if dual.level(out) < 2:  # f does not depend on the inputs there (a constant branch)
        return value, np.zeros(len(z)), np.zeros(len(z)), found
    grad = np.asarray(dual.primal(out.tangent), dtype=np.float64).reshape(len(z))
    inner = out.tangent.tangent if isinstance(out.tangent, dual.Dual) else np.zeros((1, len(z)))
    return value, grad, np.asarray(dual.primal(inner), dtype=np.float64).reshape(len(z)), found


def _close(got: float, want, scale: float, extreme: bool) -> bool:
    """got (float64) against want (mpmath): to rounding relative to want, plus rounding of the
    op's own value (tanh'(20) = 1 - tanh(20)^2 is 0 in float64, 1.7e-17 exactly). Where want
    overflows float64, an infinite got of its sign is right too; at extreme points (magnitudes
    beyond 1e150 or below 1e-150) an intermediate of the rule may overflow where the result would
    not: a non-finite got is then allowed (the oracle ladder takes a non-finite tangent to finite
    differences), a finite one must still be right."""
    want = float(want) if abs(want) < mpmath.mpf(BIG) else math.copysign(math.inf, want)
    if math.isinf(want):  # inf, or a nan from inf * 0 on the way: the ladder's fallback takes it
        return not math.isfinite(got) or abs(got) > BIG / 1e8 and math.copysign(1, got) == math.copysign(1, want)
    if extreme and not math.isfinite(got):
        return True
    return abs(got - want) <= 1e-12 * abs(want) + 1e-14 * scale + 1e-300


def _extreme(*values: float) -> bool:
    return any(abs(v) > 1e150 or 0 < abs(v) < 1e-150 for v in values)


@dataclasses.dataclass(frozen=True)
class Rule:
    """f on duals; derivatives: z (mpf) -> (value, gradient list, Hessian rows) by mpmath;
    smooth: z (floats) -> whether the real function has first and second derivatives there."""

    f: Callable
    derivatives: Callable
    smooth: Callable


def _unary(f: Callable, d1: Callable, d2: Callable, smooth: Callable = lambda x: True) -> Rule:
    return Rule(f, lambda x: (None, [d1(x)], [[d2(x)]]), smooth)


_sig = lambda x: 1 / (1 + mpmath.exp(-x))  # noqa: E731
_sign = lambda x: mpmath.sign(x)  # noqa: E731
UNARY = {
    "tanh": _unary(OPS.tanh, lambda x: 1 - mpmath.tanh(x) ** 2, lambda x: -2 * mpmath.tanh(x) * mpmath.sech(x) ** 2),
    "sigmoid": _unary(
        OPS.sigmoid, lambda x: _sig(x) * (1 - _sig(x)), lambda x: _sig(x) * (1 - _sig(x)) * (1 - 2 * _sig(x))
    ),
    "exp": _unary(OPS.exp, mpmath.exp, mpmath.exp),
    "sin": _unary(OPS.sin, mpmath.cos, lambda x: -mpmath.sin(x)),
    "cos": _unary(OPS.cos, lambda x: -mpmath.sin(x), lambda x: -mpmath.cos(x)),
    "tan": _unary(OPS.tan, lambda x: mpmath.sec(x) ** 2, lambda x: 2 * mpmath.tan(x) * mpmath.sec(x) ** 2),
    "log": _unary(OPS.log, lambda x: 1 / x, lambda x: -1 / x**2, lambda x: x > 0),
    "sqrt": _unary(OPS.sqrt, lambda x: 1 / (2 * mpmath.sqrt(x)), lambda x: -1 / (4 * x**1.5), lambda x: x > 0),
    "abs": _unary(OPS.abs, _sign, lambda x: 0, lambda x: x != 0),
    "abs()": _unary(abs, _sign, lambda x: 0, lambda x: x != 0),
    "-x": _unary(operator.neg, lambda x: -1, lambda x: 0),
    "+x": _unary(operator.pos, lambda x: 1, lambda x: 0),
    "x ** 2": _unary(lambda x: x**2, lambda x: 2 * x, lambda x: 2),
    "x ** 3.0": _unary(lambda x: x**3.0, lambda x: 3 * x**2, lambda x: 6 * x),
    "x ** 0.5": _unary(lambda x: x**0.5, lambda x: 0.5 / mpmath.sqrt(x), lambda x: -0.25 * x**-1.5, lambda x: x > 0),
    "x ** -1": _unary(lambda x: x**-1, lambda x: -1 / x**2, lambda x: 2 / x**3, lambda x: x != 0),
    "2.0 ** x": _unary(lambda x: 2.0**x, lambda x: 2**x * mpmath.log(2), lambda x: 2**x * mpmath.log(2) ** 2),
    "stop_gradient": _unary(lambda x: OPS.stop_gradient(x) * x, lambda x: x, lambda x: 0),
}


def _binary(f: Callable, grad: Callable, hess: Callable, smooth: Callable = lambda x, y: True) -> Rule:
    return Rule(f, lambda x, y: (None, grad(x, y), hess(x, y)), smooth)


def _where(compare: Callable) -> Rule:
    """where(x OP y, x * y, sin(x) + y): two smooth branches, a branch point where x == y."""
    return _binary(
        lambda x, y: OPS.where(compare(x, y), x * y, OPS.sin(x) + y),
        lambda x, y: [y, x] if compare(x, y) else [mpmath.cos(x), 1],
        lambda x, y: [[0, 1], [1, 0]] if compare(x, y) else [[-mpmath.sin(x), 0], [0, 0]],
        lambda x, y: x != y,
    )


def _power_smooth(x: float, y: float) -> bool | None:
    """x ** y has first and second partial derivatives at x > 0, and at x == 0 for an integer
    y >= 2 (0 ** y is 0 along x == 0); None: beyond float64's range (not a question of derivatives)."""
    if x > 0:
        return True if abs(y * math.log(x)) < 700 and abs(y) < 1e15 else None
    return x == 0 and y >= 2 and y == int(y) and y < 1e15


def _power_derivatives(x, y) -> tuple[list, list]:
    """Gradient and Hessian of x ** y (y log x read as 0 at x == 0: 0 ** y is flat in y there)."""
    log = mpmath.log(x) if x > 0 else 0
    mixed = x ** (y - 1) * (1 + y * log)
    return [y * x ** (y - 1), x**y * log], [[y * (y - 1) * x ** (y - 2), mixed], [mixed, x**y * log**2]]


BINARY = {
    "+": _binary(operator.add, lambda x, y: [1, 1], lambda x, y: [[0, 0], [0, 0]]),
    "-": _binary(operator.sub, lambda x, y: [1, -1], lambda x, y: [[0, 0], [0, 0]]),
    "*": _binary(operator.mul, lambda x, y: [y, x], lambda x, y: [[0, 1], [1, 0]]),
    "/": _binary(
        operator.truediv,
        lambda x, y: [1 / y, -x / y**2],
        lambda x, y: [[0, -1 / y**2], [-1 / y**2, 2 * x / y**3]],
        lambda x, y: y != 0,
    ),
    "**": Rule(operator.pow, lambda x, y: (None, *_power_derivatives(x, y)), _power_smooth),
    "maximum": _binary(
        OPS.maximum,
        lambda x, y: [1, 0] if x > y else [0, 1],
        lambda x, y: [[0, 0], [0, 0]],
        lambda x, y: x != y,
    ),
    "minimum": _binary(
        OPS.minimum,
        lambda x, y: [1, 0] if x < y else [0, 1],
        lambda x, y: [[0, 0], [0, 0]],
        lambda x, y: x != y,
    ),
    **{
        f"where(x {name} y)": _where(compare)
        for name, compare in {
            ">": operator.gt,
            "<": operator.lt,
            ">=": operator.ge,
            "<=": operator.le,
            "==": operator.eq,
            "!=": operator.ne,
        }.items()
    },
}


def _check_rule(rule: Rule, z: tuple[float, ...]) -> None:
    smooth = rule.smooth(*z)
    if smooth is None:
        return
    value, grad, hv, found = _evaluate(rule.f, z)
    if not smooth:
        # no derivative here: the dual says so (a kink, or a value that is not a number)
        assert found or not np.all(np.isfinite([value, *grad, *hv])), (z, value, grad, hv)
        return
    with mpmath.workdps(50):
        zm = [mpmath.mpf(x) for x in z]
        _, g, h = rule.derivatives(*zm)
        scale = abs(value) if math.isfinite(value) else 0.0
        for i in range(len(z)):
            extreme = _extreme(*z, float(g[i]))
            assert _close(grad[i], mpmath.mpf(g[i]), scale, extreme), ("gradient", z, i, grad[i], g[i])
            want_hv = sum(mpmath.mpf(h[i][j]) * DIRECTION[j] for j in range(len(z)))
            extreme = extreme or _extreme(float(want_hv))
            assert _close(hv[i], want_hv, scale + abs(float(g[i])), extreme), ("H v", z, i, hv[i], want_hv)


@pytest.mark.parametrize("name", sorted(UNARY))
@PROPERTY
@given(x=POINT)
def test_unary_rules_against_mpmath(name: str, x: float) -> None:
    _check_rule(UNARY[name], (x,))


@pytest.mark.parametrize("name", sorted(BINARY))
@PROPERTY
@given(z=PAIR)
@example(z=(2.2e-308, 0.0))  # x ** y at y == 0: its mixed second derivative 1 / x (once lost)
@example(z=(0.0, 2.0))  # x ** y at a zero base, an integer exponent: partials exist
def test_binary_rules_against_mpmath(name: str, z: tuple[float, float]) -> None:
    _check_rule(BINARY[name], z)


# ---- structural ops: exact derivatives of polynomials of degree <= 2 --------------------------------
def _structural(ops: Ops, a, b):
    """Every structural op and operator once, a (2, 3) and b (3,): a scalar of degree 2 in (a, b)."""
    m = ops.matmul(a, b) + a @ b + ops.linear(a, ops.reshape(b, (1, 3)), ops.sum(b))[:, 0]  # (2,)
    parts = ops.split(a, 3)  # three (2, 1) chunks of the last axis
    rows = ops.unstack(a)
    stacked = ops.stack([rows[0], ops.flip(b), rows[1] * 2.0])  # (3, 3)
    joined = ops.concat([stacked, ops.reshape(b, (1, 3))], axis=0)  # (4, 3)
    eye = ops.eye(3, b) + ops.zeros((3, 3), b) + ops.zeros_like(joined)[:3] + ops.ones_like(b) * 0.5
    with ops.fp32_island():
        tail = ops.cast_like(joined[1:, ::-1], b) @ eye @ b
    mean = ops.sum(ops.mean(a)) * b[1]  # mean over the last axis: (2,)
    return ops.sum(m) + ops.sum(parts[0]) * b[0] + ops.sum(tail) + ops.sum(ops.transpose(a) @ a[:, 1:2] + a.T) + mean


def _polynomial_derivatives(f: Callable, z: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and H v of f (a polynomial of degree <= 2 in z) by central differences of step 1 on
    mpmath numbers: exact for such polynomials, to 50 digits."""
    with mpmath.workdps(50):
        zm, vm = to_mp(z), to_mp(v)
        e = np.eye(z.size, dtype=object).reshape((z.size,) + z.shape) * mpmath.mpf(1)
        grad = [(f(zm + e[k]) - f(zm - e[k])) / 2 for k in range(z.size)]
        hv = [
            (f(zm + e[k] + vm) - f(zm + e[k] - vm) - f(zm - e[k] + vm) + f(zm - e[k] - vm)) / 4 for k in range(z.size)
        ]
    return np.array([float(g) for g in grad]), np.array([float(h) for h in hv])


@PROPERTY
@given(
    z=st.lists(
        st.one_of(st.sampled_from([0.0, -0.0, 5e-324, 1.0, -2.0, 1e6]), st.floats(-10, 10)), min_size=9, max_size=9
    )
)
def test_structural_ops_against_mpmath(z: list[float]) -> None:
    flat = np.array(z)
    v = np.linspace(-1.0, 1.0, 9)

    def f(w):
        return _structural(OPS, dual.reshape(w[:6], (2, 3)) if isinstance(w, dual.Dual) else w[:6].reshape(2, 3), w[6:])

    want_g, want_hv = _polynomial_derivatives(lambda w: f(w), flat, v)
    inner = dual.Dual(flat, v[None], 1)
    with np.errstate(all="ignore"):
        out = f(dual.Dual(inner, np.eye(9), 2))
    grad = np.asarray(dual.primal(out.tangent), dtype=np.float64)
    hv = np.asarray(dual.primal(out.tangent.tangent), dtype=np.float64).reshape(9)
    scale = 1e-12 * (np.max(np.abs(want_g)) + 1.0)
    np.testing.assert_allclose(grad, want_g, rtol=1e-12, atol=scale)
    np.testing.assert_allclose(hv, want_hv, rtol=1e-12, atol=1e-12 * (np.max(np.abs(want_hv)) + 1.0))


def test_the_tables_cover_every_op_a_step_may_use() -> None:
    """Every Ops field has a rule here (scalar or structural): an op added to Ops without one fails."""
    covered = set(UNARY) | {"where", "maximum", "minimum"}
    structural = set(_structural.__code__.co_names)
    missing = [f.name for f in dataclasses.fields(Ops) if f.name != "name" and f.name not in covered | structural]
    assert not missing, f"Ops fields without a property case: {missing}"


def test_the_closed_forms_are_mpmath_derivatives() -> None:
    """The tables themselves, against mpmath's numerical differentiation at an interior point."""
    with mpmath.workdps(50):
        x, y = mpmath.mpf("0.7"), mpmath.mpf("1.3")
        for name, rule in UNARY.items():
            f = {"sigmoid": _sig, "abs": abs, "abs()": abs, "stop_gradient": lambda t: x * t}.get(name)
            f = f or (lambda t, rule=rule: _mp_value(rule.f, t))
            _, g, h = rule.derivatives(x)
            assert abs(mpmath.diff(f, x) - g[0]) < 1e-30 and abs(mpmath.diff(f, x, 2) - h[0][0]) < 1e-30, name
        for name, rule in BINARY.items():
            _, g, h = rule.derivatives(x, y)
            f = lambda a, b, rule=rule: _mp_value(rule.f, a, b)  # noqa: E731
            for i, order in enumerate([(1, 0), (0, 1)]):
                assert abs(mpmath.diff(f, (x, y), order) - g[i]) < 1e-30, (name, order)
            for (i, j), order in {(0, 0): (2, 0), (0, 1): (1, 1), (1, 1): (0, 2)}.items():
                assert abs(mpmath.diff(f, (x, y), order) - h[i][j]) < 1e-30, (name, order)


def _mp_value(f: Callable, *z):
    """f evaluated on 0-d object arrays of mpmath numbers (the dual numbers' 50-digit base)."""
    return np.asarray(f(*(np.asarray(t, dtype=object) for t in z)), dtype=object).item()


# ---- refused: operations the dual numbers do not define -------------------------------------------
REFUSED = {
    "np.sin": lambda h: np.sin(h),
    "//": lambda h: h // 2.0,
    "%": lambda h: h % 1.0,
    "divmod": lambda h: divmod(h, 2.0)[0],
    "float()": lambda h: float(h[0]) * h,
    "np.clip": lambda h: np.clip(h, -1.0, 1.0),
    "np.sum": lambda h: np.sum(h),
    ".clip": lambda h: h.clip(-1.0, 1.0),
    ".sum": lambda h: h.sum(),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_undefined_operation_is_refused_naming_the_line(name: str, monkeypatch) -> None:
    """Refused by check_recurrence with one line naming the step's line, before any driver runs."""
    import rnnbench
    import rnnbench.rows.pair
    from rnnbench.errors import InputError

    apply = REFUSED[name]

    def step(ops, params, carry, x):
        (h,) = carry
        return (apply(params["w"] * h + x) + 0.0 * h,), h

    def no_driver(*args, **kwargs):
        raise AssertionError("a driver ran")

    monkeypatch.setattr(rnnbench.rows.pair, "check_pair", no_driver)
    with pytest.raises(InputError) as caught:
        rnnbench.check_recurrence(
            step,
            params={"w": np.array([0.5, -0.3])},
            carry0=(np.full(2, 0.5),),
            xs=np.ones((2, 2)),
            drivers=["jax_lax_scan"],
        )
    message = str(caught.value)
    assert "\n" not in message and "test_dual_properties.py" in message and "dual numbers" in message, message
