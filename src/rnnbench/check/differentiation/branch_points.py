"""Which side the dual numbers (check/differentiation/dual.py) take at each branch point: a comparison at an exact
tie, `abs` at 0, a tie in maximum / minimum (one branch point per tied entry however the op is
written). Outside a plan the ops decide as numpy does (this module answers None). Inside:
  - `forcing(bits)`: every tied entry met takes the side given by the next of a sequence of bits, in
    the order the step meets them, so check/oracles/kink_range.py can evaluate the chain rule with each
    kink's local derivative at either of its one-sided values;
  - `hulling()`: numpy's own side for the values, while the tangents at each tie take the hull of
    both sides' (check/differentiation/dual_interval.py: interval tangents, one pass whatever the number of ties);
  - `along()`: each tie takes the side the direction v takes on both sides of the point, where its
    sides agree along v to first order and differ at second order (check/oracles/kink_range.py: the exact H
    v at a tie of two smooth branches); a tie that v does not decide is counted as undecided.
The plan also records how many tied entries each branch point had, so a pass can be checked to have
met the same branch points as the pass it is compared with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Plan:
    """bits: the side of each tied entry in meeting order (True: the comparison holds, abs' slope
    +1, maximum / minimum's first operand), or None to record only; sizes: the tied entries of each
    branch point met; overrun: more tied entries were met than there are bits (the pass met other
    branch points). hull: tangents hulled at ties (`hulling`); lost: why a hulled pass does not
    bound the derivative ("" while it does). along: sides decided by v (`along`); direction: v
    flattened over the pass's tangent columns (check/differentiation/dual_eval.py sets it); undecided: the tied
    entries v did not decide."""

    bits: Sequence[bool] | None
    sizes: list[int] = field(default_factory=list)
    used: int = 0
    overrun: bool = False
    hull: bool = False
    lost: str = ""
    along: bool = False
    direction: np.ndarray | None = None
    undecided: int = 0


_PLAN: ContextVar[Plan | None] = ContextVar("rnnbench_branch_plan", default=None)


@contextlib.contextmanager
def _planned(plan: Plan) -> Iterator[Plan]:
    token = _PLAN.set(plan)
    try:
        yield plan
    finally:
        _PLAN.reset(token)


def forcing(bits: Sequence[bool] | None) -> contextlib.AbstractContextManager[Plan]:
    """Inside, branch points take the sides `bits` gives (None: numpy's own, recorded)."""
    return _planned(Plan(None if bits is None else list(bits)))


def hulling() -> contextlib.AbstractContextManager[Plan]:
    """Inside, numpy's own sides, and the tangents hulled at every tie (module docstring)."""
    return _planned(Plan(None, hull=True))


def along() -> contextlib.AbstractContextManager[Plan]:
    """Inside, every tie takes the side that v decides (module docstring), where it does."""
    return _planned(Plan(None, along=True))


def hull() -> bool:
    """Whether the pass hulls the tangents at ties (check/differentiation/dual_interval.py)."""
    plan = _PLAN.get()
    return plan is not None and plan.hull


def lose(why: str) -> None:
    """A hulled pass's bound no longer holds (a tie's mask used other than by `where`, a `where` at a
    tie whose branches differ in value): the first reason is kept."""
    plan = _PLAN.get()
    if plan is not None and plan.hull and not plan.lost:
        plan.lost = why


def direction() -> np.ndarray | None:
    """v over the pass's tangent columns in an `along` pass, else None."""
    plan = _PLAN.get()
    return plan.direction if plan is not None and plan.along else None


def set_direction(v: np.ndarray) -> None:
    plan = _PLAN.get()
    if plan is not None and plan.along:
        plan.direction = v


def side(at: np.ndarray, *, sides: tuple[Any, Any, Callable] | None = None) -> np.ndarray | None:
    """The forced side (a boolean array of at's shape, read only where `at`) of the tied entries
    `at` of one branch point, or None where numpy's own answer stands. sides: (a, b, f), the tie's
    sides and the comparison whose truth is the side (True: f(a, b) holds), for an `along` pass."""
    plan = _PLAN.get()
    at = np.asarray(at, dtype=bool)
    if plan is None or not np.any(at):
        return None
    n = int(np.count_nonzero(at))
    plan.sizes.append(n)
    if plan.along:
        known, chosen = decided_by_v(*sides, at) if sides is not None else (np.zeros(at.shape, dtype=bool), at)
        plan.undecided += int(np.count_nonzero(at & ~known))
        return np.where(known, chosen, False)
    if plan.bits is None:
        return None
    take = list(plan.bits[plan.used : plan.used + n])
    plan.used += n
    plan.overrun |= len(take) < n
    chosen = np.zeros(at.shape, dtype=bool)
    chosen[at] = take + [False] * (n - len(take))
    return chosen


def decided_by_v(a: Any, b: Any, f: Callable, tie: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """In an `along` pass: where v decides a tie of a and b (check/differentiation/dual.py's Duals, or constants), and
    the side the comparison `f` takes there. a(p + s v) - b(p + s v) = s d1 + s^2 d2 / 2 + ...: with
    d1 == 0 and d2 != 0 it has d2's sign on both sides of s = 0, so the branch taken is the same on
    both sides; anything else is undecided."""
    v, shape = direction(), tie.shape
    ea, eb = (_along_v(x, shape, v) if v is not None else None for x in (a, b))
    if ea is None or eb is None:
        return np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    d1, d2 = ea[0] - eb[0], ea[1] - eb[1]
    known = tie & (d1 == 0) & (d2 != 0) & np.isfinite(d2)
    return known, np.asarray(f(np.sign(d2), 0.0), dtype=bool)


def _along_v(x: Any, shape: tuple, v: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(d/ds, d^2/ds^2) of x(p + s v) at s = 0 in an H v pass (check/differentiation/dual_eval.py: an outer level of K
    columns over every compared entry, an inner level along v; v (K,) over those columns), both of
    `shape`: the inner tangent, and sum_k v_k d/dx_k of it (mixed partials are symmetric). None
    where x's second derivative along v is not carried (a Dual of the inner level alone)."""
    zero = np.zeros(shape)
    level = getattr(x, "level", 0)
    if level == 0:
        return zero, zero
    if level != 2:
        return None
    inner, outer = x.value, x.tangent  # inner: level 1 or a base array; outer (K, *S): level 1 or base
    d1 = _lifted(inner.tangent, 1, (1,) + shape)[0] if getattr(inner, "level", 0) == 1 else zero
    if getattr(outer, "level", 0) != 1:
        return d1, zero
    k = np.shape(outer.tangent)[1]
    return d1, np.tensordot(v, _lifted(outer.tangent, 2, (1, k) + shape)[0], axes=(0, 0))


def _lifted(t: Any, axes: int, full: tuple) -> np.ndarray:
    """A base tangent array, its first `axes` axes tangent axes and the rest value axes right-aligned
    (as check/differentiation/dual.py broadcasts them), broadcast to `full`."""
    t = np.asarray(t, dtype=np.float64)
    missing = len(full) - t.ndim
    if missing > 0:
        t = t.reshape(t.shape[:axes] + (1,) * missing + t.shape[axes:])
    return np.broadcast_to(t, full)
