"""How far a correct float32 computation of the gradient lands from the float64 truth: the error
bar of a float32 row, from an independent float32 reverse mode over the numpy step (a small tape
written here, sharing nothing with torch or jax).

Why: a float32 driver is compared with the float64 oracle on the float32-rounded inputs. Where the
gradient is ill-conditioned for float32 (a tanh saturated by a temperature of 1e-2, where
1 - tanh^2 rounds to 0; a divisor of 1e-2 amplifying every rounding over 16 steps), a correct
float32 backward misses the float64 value by more than the float32 tolerance, and calling that a
wrong gradient is a false alarm. The judge asks this module for a reference float32 gradient only
when a float32 row would fail, and takes ROUNDING_SAFETY times its distance from the truth as
the entry's rounding bound: within it, the verdict is cannot_decide. A driver bug of a larger size
(bf16-rounded cotangents: ~4e-3 where correct float32 sits near 1e-7) is still a mismatch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.model import Case, Model, is_integer, rollout
from rnnbench.ops import Ops

ROUNDING_SAFETY = 10.0  # different float32 implementations round in different orders


def _operators(f: Callable, da: Callable, db: Callable) -> tuple[Callable, Callable]:
    """(self op o, o op self) for Var's operator methods: _binary with one rule for both."""
    return (lambda self, o: _binary(self, o, f, da=da, db=db)), (lambda self, o: _binary(o, self, f, da=da, db=db))


class Var:
    """A float32 array on the tape: value, and (parent, vector-Jacobian product) pairs."""

    __array_ufunc__ = None  # numpy arrays on the left defer to Var's reflected operators

    def __init__(self, value: Any, parents: tuple = ()):
        self.value = np.asarray(value, dtype=np.float32)
        self.parents = parents
        self.grad: np.ndarray | None = None

    shape = property(lambda self: self.value.shape)
    ndim = property(lambda self: self.value.ndim)
    dtype = property(lambda self: self.value.dtype)

    # Each rule is written once for an operator and its reflected form (o op self).
    __add__, __radd__ = _operators(np.add, lambda g, a, b: g, lambda g, a, b: g)
    __sub__, __rsub__ = _operators(np.subtract, lambda g, a, b: g, lambda g, a, b: -g)
    __mul__, __rmul__ = _operators(np.multiply, lambda g, a, b: g * b, lambda g, a, b: g * a)
    __truediv__, __rtruediv__ = _operators(np.divide, lambda g, a, b: g / b, lambda g, a, b: -g * a / (b * b))

    def __matmul__(self, o):
        return matmul(self, o)

    def __rmatmul__(self, o):
        return matmul(o, self)

    def __neg__(self):
        return _unary(self, np.negative, lambda g, x, y: -g)

    def __pow__(self, k):
        if not np.isscalar(k):
            raise TypeError("only constant powers")
        return _unary(self, lambda x: x ** np.float32(k), lambda g, x, y: g * np.float32(k) * x ** np.float32(k - 1))

    # Comparisons give plain boolean arrays, off the tape: masks for ops.where carry no derivative.
    def __gt__(self, o):
        return self.value > _const(o).value

    def __lt__(self, o):
        return self.value < _const(o).value

    def __ge__(self, o):
        return self.value >= _const(o).value

    def __le__(self, o):
        return self.value <= _const(o).value

    def __getitem__(self, idx):
        def vjp(g):
            out = np.zeros_like(self.value)
            np.add.at(out, idx, g)
            return out

        return Var(self.value[idx], ((self, vjp),))

    @property
    def T(self):
        return transpose(self)


def _const(x: Any) -> Var:
    return x if isinstance(x, Var) else Var(np.asarray(x, dtype=np.float32))


def _unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def _binary(a: Any, b: Any, f: Callable, *, da: Callable, db: Callable) -> Var:
    a, b = _const(a), _const(b)
    av, bv = a.value, b.value
    return Var(
        f(av, bv),
        ((a, lambda g: _unbroadcast(da(g, av, bv), av.shape)), (b, lambda g: _unbroadcast(db(g, av, bv), bv.shape))),
    )


def _unary(x: Var, f: Callable, d: Callable) -> Var:
    x = _const(x)
    y = f(x.value)
    return Var(y, ((x, lambda g: d(g, x.value, y)),))


def matmul(a: Any, b: Any) -> Var:
    a, b = _const(a), _const(b)
    av, bv = a.value, b.value
    a2 = av[None, :] if av.ndim == 1 else av
    b2 = bv[:, None] if bv.ndim == 1 else bv

    def as2(g):  # the cotangent with the dropped 1-D axes restored
        if av.ndim == 1:
            g = np.expand_dims(g, -2)
        if bv.ndim == 1:
            g = np.expand_dims(g, -1)
        return g

    def da(g):
        out = as2(g) @ np.swapaxes(b2, -1, -2)
        out = out[..., 0, :] if av.ndim == 1 else out
        return _unbroadcast(out, av.shape)

    def db(g):
        out = np.swapaxes(a2, -1, -2) @ as2(g)
        out = out[..., 0] if bv.ndim == 1 else out
        return _unbroadcast(out, bv.shape)

    return Var(av @ bv, ((a, da), (b, db)))


def transpose(x: Var) -> Var:
    x = _const(x)
    return Var(np.swapaxes(x.value, -1, -2), ((x, lambda g: np.swapaxes(g, -1, -2)),))


def _split(x: Var, n: int) -> tuple:
    x = _const(x)
    size = x.shape[-1] // n
    out = []
    for i in range(n):

        def vjp(g, i=i):
            full = np.zeros_like(x.value)
            full[..., i * size : (i + 1) * size] = g
            return full

        out.append(Var(x.value[..., i * size : (i + 1) * size], ((x, vjp),)))
    return tuple(out)


def _stack(xs) -> Var:
    xs = [_const(x) for x in xs]
    return Var(np.stack([x.value for x in xs]), tuple((x, lambda g, i=i: g[i]) for i, x in enumerate(xs)))


def _concat(xs, axis: int = 0) -> Var:
    xs = [_const(x) for x in xs]
    out = np.concatenate([x.value for x in xs], axis=axis)
    axis = axis % out.ndim
    edges = np.cumsum([0] + [x.shape[axis] for x in xs])

    def vjp(g, i):  # g's slice along `axis` that came from xs[i]
        return g[(slice(None),) * axis + (slice(edges[i], edges[i + 1]),)]

    return Var(out, tuple((x, lambda g, i=i: vjp(g, i)) for i, x in enumerate(xs)))


def _where(cond: Any, a: Any, b: Any) -> Var:
    cond = np.asarray(cond, dtype=bool)
    return _binary(
        a,
        b,
        lambda av, bv: np.where(cond, av, bv),
        da=lambda g, av, bv: np.where(cond, g, np.float32(0)),
        db=lambda g, av, bv: np.where(cond, np.float32(0), g),
    )


def _extremum(a: Any, b: Any, f: Callable, wins: Callable) -> Var:
    """f = np.maximum with wins = np.greater, or np.minimum with np.less. On ties each side gets
    half of g, as torch and jax do, so the tape's gradient at a tie is the one the drivers compute."""

    def share(g, mine, other):
        return g * np.where(wins(mine, other), np.float32(1), np.where(mine == other, np.float32(0.5), np.float32(0)))

    return _binary(a, b, f, da=lambda g, av, bv: share(g, av, bv), db=lambda g, av, bv: share(g, bv, av))


def _reshape(x: Var, shape: tuple) -> Var:
    x = _const(x)
    return Var(np.reshape(x.value, shape), ((x, lambda g: np.reshape(g, x.shape)),))


def _flip(x: Var) -> Var:
    x = _const(x)
    return Var(np.flip(x.value, 0), ((x, lambda g: np.flip(g, 0)),))


def _sum(x: Var) -> Var:
    x = _const(x)
    return Var(np.sum(x.value), ((x, lambda g: np.broadcast_to(g, x.shape).copy()),))


def _mean(x: Var) -> Var:
    """Mean over the last axis, kept with size 1 (float32, as numpy sums float32)."""
    x = _const(x)
    n = np.float32(x.shape[-1])
    return Var(np.mean(x.value, axis=-1, keepdims=True), ((x, lambda g: np.broadcast_to(g / n, x.shape).copy()),))


def _stable_sigmoid(v: np.ndarray) -> np.ndarray:
    """exp(v) / (1 + exp(v)) below 0, 1 / (1 + exp(-v)) above, in float32: accurate in both tails, as
    the numpy namespace's sigmoid is (rnnbench.ops)."""
    e = np.exp(-np.abs(v))
    return (np.where(v >= 0, np.float32(1), e) / (np.float32(1) + e)).astype(np.float32)


def _sigmoid(x: Var) -> Var:
    return _unary(
        x,
        _stable_sigmoid,
        lambda g, v, y: g * y * (np.float32(1) - y),
    )


def float32_ops() -> Ops:
    """The ops namespace over Var (float32 throughout)."""
    return Ops(
        name="float32_tape",
        tanh=lambda x: _unary(x, np.tanh, lambda g, v, y: g * (np.float32(1) - y * y)),
        sigmoid=_sigmoid,
        exp=lambda x: _unary(x, np.exp, lambda g, v, y: g * y),
        sin=lambda x: _unary(x, np.sin, lambda g, v, y: g * np.cos(v)),
        cos=lambda x: _unary(x, np.cos, lambda g, v, y: -g * np.sin(v)),
        tan=lambda x: _unary(x, np.tan, lambda g, v, y: g * (np.float32(1) + y * y)),
        log=lambda x: _unary(x, np.log, lambda g, v, y: g / v),
        sqrt=lambda x: _unary(x, np.sqrt, lambda g, v, y: g * np.float32(0.5) / y),
        abs=lambda x: _unary(x, np.abs, lambda g, v, y: g * np.sign(v)),
        where=_where,
        maximum=lambda a, b: _extremum(a, b, np.maximum, np.greater),
        minimum=lambda a, b: _extremum(a, b, np.minimum, np.less),
        stop_gradient=lambda x: Var(_const(x).value),  # no parents: nothing flows back
        matmul=matmul,
        linear=lambda x, w, b=None: matmul(x, transpose(w)) if b is None else matmul(x, transpose(w)) + b,
        split=_split,
        stack=_stack,
        concat=_concat,
        sum=_sum,
        mean=_mean,
        reshape=_reshape,
        flip=_flip,
        zeros=lambda shape, like: Var(np.zeros(shape, dtype=np.float32)),
        zeros_like=lambda x: Var(np.zeros(np.shape(_const(x).value), dtype=np.float32)),
        ones_like=lambda x: Var(np.ones(np.shape(_const(x).value), dtype=np.float32)),
        eye=lambda n, like: Var(np.eye(n, dtype=np.float32)),
        transpose=transpose,
        cast_like=lambda x, like: _const(x),
        fp32_island=contextlib.nullcontext,
    )


def backward(loss: Var) -> None:
    """Accumulate d loss / d v into v.grad for every Var the loss depends on (float32)."""
    order, seen = [], set()
    stack = [(loss, False)]
    while stack:  # iterative post-order: recurrences are deep graphs
        v, done = stack.pop()
        if done:
            order.append(v)
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        stack.append((v, True))
        stack.extend((p, False) for p, _ in v.parents)
    loss.grad = np.ones_like(loss.value)
    for v in reversed(order):
        if v.grad is None:
            continue
        for parent, vjp in v.parents:
            g = np.asarray(vjp(v.grad), dtype=np.float32)
            parent.grad = g if parent.grad is None else parent.grad + g


def _float32_forward(model: Model, case: Case) -> tuple[Var, dict[str, Var | None]]:
    """The loss on the tape, and the input leaves by compared-input name."""
    params = {k: Var(v) for k, v in case.params.items()}
    # an integer input (token ids, a counter) stays an integer array: an index, off the tape
    carry0 = tuple(c if is_integer(c) else Var(c) for c in case.carry0)
    xs = None if case.xs is None else case.xs if is_integer(case.xs) else Var(case.xs)
    ops = float32_ops()
    with np.errstate(all="ignore"):  # an overflow is the answer here (an infinite float32 loss), not a warning
        ys, carry = rollout(ops, model, params, carry0=carry0, xs=xs, length=case.length)
        loss = _const(model.loss(ops, {k: np.asarray(v, np.float32) for k, v in case.consts.items()}, ys, carry))
    return loss, {**params, "xs": xs, **{f"carry0.{n}": c for n, c in zip(model.carry_names, carry0)}}


def float32_loss(model: Model, case: Case) -> float:
    """The loss computed in float32 by the tape above: one correct float32 implementation's value."""
    return float(_float32_forward(model, case)[0].value)


def float32_tape(model: Model, case: Case, names: list[str]) -> tuple[float, dict[str, np.ndarray]]:
    """(the loss, d loss / d input for `names`), computed in float32 by the tape above (float64 out)."""
    loss, leaves = _float32_forward(model, case)
    backward(loss)
    out = {}
    for name in names:
        leaf = leaves[name]
        out[name] = np.zeros(leaf.shape) if leaf.grad is None else leaf.grad.astype(np.float64)
    return float(loss.value), out


def float32_gradients(model: Model, case: Case, names: list[str]) -> dict[str, np.ndarray]:
    """d loss / d input for `names`, computed in float32 by the tape above (float64 arrays out)."""
    return float32_tape(model, case, names)[1]


FLOAT32_MAX = float(np.finfo(np.float32).max)


def float32_holds(loss: float, tape: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per entry, whether float32 can hold this derivative, so that a driver's non-finite value
    there is wrong (a where whose unselected branch is NaN or inf, 0 * inf in its backward): True
    unless the exact derivative `want` is beyond float32's range, or the float32 forward of the
    loss itself overflows (`loss`, the tape's, not finite) and the tape's derivative `tape` there
    is not finite either. Shapes: tape and want alike."""
    want = np.asarray(want, dtype=np.float64)
    overflowed = not np.isfinite(loss)
    return ~(np.abs(want) > FLOAT32_MAX) & ~(overflowed & ~np.isfinite(tape))


def rounding_bounds(model: Model, case: Case, names: list[str], want: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-entry absolute bounds on what float32 rounding alone does to the gradient: ROUNDING_SAFETY
    times the float32 tape's distance from the float64 oracle `want`."""
    got = float32_gradients(model, case, names)
    return {n: ROUNDING_SAFETY * np.abs(got[n] - np.asarray(want[n], dtype=np.float64)) for n in names}
