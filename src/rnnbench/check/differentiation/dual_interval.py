"""Interval tangents for the dual numbers (check/differentiation/dual.py): one first-order pass that bounds every
value the chain rule gives with each kink's local derivative anywhere between its one-sided ones,
whatever the number of ties (check/oracles/kink_range.py uses it beyond the corners it enumerates).

First-order forward mode is linear in the tangents, with coefficients that are values: a tangent
carried as a center c and a radius r >= 0 (each entry the interval [c - r, c + r]) goes through
every rule exactly as c does, and through a coefficient b as r |b| (a sum adds radii; a matmul takes
|B|). At a tie the tangent is the hull of both sides' (check/differentiation/dual.py's `where`, maximum, minimum
and abs at 0, inside branch_points.hulling()): every combination of sides then lies within the
final interval. It is sound and wider than the corners' range where one kink reaches an entry by
several paths (the interval forgets that they share one local derivative).

A comparison's result in such a pass is a TieMask: a boolean array that knows its tied entries, so
`where` can hull exactly there. Any other use of a tied mask (a product with it, a Python `if`, a
reduction, a reshape) or a `where` at a tie whose branches differ in value (a jump: its sides lead
to different values downstream) voids the bound (branch_points.lose), and the range is not given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from rnnbench.check.differentiation.branch_points import lose


class Escape(TypeError):
    """An operation on an interval tangent with no interval rule here (not a first-order rule)."""


# numpy functions that only move, select or sum (every coefficient +1): applied to c and r alike,
# with the positions of their array operands ("list": a sequence of them)
_STRUCTURAL: dict[Any, tuple | str] = {
    np.reshape: (0,),
    np.broadcast_to: (0,),
    np.swapaxes: (0,),
    np.flip: (0,),
    np.sum: (0,),
    np.transpose: (0,),
    np.moveaxis: (0,),
    np.squeeze: (0,),
    np.expand_dims: (0,),
    np.split: (0,),
    np.where: (1, 2),
    np.stack: "list",
    np.concatenate: "list",
}


def parts(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(center, radius) of an Interval; a plain array is its own center, radius 0."""
    if isinstance(x, Interval):
        return x.c, x.r
    a = np.asarray(x, dtype=np.float64)
    return a, np.zeros_like(a)


class Interval(NDArrayOperatorsMixin):
    """Tangents (K, *S) as center c and radius r (r >= 0, c's shape)."""

    __slots__ = ("c", "r")

    def __init__(self, c: np.ndarray, r: np.ndarray):
        self.c, self.r = c, r

    shape = property(lambda self: np.shape(self.c))
    ndim = property(lambda self: np.ndim(self.c))

    def __getitem__(self, idx: Any) -> Interval:
        return Interval(self.c[idx], self.r[idx])

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise Escape("an interval tangent taken as a plain array")

    def reshape(self, *shape: Any) -> Interval:
        return Interval(self.c.reshape(*shape), self.r.reshape(*shape))

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            raise Escape(f"{ufunc.__name__}.{method} on an interval tangent")
        name = ufunc.__name__
        if name in ("add", "subtract"):
            (c0, r0), (c1, r1) = parts(inputs[0]), parts(inputs[1])
            return Interval(ufunc(c0, c1), r0 + r1)
        if name in ("negative", "positive"):
            c, r = parts(inputs[0])
            return Interval(ufunc(c), r)
        if name in ("multiply", "divide", "true_divide", "matmul"):
            intervals = [isinstance(x, Interval) for x in inputs]
            if sum(intervals) != 1 or (name != "multiply" and name != "matmul" and not intervals[0]):
                raise Escape(f"{name} of two tangents, or by a tangent: not a first-order rule")
            i = intervals.index(True)
            t, b = inputs[i], np.asarray(inputs[1 - i])
            args = (t.c, b) if i == 0 else (b, t.c)
            radius_args = (t.r, np.abs(b)) if i == 0 else (np.abs(b), t.r)
            return Interval(ufunc(*args), ufunc(*radius_args))
        raise Escape(f"{name} on an interval tangent")

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if func in (np.shape, np.ndim, np.size):
            return func(self.c)
        where = _STRUCTURAL.get(func)
        if where is None:
            raise Escape(f"{func.__name__} on an interval tangent")

        def operands(pick: int) -> tuple:
            if where == "list":
                return (type(args[0])(parts(x)[pick] for x in args[0]),) + tuple(args[1:])
            return tuple(parts(a)[pick] if i in where else a for i, a in enumerate(args))

        c, r = func(*operands(0), **kwargs), func(*operands(1), **kwargs)
        if func is np.split:
            return [Interval(ci, ri) for ci, ri in zip(c, r)]
        return Interval(c, r)


def hull_at(at: np.ndarray, t: Any, a: Any, b: Any) -> Interval:
    """t (K, *S) with its entries where `at` (S, broadcast over K) replaced by the hull of a's and b's
    (each (K, *S): an Interval or a plain array)."""
    (ca, ra), (cb, rb), (c, r) = parts(a), parts(b), parts(t)
    lo, hi = np.minimum(ca - ra, cb - rb), np.maximum(ca + ra, cb + rb)
    return Interval(np.where(at, (lo + hi) / 2, c), np.where(at, (hi - lo) / 2, r))


class TieMask(np.ndarray):
    """A comparison's boolean result in a hulled pass; `tie` (its shape): the entries at an exact tie.
    Only `where`, and the logical operators (whose ties are the union of their operands'), keep it;
    any other use of a tied entry voids the pass's bound (module docstring)."""

    tie: np.ndarray | None

    def __new__(cls, values: np.ndarray, tie: np.ndarray) -> TieMask:
        obj = np.asarray(values, dtype=bool).view(cls)
        obj.tie = np.broadcast_to(np.asarray(tie, dtype=bool), obj.shape).copy()
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        # a view made by numpy (a reshape, a transpose) cannot say where its ties went
        if isinstance(obj, TieMask) and obj.tie is not None and np.any(obj.tie):
            lose("a comparison at a tie reshaped before `where`")
        self.tie = None

    def __getitem__(self, idx: Any) -> Any:
        out = np.asarray(self)[idx]
        tie = self.tie[idx] if self.tie is not None else None
        return TieMask(out, tie) if tie is not None and np.ndim(out) and np.any(tie) else _plain(self, out, tie)

    def __bool__(self) -> bool:
        _used(self, "a Python truth test")
        return bool(np.asarray(self))

    def astype(self, *args: Any, **kwargs: Any) -> np.ndarray:
        _used(self, "astype")
        return np.asarray(self).astype(*args, **kwargs)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        ties = [x.tie for x in inputs if isinstance(x, TieMask) and x.tie is not None]
        plain = [np.asarray(x) if isinstance(x, TieMask) else x for x in inputs]
        result = getattr(ufunc, method)(*plain, **kwargs)
        logical = ufunc in _LOGICAL and method == "__call__" and np.asarray(result).dtype == bool
        if logical and ties:
            tie = np.zeros(np.shape(result), dtype=bool)
            for t in ties:
                tie = tie | np.broadcast_to(t, np.shape(result))
            return TieMask(result, tie) if np.any(tie) else result
        if any(np.any(t) for t in ties):
            lose(f"a comparison at a tie used by {ufunc.__name__}")
        return result


_LOGICAL = (
    np.invert,
    np.logical_not,
    np.logical_and,
    np.logical_or,
    np.logical_xor,
    np.bitwise_and,
    np.bitwise_or,
    np.bitwise_xor,
)


def _used(mask: TieMask, how: str) -> None:
    if mask.tie is not None and np.any(mask.tie):
        lose(f"a comparison at a tie used by {how}")


def _plain(mask: TieMask, out: Any, tie: Any) -> Any:
    """An indexed mask with no tie left (or a single entry): a plain value; a single tied entry
    read out of the mask is a use `where` cannot hull."""
    if tie is not None and not np.ndim(out) and bool(tie):
        lose("a comparison at a tie read entry by entry")
    return np.asarray(out) if np.ndim(out) else out


def tie_of(cond: Any) -> np.ndarray | None:
    """cond's tied entries when it is a TieMask with some, else None."""
    tie = getattr(cond, "tie", None) if isinstance(cond, TieMask) else None
    return tie if tie is not None and np.any(tie) else None
