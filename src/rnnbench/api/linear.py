"""check_recurrence(linear=...): a user's declared linear recurrence h_t = a_t * h_(t-1) + b_t,
checked against the step before any driver runs, so that the associative scans (which compose the
declaration) and the oracle (which differentiates the step) judge one recurrence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.api.messages import problem
from rnnbench.api.trees import flatten, rebuild
from rnnbench.model import is_integer
from rnnbench.ops import numpy_ops

# How far the declared coefficients may sit from the step's own values and from their per-step form:
# a wrong declaration is off by the size of its values, an order of float64 operations by a few ulps
# of them (h + z (v - h) against (1 - z) h + z v; one matmul over T steps against T of them).
LINEAR_RTOL = 1e-9


def _rounded(leaf: Any, np_dtype: Any) -> np.ndarray:
    """A leaf at the value the drivers see: integer kept, float rounded to np_dtype, as float64."""
    a = np.asarray(leaf)
    return a.astype(np.int64) if is_integer(a) else a.astype(np_dtype).astype(np.float64)


def _agrees(got: Any, want: np.ndarray, scale: float, *, t: int, what: str) -> None:
    """InputError naming the first entry where the declared `got` is off the step's `want`."""
    off = np.abs(np.asarray(got, dtype=np.float64) - want) > LINEAR_RTOL * scale
    if off.any():
        index = tuple(int(i) for i in np.argwhere(off)[0])
        got_value = float(np.asarray(got, dtype=np.float64)[index])
        raise problem("linear_disagrees", t=t, what=what, got=got_value, index=index, want=float(want[index]))


def _coefficients(linear: Callable, ops: Any, params: Any, x: Any, *, shape: tuple, what: str) -> tuple:
    """(a, b) of the declaration at x, as float64 arrays of `shape`; InputError otherwise."""
    out = linear(ops, params, x)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        got = f"a {type(out).__name__}" + (f" of shape {np.shape(out)}" if hasattr(out, "shape") else "")
        raise problem("linear_return", what=what, got=got, want=shape)
    a, b = (np.asarray(c, dtype=np.float64) for c in out)
    if a.shape != shape or b.shape != shape:
        raise problem("linear_return", what=what, got=f"shapes {a.shape} and {b.shape}", want=shape)
    return a, b


def check_declaration(step: Callable, linear: Callable, *, params, carry, xs, T: int, np_dtype: Any) -> None:
    """The declared linear recurrence checked against the step, in numpy at the values the drivers see:
    one float carry leaf h and xs; at every step linear(ops, params, x_t) -> (a_t, b_t) of h's shape
    gives the step's new h = a_t h + b_t and its output y_t = h; and linear(ops, params, xs), on the
    whole sequence (every xs leaf (T, ...)), gives (a, b) of shape (T, *h.shape) equal to the
    stacked per-step coefficients (what the associative scans compose). InputError at the first
    disagreement, naming the step, the coefficient and the index."""
    leaves = flatten(carry)
    if len(leaves) != 1 or is_integer(np.asarray(leaves[0][1])):
        why = f"the carry has {len(leaves)} leaves; a linear recurrence has one float leaf h"
        raise problem("linear_shape", why=why)
    if xs is None:
        raise problem("linear_shape", why="xs is None; the coefficients are computed from the inputs x_t")
    ops = numpy_ops()
    p = rebuild(params, iter([_rounded(leaf, np_dtype) for _, leaf in flatten(params)]))
    x_leaves = [_rounded(leaf, np_dtype) for _, leaf in flatten(xs)]
    h = _rounded(leaves[0][1], np_dtype)
    shape = h.shape
    per_step = []
    for t in range(T):
        x_t = rebuild(xs, iter([leaf[t] for leaf in x_leaves]))
        a, b = _coefficients(linear, ops, p, x_t, shape=shape, what=f"params, x_{t}")
        new, y = step(ops, p, rebuild(carry, iter([h])), x_t)
        new_h = np.asarray(flatten(new)[0][1], dtype=np.float64)
        if isinstance(y, (tuple, list, dict)) or np.shape(y) != shape:
            raise problem("linear_shape", why=f"step {t}'s output y_t is not one array of h's shape {shape}")
        scale = float(np.max(np.abs(h)) + np.max(np.abs(a * h)) + np.max(np.abs(b)) + np.max(np.abs(new_h)))
        _agrees(a * h + b, new_h, scale, t=t, what="a_t * h + b_t")
        _agrees(y, new_h, scale, t=t, what="y_t (an associative scan's output is h_t)")
        per_step.append((a, b))
        h = new_h
    a_all, b_all = _coefficients(linear, ops, p, rebuild(xs, iter(x_leaves)), shape=(T, *shape), what="params, xs")
    for name, got, want in (("a", a_all, [a for a, _ in per_step]), ("b", b_all, [b for _, b in per_step])):
        want = np.stack(want)
        for t in range(T):
            _agrees(got[t], want[t], float(np.max(np.abs(want))) or 1.0, t=t, what=f"linear(params, xs)'s {name}[{t}]")
