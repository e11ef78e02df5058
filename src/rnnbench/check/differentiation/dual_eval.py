"""A model's loss evaluated on dual numbers (check/differentiation/dual.py): the exact gradient of every compared input
entry, and the exact Hessian-vector product, in float64 or at MP_DIGITS decimal digits (mpmath).

Seeding: the compared inputs' entries are numbered 0..K-1 in case.wrt_names() order; a pass seeds
the columns [lo, hi) of that numbering (at most CHUNK at once, so memory stays O(CHUNK x largest
intermediate) on models with thousands of parameters), one unit tangent per entry. The loss's
tangents are then those entries of the gradient. For H v, each input is a dual of a dual: its inner
level moves along the direction v, its outer level carries the columns; the outer tangent of the
loss is (gradient, d/d eps gradient(x + eps v)) = (g, H v).
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnbench.check.differentiation import branch_points, dual, kink_log
from rnnbench.check.differentiation.dual_interval import Escape, Interval, parts
from rnnbench.check.differentiation.finite_diff import input_value
from rnnbench.errors import InputError
from rnnbench.model import Case, Model, is_integer, rollout

CHUNK = 512  # tangent columns per forward pass
MP_DIGITS = 50  # extended precision: far beyond what float64 inputs and a fuzz-sized body need


@dataclass
class DualResult:
    """grads[name] (float64, the input's shape); hvp[name] likewise (second order only); kinked[name]:
    boolean mask of the entries whose derivative passes through a point without one; kinks: what they
    were; loss: the loss's value."""

    grads: dict[str, np.ndarray]
    kinked: dict[str, np.ndarray]
    kinks: list[str]
    loss: float
    hvp: dict[str, np.ndarray] | None = None


def to_mp(x: Any) -> np.ndarray:
    """float64 array -> object array of mpmath numbers (exactly the same values)."""
    import mpmath

    return np.asarray(np.frompyfunc(mpmath.mpf, 1, 1)(np.asarray(x, dtype=np.float64)), dtype=object)


def to_float(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


@contextlib.contextmanager
def precision(extended: bool) -> Iterator[Callable[[Any], Any]]:
    """Yields the conversion of a float64 input into the pass's base arrays."""
    if not extended:
        yield lambda x: np.asarray(x, dtype=np.float64)
        return
    import mpmath

    with mpmath.workdps(MP_DIGITS):
        yield to_mp


def _loss(model: Model, case: Case, leaf: Callable[[str, Any], Any], conv: Callable[[Any], Any]) -> Any:
    """The model's loss with every input made by leaf(name, base value). An integer input (token
    ids, a counter) stays the integer array it is: an index, with no tangent."""
    ops = dual.dual_ops()
    conv = _keeping_integers(conv)
    params = {k: leaf(k, conv(v)) for k, v in case.params.items()}
    carry0 = tuple(leaf(f"carry0.{n}", conv(c)) for n, c in zip(model.carry_names, case.carry0))
    xs = None if case.xs is None else leaf("xs", conv(case.xs))
    consts = {k: conv(v) for k, v in case.consts.items()}
    ys, carry = rollout(ops, model, params, carry0=carry0, xs=xs, length=case.length)
    return model.loss(ops, consts, ys, carry)


def _keeping_integers(conv: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """conv for float inputs; an integer array passes unconverted (float64 or mpmath values cannot index)."""
    return lambda x: x if is_integer(x) else conv(x)


_OURS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # the rnnbench package


@contextlib.contextmanager
def _refusing_unsupported() -> Iterator[None]:
    """A step that applies to a differentiated value what the dual numbers do not define (a numpy
    function such as np.sin, `//`, float(), an array method) fails inside the step's own line with
    TypeError or AttributeError, before any driver has run: refused as an InputError in one line,
    naming that line. An error raised inside this package's own code is a bug of ours: raised as
    it is."""
    try:
        yield
    except (TypeError, AttributeError) as e:
        frames = traceback.extract_tb(e.__traceback__)
        if not isinstance(e, dual.Unsupported) and os.path.abspath(frames[-1].filename).startswith(_OURS):
            raise
        step = [
            f
            for f in frames
            if not os.path.abspath(f.filename).startswith(_OURS) and f"{os.sep}numpy{os.sep}" not in f.filename
        ]
        where = f"{step[-1].filename}:{step[-1].lineno}" if step else "the step"
        code = f"`{step[-1].line}` ({where})" if step and step[-1].line else where
        said = " ".join(str(e).split())
        raise InputError(
            f"the exact oracle's dual numbers cannot differentiate {code}: {said}; "
            "write the step with the ops and operators of docs/api.md ('The ops a step may use')"
        ) from e


def _columns(shapes: Mapping[str, tuple]) -> dict[str, tuple[int, int]]:
    """name -> (first column, entries)."""
    out, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape, dtype=int))
        out[name], offset = (offset, size), offset + size
    return out


def _seed(shape: tuple, first: int, lo: int, hi: int) -> np.ndarray | None:
    """Unit tangents (hi - lo, *shape) for the input's entries among columns [lo, hi), or None."""
    size = int(np.prod(shape, dtype=int))
    start, stop = max(lo, first), min(hi, first + size)
    if start >= stop:
        return None
    t = np.zeros((hi - lo, size))
    j = np.arange(start, stop)
    t[j - lo, j - first] = 1.0
    return t.reshape((hi - lo,) + tuple(shape))


def evaluate(
    model: Model,
    case: Case,
    names: Sequence[str],
    *,
    extended: bool = False,
    direction: Mapping[str, np.ndarray] | None = None,
) -> DualResult:
    """Exact d loss / d input for `names` (and H v along `direction` when given), by dual numbers."""
    shapes = {n: np.shape(input_value(model, case, n)) for n in names}
    cols = _columns(shapes)
    K = sum(size for _, size in cols.values())
    flat_g, flat_hv, kinked = np.zeros(K), np.zeros(K), np.zeros(K, dtype=bool)
    what: list[str] = []
    loss_value = float("nan")
    if direction is not None and K <= CHUNK:  # an `along` pass (branch_points) reads v over the columns
        branch_points.set_direction(
            np.concatenate([np.ravel(direction.get(n, np.zeros(shapes[n]))) for n in names] or [np.zeros(0)])
        )
    with precision(extended) as conv:
        for lo in range(0, max(K, 1), CHUNK):
            hi = min(K, lo + CHUNK)

            def leaf(name: str, x: Any, lo: int = lo, hi: int = hi) -> Any:  # this chunk's columns
                seed = _seed(shapes[name], cols[name][0], lo, hi) if name in cols else None
                inner = (
                    x
                    if direction is None or name not in direction
                    else dual.Dual(x, conv(np.asarray(direction[name])[None]), 1)
                )
                if seed is None:
                    return inner
                return dual.Dual(inner, seed, 1 if direction is None else 2)

            # a tangent that overflows or meets 0 * inf is a non-finite entry, handled by the ladder
            with kink_log.kinks() as found, np.errstate(all="ignore"), _refusing_unsupported():
                loss = _loss(model, case, leaf, conv)
            top = 1 if direction is None else 2
            value, tangent = (loss.value, loss.tangent) if dual.level(loss) == top else (loss, None)
            loss_value = float(to_float(dual.primal(value)))
            if tangent is not None:
                inner_level = dual.level(tangent) == 1
                flat_g[lo:hi] = to_float(dual.primal(tangent)).reshape(-1)
                if direction is not None and inner_level:
                    flat_hv[lo:hi] = to_float(dual.primal(tangent.tangent)).reshape(-1)
            for kind, mask in found:
                kinked[lo:hi] |= mask
                what.append(kind)

    def per_name(flat: np.ndarray) -> dict[str, np.ndarray]:
        return {n: flat[first : first + size].reshape(shapes[n]).copy() for n, (first, size) in cols.items()}

    return DualResult(
        per_name(flat_g),
        kinked=per_name(kinked),
        kinks=sorted(set(what)),
        loss=loss_value,
        hvp=per_name(flat_hv) if direction is not None else None,
    )


def evaluate_hull(model: Model, case: Case, names: Sequence[str]) -> tuple[dict, dict] | str:
    """Interval tangents (check/differentiation/dual_interval.py) in one float64 pass inside branch_points.hulling():
    (lo, hi) per name, the input's shape, enclosing every value the chain rule gives with each tie's
    side anywhere between its one-sided derivatives (NaN where not finite); a str (why) where the
    pass cannot bound them (more compared entries than one pass holds, a tie's mask used other than
    by `where`, a jump at a tie, an op with no interval rule)."""
    shapes = {n: np.shape(input_value(model, case, n)) for n in names}
    cols = _columns(shapes)
    K = sum(size for _, size in cols.values())
    if K > CHUNK:
        return f"{K} compared entries: more than one pass holds ({CHUNK})"

    def leaf(name: str, x: Any) -> Any:
        seed = _seed(shapes[name], cols[name][0], 0, K) if name in cols else None
        return x if seed is None else dual.Dual(x, Interval(seed, np.zeros_like(seed)), 1)

    with branch_points.hulling() as plan, np.errstate(all="ignore"):
        try:
            loss = _loss(model, case, leaf, lambda x: np.asarray(x, dtype=np.float64))
        except Escape as e:
            return f"interval tangents: {e}"
    if plan.lost:
        return f"interval tangents: {plan.lost}"
    t = loss.tangent if dual.level(loss) == 1 else np.zeros(K)  # a loss no seeded entry reaches: 0
    c, r = (np.reshape(np.asarray(x, dtype=np.float64), -1) for x in parts(t))
    lo, hi = c - r, c + r
    bad = ~(np.isfinite(lo) & np.isfinite(hi))
    lo[bad], hi[bad] = np.nan, np.nan
    return (
        {n: lo[first : first + size].reshape(shapes[n]) for n, (first, size) in cols.items()},
        {n: hi[first : first + size].reshape(shapes[n]) for n, (first, size) in cols.items()},
    )
