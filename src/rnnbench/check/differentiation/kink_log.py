"""The points without a derivative that the dual numbers (check/differentiation/dual.py) met: abs and sqrt at 0, a
power at 0, a comparison at an exact tie. Inside `kinks()` each is recorded with the tangent columns
it touches (the seeded entries whose derivative passes through it), so the oracle does not trust
those columns (check/oracles/oracle.py falls back). check/differentiation/branch_points.py decides which
side each is taken on; this module only records that it was met. Plain arrays only: the rules in
check/differentiation/dual.py hand over the mask and the top level's tangent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import numpy as np

_KINKS: ContextVar[list | None] = ContextVar("rnnbench_dual_kinks", default=None)


@contextlib.contextmanager
def kinks() -> Iterator[list]:
    """Collects (what, columns) for every point without a derivative met inside: columns is a
    boolean array over the top level's K tangents (the seeded entries whose derivative passes
    through the kink), or None for all of them (a kink seen below the top level)."""
    found: list = []
    token = _KINKS.set(found)
    try:
        yield found
    finally:
        _KINKS.reset(token)


def collecting() -> bool:
    """Whether a `kinks()` block is open (only then is it worth finding the columns a tie touches)."""
    return _KINKS.get() is not None


def kink_at(at: np.ndarray, t: np.ndarray, what: str, *, every_column: bool) -> None:
    """Records `what` where `at` (a boolean array of the value's shape S) holds: the columns of the
    top level's tangent base array t (K, *S, or fewer trailing axes broadcast to S) nonzero there.
    every_column: a lower level moves too, so every column passes through the kink."""
    found = _KINKS.get()
    if found is None or not np.any(at):
        return
    t = np.broadcast_to(t, (t.shape[0],) + at.shape) if np.ndim(t) - 1 < at.ndim else t
    cols = np.any(np.reshape(t[:, at] != 0, (t.shape[0], -1)), axis=1) if t.ndim > 1 else t != 0
    if every_column:
        cols = np.ones(t.shape[0], dtype=bool)
    if np.any(cols):
        found.append((what, cols))


def tie_met(cols: np.ndarray) -> None:
    """Records a comparison at an exact tie: cols (K,) the top level's columns along which either
    side moves there; none moving (sides stationary at the tie, x * x > 0 at x == 0) leaves which
    columns reach it unknown."""
    found = _KINKS.get()
    if found is None:
        return
    if np.any(cols):
        found.append(("a comparison at equality", cols))
    else:
        found.append(("a comparison at equality of stationary values", np.ones(1, dtype=bool)))
