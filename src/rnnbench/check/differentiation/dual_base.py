"""The base arrays under the dual numbers (check/differentiation/dual.py): numpy float64 arrays, or object arrays of
mpmath numbers for the 50-digit rung. Each function dispatches on the dtype; on mpmath numbers it
gives numpy's float64 answer where mpmath would raise or leave the reals, so both rungs meet a
domain edge (sqrt and log at 0 or below, 1 / 0, 0 ** -1) the same way: with a non-finite value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_MP_FUNCTIONS: dict[str, Callable] = {}
_MP_NAMES = {"divide": "fdiv"}  # mpmath's name where it differs from numpy's


def _ieee(name: str) -> Callable:
    """mpmath's function, with numpy's float64 answer where mpmath raises (1 / 0, 0 ** -1) or leaves the
    reals (sqrt(-1), log(-1), (-2) ** 0.5): inf or nan, so the 50-digit rung meets a domain edge the
    way the float64 rungs do (a non-finite value) instead of crashing or turning complex."""
    import mpmath

    mp_f, np_f = getattr(mpmath, _MP_NAMES.get(name, name)), getattr(np, name)

    def f(*args: Any) -> Any:
        try:
            y = mp_f(*args)
        except ZeroDivisionError:
            y = None
        if y is None or isinstance(y, mpmath.mpc):
            with np.errstate(all="ignore"):
                return mpmath.mpf(float(np_f(*(np.float64(a) for a in args))))
        return y

    return f


def _base_function(name: str, arity: int = 1) -> Callable[..., Any]:
    """numpy's function, or mpmath's (_ieee) for object arrays of mpmath numbers."""
    np_f = getattr(np, name)

    def f(*xs: Any) -> Any:
        arrs = [np.asarray(x) for x in xs]
        if all(a.dtype != object for a in arrs):
            return np_f(*arrs)
        if name not in _MP_FUNCTIONS:
            _MP_FUNCTIONS[name] = np.frompyfunc(_ieee(name), arity, 1)
        return np.asarray(_MP_FUNCTIONS[name](*arrs), dtype=object)

    return f


def base_functions() -> dict[str, Callable[..., Any]]:
    """name -> the function on base arrays: the elementwise functions, divide and power."""
    unary = {name: _base_function(name) for name in ("tanh", "exp", "sin", "cos", "tan", "log", "sqrt")}
    return {**unary, **{name: _base_function(name, 2) for name in ("divide", "power")}}
