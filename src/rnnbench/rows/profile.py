"""Where a row's time went: a profile of its forward+backward, taken in a pass of its own after the
row was timed (so no profiler ever runs inside a timed sample), kept in the record's `profile`.

Three views, each one a {name: number} table:
  python  cProfile of `calls` calls: each function's own time (tottime) in ms per call, named
          `file:function` (no line numbers: a function keeps its name when lines move between two
          commits, so two sides' tables line up)
  ops     the framework's op profiler where it has one (torch.profiler key_averages: each aten
          op's self CPU time in ms per call; Framework.op_profile)
  hlo     the compiler's cost of the compiled forward+backward program where it compiles one
          (jax: XLA's HLO cost analysis, flops and bytes accessed; Prepared.cost_analysis)
The op and Python views are taken PASSES times and each entry keeps its least value over the passes
(other work on a busy machine only adds to an entry, as it only adds to a timed call's CPU time);
each table keeps its TOP largest entries. rnnbench.report.compare.profile_diff lines two sides' tables up.
"""

from __future__ import annotations

import cProfile
import os
import pstats
from collections.abc import Callable
from typing import Any

from rnnbench.drivers.base import Framework, Prepared

CALLS = 10  # calls profiled per pass: enough for per-call times of ms-sized steps, seconds at most
PASSES = 3  # passes per view: an entry's least value over them (module docstring)
TOP = 40  # entries kept per view (the largest): a record stays small, and the diff needs only the top


def _function_name(key: tuple[str, int, str]) -> str:
    """pstats' (file, line, function) as `file:function` (a built-in: its own name)."""
    path, _line, function = key
    if path == "~":  # built-ins: "<built-in method torch.mm>", "<method 'item' of ...>"
        return function
    return f"{os.path.basename(path)}:{function}"


def python_profile(fn: Callable[[], Any], block: Callable[[Any], None], calls: int) -> dict[str, float]:
    """{file:function: own time in ms per call} of `calls` blocked calls of fn under cProfile."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        for _ in range(calls):
            block(fn())
    finally:
        profiler.disable()
    out: dict[str, float] = {}
    for key, (_cc, _nc, tottime, _ct, _callers) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        name = _function_name(key)
        out[name] = out.get(name, 0.0) + tottime * 1e3 / calls
    return out


def _top(table: dict[str, float], top: int = TOP) -> dict[str, float]:
    """The `top` entries of largest magnitude, largest first, rounded to 4 significant digits."""
    kept = sorted(table.items(), key=lambda kv: -abs(kv[1]))[:top]
    return {k: float(f"{v:.4g}") for k, v in kept if v}


def least(tables: list[dict[str, float]]) -> dict[str, float]:
    """Each name's least value over the tables (0 where a table lacks it)."""
    names = set().union(*tables) if tables else set()
    return {name: min(t.get(name, 0.0) for t in tables) for name in names}


def profile(prepared: Prepared, framework: Framework, calls: int = CALLS, passes: int = PASSES) -> dict[str, Any]:
    """The record's `profile` of a prepared row (module docstring). Call it after the row's timing."""
    fn, block = prepared.forward_backward, prepared.block
    block(fn())  # one call first: a profile of steady state, never of a compile
    python = least([python_profile(fn, block, calls) for _ in range(passes)])
    out: dict[str, Any] = {"calls": calls, "passes": passes, "python": _top(python)}
    if framework.op_profile is not None:
        out["ops"] = _top(least([framework.op_profile(fn, block, calls) for _ in range(passes)]))
    if prepared.cost_analysis is not None:
        out["hlo"] = _top(prepared.cost_analysis())
    return out
