"""Which side the dual numbers (check/dual.py) take at each branch point: a comparison at an exact
tie, `abs` at 0. Outside `forcing` the ops decide as numpy does (this module answers None); inside,
every tied entry met takes the side given by the next of a sequence of bits, in the order the step
meets them, so check/kink_range.py can evaluate the chain rule with each kink's local derivative at
either of its one-sided values. The plan also records how many tied entries each branch point had,
so a pass can be checked to have met the same branch points as the pass it is compared with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Plan:
    """bits: the side of each tied entry in meeting order (True: the comparison holds, abs' slope
    +1), or None to record only; sizes: the tied entries of each branch point met; overrun: more
    tied entries were met than there are bits (the pass met other branch points)."""

    bits: Sequence[bool] | None
    sizes: list[int] = field(default_factory=list)
    used: int = 0
    overrun: bool = False


_PLAN: ContextVar[Plan | None] = ContextVar("rnnbench_branch_plan", default=None)


@contextlib.contextmanager
def forcing(bits: Sequence[bool] | None) -> Iterator[Plan]:
    """Inside, branch points take the sides `bits` gives (None: numpy's own, recorded)."""
    plan = Plan(None if bits is None else list(bits))
    token = _PLAN.set(plan)
    try:
        yield plan
    finally:
        _PLAN.reset(token)


def side(at: np.ndarray) -> np.ndarray | None:
    """The forced side (a boolean array of at's shape, read only where `at`) of the tied entries
    `at` of one branch point, or None where numpy's own answer stands."""
    plan = _PLAN.get()
    at = np.asarray(at, dtype=bool)
    if plan is None or not np.any(at):
        return None
    n = int(np.count_nonzero(at))
    plan.sizes.append(n)
    if plan.bits is None:
        return None
    take = list(plan.bits[plan.used : plan.used + n])
    plan.used += n
    plan.overrun |= len(take) < n
    chosen = np.zeros(at.shape, dtype=bool)
    chosen[at] = take + [False] * (n - len(take))
    return chosen
