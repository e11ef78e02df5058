"""Forward-mode dual numbers over numpy: the exact derivative oracle for any step written against
`ops`, sharing no code with torch or jax autodiff.

A Dual carries a value of shape S and its tangents, shape (K, *S): K directional derivatives along a
leading batch axis, one per seeded input entry, so one vectorised forward pass gives every entry of
the gradient, exact to rounding, with no step size. The value may itself be a Dual (a lower
`level`): nesting gives forward-over-forward second derivatives (H v) with the same first-order
rules. The base arrays are float64 numpy arrays, or object arrays of mpmath numbers for extended
precision (the elementwise functions dispatch on the dtype), so one rule set serves both.

Points without a derivative (abs and sqrt at 0, a tie in maximum / minimum, a comparison that
feeds `where` exactly on its boundary) are recorded, with the tangent columns they touch, in
check/differentiation/kink_log.py's `kinks()` collector: the oracle does not trust those columns
(check/oracles/oracle.py falls back).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from rnnbench.check.differentiation import branch_points
from rnnbench.check.differentiation.branch_points import side
from rnnbench.check.differentiation.dual_base import base_functions
from rnnbench.check.differentiation.dual_interval import Interval, TieMask, hull_at, tie_of
from rnnbench.check.differentiation.kink_log import collecting, kink_at, tie_met
from rnnbench.ops import named_ops

Array = Any  # a base array (float64 or mpmath object array) or a Dual


def _operators(f: Callable, da: Callable, db: Callable) -> tuple[Callable, Callable]:
    """(self op o, o op self) for Dual's operator methods: _binary with one rule for both."""
    return (lambda self, o: _binary(self, o, f, da=da, db=db)), (lambda self, o: _binary(o, self, f, da=da, db=db))


class Unsupported(TypeError):
    """numpy asked to treat a Dual as an array (np.clip(x), np.asarray(x)): not a derivative rule."""


class Dual:
    """value (S) and tangent (K, *S) at nesting `level` (1: first order; 2: its tangents are level 1)."""

    __array_ufunc__ = None  # numpy operands on the left defer to the reflected operators
    __slots__ = ("value", "tangent", "level")

    def __init__(self, value: Array, tangent: Array, level: int = 1):
        self.value, self.tangent, self.level = value, tangent, level

    shape = property(lambda self: np.shape(primal(self.value)))
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    dtype = property(lambda self: np.asarray(primal(self.value)).dtype)
    T = property(lambda self: swapaxes(self, -1, -2))

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        # numpy would otherwise iterate a Dual as a sequence of Duals (an object array, no rule)
        raise Unsupported("numpy functions other than the arithmetic operators take no differentiated value")

    def __len__(self) -> int:
        return self.shape[0]

    # Each rule is written once for an operator and its reflected form (o op self).
    __add__, __radd__ = _operators(lambda a, b: a + b, lambda t, a, b, y: t, lambda t, a, b, y: t)
    __sub__, __rsub__ = _operators(lambda a, b: a - b, lambda t, a, b, y: t, lambda t, a, b, y: -t)
    __mul__, __rmul__ = _operators(lambda a, b: a * b, lambda t, a, b, y: t * b, lambda t, a, b, y: t * a)
    __truediv__, __rtruediv__ = (lambda self, o: divide(self, o)), (lambda self, o: divide(o, self))
    __pow__, __rpow__ = (lambda self, o: power(self, o)), (lambda self, o: power(o, self))

    def __neg__(self):
        return Dual(-self.value, -self.tangent, self.level)

    def __pos__(self):
        return self

    def __abs__(self):
        return absolute(self)

    def __matmul__(self, o):
        return matmul(self, o)

    def __rmatmul__(self, o):
        return matmul(o, self)

    # Comparisons give plain boolean arrays (masks for `where` carry no derivative), `==` and `!=`
    # included (as numpy's do, so a Dual is unhashable like an array); an exact tie between sides
    # that move is a branch point, a kink.
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, o):  # type: ignore[override]
        return _compare(self, o, np.equal)

    def __ne__(self, o):  # type: ignore[override]
        return _compare(self, o, np.not_equal)

    def __gt__(self, o):
        return _compare(self, o, np.greater)

    def __lt__(self, o):
        return _compare(self, o, np.less)

    def __ge__(self, o):
        return _compare(self, o, np.greater_equal)

    def __le__(self, o):
        return _compare(self, o, np.less_equal)

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        return Dual(self.value[idx], self.tangent[(slice(None),) + idx], self.level)

    def __iter__(self) -> Iterator[Dual]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Dual(level={self.level}, shape={self.shape}, value={primal(self)!r})"


def level(x: Any) -> int:
    return x.level if isinstance(x, Dual) else 0


def primal(x: Any) -> Any:
    """The base value under every level."""
    while isinstance(x, Dual):
        x = x.value
    return x


def _parts(x: Any, at: int) -> tuple[Any, Any | None]:
    """(value, tangent) of x seen at level `at`: an operand of a lower level is a constant there."""
    return (x.value, x.tangent) if level(x) == at else (x, None)


# ---- structural functions on base arrays and Duals alike (a Dual's tangent axis is axis 0) --------
def reshape(x: Array, shape: tuple) -> Array:
    if not isinstance(x, Dual):
        return np.reshape(x, shape)
    v = reshape(x.value, shape)
    return Dual(v, reshape(x.tangent, (_k(x),) + np.shape(primal(v))), x.level)


def broadcast_to(x: Array, shape: tuple) -> Array:
    if not isinstance(x, Dual):
        return np.broadcast_to(x, shape)
    return Dual(broadcast_to(x.value, shape), broadcast_to(x.tangent, (_k(x),) + tuple(shape)), x.level)


def swapaxes(x: Array, a: int, b: int) -> Array:
    """Negative axes only (they name the same axes of the value and the tangent)."""
    if not isinstance(x, Dual):
        return np.swapaxes(x, a, b)
    return Dual(swapaxes(x.value, a, b), swapaxes(x.tangent, a, b), x.level)


def flip(x: Array, axis: int) -> Array:
    if not isinstance(x, Dual):
        return np.flip(x, axis)
    axis = axis % x.ndim
    return Dual(flip(x.value, axis), flip(x.tangent, axis + 1), x.level)


def sum_axes(x: Array, axes: tuple) -> Array:
    """Sum over non-negative `axes`."""
    if not isinstance(x, Dual):
        return np.sum(x, axis=axes)
    return Dual(sum_axes(x.value, axes), sum_axes(x.tangent, tuple(a + 1 for a in axes)), x.level)


def total(x: Array) -> Array:
    """Sum of every entry: a 0-d result."""
    if not isinstance(x, Dual):
        return np.asarray(np.sum(x)) if np.asarray(x).dtype != object else np.asarray(np.sum(x), dtype=object)
    return Dual(total(x.value), sum_axes(x.tangent, tuple(range(1, x.ndim + 1))), x.level)


def _joined(xs: Sequence[Array], axis: int, join: Callable, *, base: Callable, new_axis: bool) -> Array:
    """xs joined along `axis` by `join` (stack or concatenate: `base` is numpy's, `new_axis` when it
    adds one) at the highest level among them: the tangents joined alike, one axis further (a
    constant's as zeros)."""
    at = max(level(x) for x in xs)
    if at == 0:
        # interval tangents (check/differentiation/dual_interval.py) join by their own rule
        return base([x if isinstance(x, Interval) else np.asarray(x) for x in xs], axis=axis)
    parts = [_parts(x, at) for x in xs]
    k = next(_k_of(t) for _, t in parts if t is not None)
    axis = axis % (len(np.shape(primal(parts[0][0]))) + new_axis)
    tangents = [t if t is not None else np.zeros((k,) + np.shape(primal(v))) for v, t in parts]
    return Dual(join([v for v, _ in parts], axis), join(tangents, axis + 1), at)


def stack(xs: Sequence[Array], axis: int = 0) -> Array:
    return _joined(xs, axis, stack, base=np.stack, new_axis=True)


def concatenate(xs: Sequence[Array], axis: int = 0) -> Array:
    return _joined(xs, axis, concatenate, base=np.concatenate, new_axis=False)


def split(x: Array, n: int) -> tuple:
    """n equal chunks of the last axis."""
    if not isinstance(x, Dual):
        return tuple(np.split(x, n, axis=-1))
    return tuple(Dual(v, t, x.level) for v, t in zip(split(x.value, n), split(x.tangent, n)))


def where(cond: Any, a: Any, b: Any) -> Array:
    tie = tie_of(cond)  # a hulled pass's comparison at a tie (check/differentiation/dual_interval.py)
    cond = np.asarray(primal(cond), dtype=bool)
    at = max(level(a), level(b))
    if at == 0:
        return np.where(cond, a, b)
    (va, ta), (vb, tb) = _parts(a, at), _parts(b, at)
    value = where(cond, va, vb)
    shape = np.shape(primal(value))
    k = _k_of(ta if ta is not None else tb)
    mask = np.reshape(cond, (1,) * (1 + len(shape) - cond.ndim) + cond.shape)
    fit = [_fit(t, shape) if t is not None else np.zeros((k,) + shape) for t in (ta, tb)]
    tangent = where(mask, fit[0], fit[1])
    if tie is not None:
        tie = np.broadcast_to(tie, shape)
        if np.any(tie & (_float(va, shape) != _float(vb, shape))):
            branch_points.lose("a `where` at a tie whose branches differ in value (a jump)")
        tangent = hull_at(tie, tangent, fit[0], fit[1])
    return Dual(value, tangent, at)


def matmul(a: Any, b: Any) -> Array:
    """a @ b with numpy's 1-D promotion and batch broadcasting; d(a b) = da b + a db."""
    at = max(level(a), level(b))
    if at == 0:
        return np.matmul(a, b)
    (va, ta), (vb, tb) = _parts(a, at), _parts(b, at)
    value = matmul(va, vb)
    na, nb = len(np.shape(primal(va))), len(np.shape(primal(vb)))
    a2 = va if na >= 2 else reshape(va, (1,) + np.shape(primal(va)))  # (m=1, n)
    b2 = vb if nb >= 2 else reshape(vb, np.shape(primal(vb)) + (1,))  # (n, p=1)
    batch = max(len(np.shape(primal(a2))), len(np.shape(primal(b2))))  # promoted ndim
    parts = []
    if ta is not None:
        t2 = ta if na >= 2 else reshape(ta, (_k_of(ta), 1) + np.shape(primal(va)))
        parts.append(matmul(_lift(t2, batch), b2))
    if tb is not None:
        t2 = tb if nb >= 2 else reshape(tb, (_k_of(tb),) + np.shape(primal(vb)) + (1,))
        parts.append(matmul(a2, _lift(t2, batch)))
    tangent = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    k = _k_of(tangent)
    return Dual(value, reshape(tangent, (k,) + np.shape(primal(value))), at)


def _k(x: Dual) -> int:
    return _k_of(x.tangent)


def _k_of(t: Array) -> int:
    return int(np.shape(primal(t))[0])


def _lift(t: Array, ndim: int) -> Array:
    """Tangent (K, *s) with singleton axes after K, to 1 + ndim axes (for right-aligned broadcasting)."""
    shape = np.shape(primal(t))
    missing = ndim - (len(shape) - 1)
    return t if missing <= 0 else reshape(t, (shape[0],) + (1,) * missing + shape[1:])


def _fit(t: Array, shape: tuple) -> Array:
    """Tangent broadcast to (K, *shape)."""
    t = _lift(t, len(shape))
    full = (_k_of(t),) + tuple(shape)
    return t if np.shape(primal(t)) == full else broadcast_to(t, full)


# ---- elementwise rules ----------------------------------------------------------------------------
def _binary(a: Any, b: Any, f: Callable, *, da: Callable, db: Callable) -> Array:
    at = max(level(a), level(b))
    (va, ta), (vb, tb) = _parts(a, at), _parts(b, at)
    y = f(va, vb)
    shape = np.shape(primal(y))
    parts = []
    if ta is not None:
        parts.append(da(_lift(ta, len(shape)), va, vb, y))
    if tb is not None:
        parts.append(db(_lift(tb, len(shape)), va, vb, y))
    tangent = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    return Dual(y, _fit(tangent, shape), at)


def _unary(x: Dual, f: Callable, d: Callable) -> Dual:
    y = f(x.value)
    return Dual(y, d(x.tangent, x.value, y), x.level)


_np = base_functions()


def divide(a: Any, b: Any) -> Any:
    """a / b: d = ta / b - tb y / b."""
    if max(level(a), level(b)) == 0:
        return np.divide(a, b) if isinstance(a, Interval) else _np["divide"](a, b)
    return _binary(a, b, divide, da=lambda t, a, b, y: divide(t, b), db=lambda t, a, b, y: -divide(t * y, b))


def _float(x: Any, shape: tuple) -> np.ndarray:
    """x's base value as float64, broadcast to `shape` (for deciding which rule applies where)."""
    return np.broadcast_to(np.asarray(primal(x)).astype(np.float64), shape)


def power(a: Any, b: Any) -> Any:
    """a ** b, numpy's real power. d/da = b a^(b-1) (0 at 0^0: a constant 1); d/db = a^b log a
    (0 where a == 0 < b: 0^b is 0 on both sides). Where the real function has no derivative (a
    power at a == 0 other than an integer b >= 1, where it has an infinite one or a domain edge; a
    differentiated exponent at a <= 0, where a^b leaves the reals on one side) the columns moving
    there are a kink and the rule gives 0 (no inf * 0 = nan spilling over other columns)."""
    at = max(level(a), level(b))
    if at == 0:
        return _np["power"](a, b)
    (va, ta), (vb, tb) = _parts(a, at), _parts(b, at)
    y = power(va, vb)
    shape = np.shape(primal(y))
    pa, pb = _float(va, shape), _float(vb, shape)
    parts = []
    if ta is not None:
        smooth = (pa != 0) | (pb == 0) | ((pb >= 1) & (pb == np.floor(pb)))
        _kink_at(~smooth, _fit(ta, shape), "a power at 0")
        # b a^(b-1) wherever it is finite, b == 0 included (its derivative in b is 1 / a); 0 at 0^0
        flat = ~smooth | ((pa == 0) & (pb == 0))
        slope = where(flat, 0.0, vb * power(where(flat, 1.0, va), vb - 1.0))
        parts.append(_lift(ta, len(shape)) * slope)
    if tb is not None:
        smooth = (pa > 0) | ((pa == 0) & (pb > 0))
        _kink_at(~smooth, _fit(tb, shape), "a power with a differentiated exponent at a base <= 0")
        slope = where(pa > 0, y * log(where(pa > 0, va, 1.0)), 0.0)
        parts.append(_lift(tb, len(shape)) * slope)
    tangent = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    return Dual(y, _fit(tangent, shape), at)


def _sign(v: Any) -> Any:
    p = np.asarray(primal(v))
    return (p > 0).astype(np.float64) - (p < 0).astype(np.float64)


def _elementwise(name: str, derivative: Callable[[Any, Any, Any], Any]) -> Callable[[Any], Any]:
    """The op on base arrays, and on a Dual by the chain rule: tangent' = derivative(t, v, y)."""
    base = _np[name]

    def op(x: Any) -> Any:
        if not isinstance(x, Dual):
            return base(x)
        return _unary(x, op, derivative)

    op.__name__ = name
    return op


tanh = _elementwise("tanh", lambda t, v, y: t * (1.0 - y * y))
exp = _elementwise("exp", lambda t, v, y: t * y)
sin = _elementwise("sin", lambda t, v, y: t * cos(v))
cos = _elementwise("cos", lambda t, v, y: -(t * sin(v)))
tan = _elementwise("tan", lambda t, v, y: t * (1.0 + y * y))
log = _elementwise("log", lambda t, v, y: divide(t, v))


def _sqrt_rule(t, v, y):
    _kink_at(np.asarray(primal(v)) == 0, t, "sqrt at 0")
    return t * divide(0.5, y)


sqrt = _elementwise("sqrt", _sqrt_rule)


def _sigmoid_base(x: Any) -> Any:
    """On base arrays: the numpy namespace's form, accurate in both tails; 50-digit numbers need no care."""
    arr = np.asarray(x)
    if arr.dtype == object:
        return 1.0 / (1.0 + exp(-arr))
    e = np.exp(-np.abs(arr))
    return np.where(arr >= 0, 1.0, e) / (1.0 + e)


def sigmoid(x: Any) -> Any:
    """sigmoid, its derivative y (1 - y) by the chain rule (y - y^2 keeps the left tail's digits)."""
    if not isinstance(x, Dual):
        return _sigmoid_base(x)
    return _unary(x, sigmoid, lambda t, v, y: t * (y * (1.0 - y)))


def absolute(x: Any) -> Any:
    """|x| = x sign(x) at every level, the sign decided once (check/oracles/kink_range.py may force it at 0;
    along v: the sign of x's second derivative along v where x is stationary along v)."""
    at = np.asarray(primal(x)) == 0
    forced = side(at, sides=(x, 0.0, np.greater)) if isinstance(x, Dual) else None
    return _signed(x, _sign(x) if forced is None else np.where(at, np.where(forced, 1.0, -1.0), _sign(x)), at)


def _signed(x: Any, sign: np.ndarray, at: np.ndarray) -> Any:
    if not isinstance(x, Dual):
        return np.abs(x)
    _kink_at(at, x.tangent, "abs at 0")
    tangent = x.tangent * sign
    if isinstance(tangent, Interval) and np.any(at):  # a hulled pass: slope anywhere in [-1, 1] at 0
        tangent = hull_at(at, tangent, x.tangent, -x.tangent)
    return Dual(_signed(x.value, sign, at), tangent, x.level)


def _extremum(a: Any, b: Any, before: Callable) -> Any:
    """maximum (before: np.greater) or minimum (np.less). A tie is one branch point per entry (forced:
    True takes a); unforced, it splits the derivative half to each side, as torch and jax do."""
    pa, pb, tie, forced = _tie(a, b, before)
    first = before(pa, pb)
    if forced is not None:
        return where(np.where(tie, forced, first), a, b)
    if branch_points.hull() and np.any(tie):  # `where` hulls both sides' tangents at the ties
        return where(TieMask(first, tie), a, b)
    return where(first, a, where(before(pb, pa), b, 0.5 * (a + b)))


def maximum(a: Any, b: Any) -> Any:
    return np.maximum(a, b) if max(level(a), level(b)) == 0 else _extremum(a, b, np.greater)


def minimum(a: Any, b: Any) -> Any:
    return np.minimum(a, b) if max(level(a), level(b)) == 0 else _extremum(a, b, np.less)


# ---- kinks (recorded in check/differentiation/kink_log.py) -----------------------------------------------------------
def _kink_at(at: np.ndarray, tangent: Any, what: str) -> None:
    """kink_log.kink_at on the tangent's base array: a Dual tangent (a lower level moves too) names every column."""
    kink_at(at, primal(tangent), what, every_column=isinstance(tangent, Dual))


def _tie(a: Any, b: Any, f: Callable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(a's and b's base values, their exact ties, the side check/oracles/kink_range.py forces there or None),
    the tie recorded as a kink where the sides move."""
    pa, pb = np.asarray(primal(a)), np.asarray(primal(b))
    tie = np.broadcast_to(pa == pb, np.broadcast_shapes(pa.shape, pb.shape))
    if collecting() and np.any(tie):
        at = max(level(a), level(b))
        tie_met(_moving(a, tie, at) | _moving(b, tie, at))
    return pa, pb, tie, side(tie, sides=(a, b, f))


def _compare(a: Any, b: Any, f: Callable) -> np.ndarray:
    pa, pb, tie, forced = _tie(a, b, f)
    out = f(pa, pb) if forced is None else np.where(tie, forced, f(pa, pb))
    # a hulled pass (check/differentiation/dual_interval.py): `where` hulls the tangents at these entries
    return TieMask(out, tie) if branch_points.hull() and np.any(tie) else out


def _moving(x: Any, tie: np.ndarray, at: int) -> np.ndarray:
    """The top level's columns along which x moves at the tie's entries (every column where a lower
    level moves it). A comparison at equality is a branch point whenever either side moves, even when
    both move alike: `where` then picks a branch by the rounding of equal values, and the derivative
    the oracle and the drivers would share is the branch's, not necessarily the function's."""
    cols = np.zeros(1, dtype=bool)
    while isinstance(x, Dual):
        t = np.asarray(primal(_fit(x.tangent, tie.shape)))
        moves = np.any(np.reshape(t[:, tie] != 0, (t.shape[0], -1)), axis=1)
        cols = cols | (moves if x.level == at else np.any(moves))
        x = x.value
    return cols


# ---- the ops namespace -------------------------------------------------------------------------------
def _constant_like(like: Any, make: Callable[[Any], np.ndarray]) -> np.ndarray:
    """A constant (no tangent) in like's base dtype (float64, or object for extended precision)."""
    dtype = np.asarray(primal(like)).dtype
    return make(object if dtype.kind == "O" else np.float64)


def dual_ops() -> Any:
    """rnnbench.ops.Ops over Dual (and the base arrays under it), a rule for every field: tests/test_dual.py
    derives its closed-form checks from the Ops fields, so an op added to Ops without a rule fails there."""
    import sys

    return named_ops(
        sys.modules[__name__],  # this module's rules, named as numpy names its functions
        name="dual",
        sigmoid=sigmoid,
        abs=absolute,
        stop_gradient=lambda x: primal(x),  # every level: no derivative flows back at any order
        linear=lambda x, w, b=None: matmul(x, swapaxes(w, -1, -2)) if b is None else matmul(x, swapaxes(w, -1, -2)) + b,
        split=split,
        stack=lambda xs: stack(list(xs), 0),
        unstack=lambda x: tuple(x[t] for t in range(np.shape(primal(x))[0])),
        concat=lambda xs, axis=0: concatenate(list(xs), axis),
        sum=total,
        mean=lambda x: sum(split(x, np.shape(primal(x))[-1])) / np.shape(primal(x))[-1],  # (..., 1) columns summed
        flip=lambda x: flip(x, 0),
        zeros=lambda shape, like: _constant_like(like, lambda dt: np.zeros(shape, dtype=dt)),
        zeros_like=lambda x: _constant_like(x, lambda dt: np.zeros(np.shape(primal(x)), dtype=dt)),
        ones_like=lambda x: _constant_like(x, lambda dt: np.ones(np.shape(primal(x)), dtype=dt)),
        eye=lambda n, like: _constant_like(like, lambda dt: np.eye(n, dtype=dt)),
        transpose=lambda x: swapaxes(x, -1, -2),
        cast_like=lambda x, like: x,  # one precision throughout
        fp32_island=contextlib.nullcontext,
    )
