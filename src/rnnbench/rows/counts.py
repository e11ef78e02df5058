"""A row's own counts, beside its analytic FLOPs (Model.flops): the bytes one call must move and the
dispatches it makes, the numbers its binding ceiling is formed from (rnnbench.machine.binding).

bytes: from the case's arrays at the row's dtype: weights (every parameter), the carry (every carry
leaf, read and written each step) and one step's input slice. A step's working set is weights + 2 x
carry + input: the level of memory it fits in decides the bandwidth it is held against. A forward
reads that much per step (T steps); a forward+backward at least twice (the backward reads the
weights and the step's activations again). It is the least a step must move, not what it does.

dispatch: the framework layer's count over one blocked forward+backward call (Framework.dispatch_count:
torch's profiler, jax's jaxpr), taken after the row's timing, in a pass of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rnnbench.drivers.base import Framework, Prepared
from rnnbench.model import Case, is_integer, numpy_dtype

BYTES_METHOD = (
    "weights (every parameter) + 2 x carry (read and written) + one step's input, at the row's dtype: the "
    "working set per step; fwd = T x it, fwd_bwd = 2 x fwd (the backward reads weights and activations again)"
)


def _bytes(arrays: Any, itemsize: int) -> int:
    return int(sum(np.asarray(a).size * itemsize for a in arrays if not is_integer(np.asarray(a))))


def traffic(case: Case, dtype: str) -> dict[str, Any]:
    """The record's counts.bytes (module docstring): {"weights", "carry", "step_input", "per_step",
    "steps", "fwd", "fwd_bwd", "method"}, in bytes."""
    itemsize = np.dtype(numpy_dtype(dtype)).itemsize
    weights = _bytes(case.params.values(), itemsize)
    carry = _bytes(case.carry0, itemsize)
    step_input = _bytes([case.xs[0]], itemsize) if case.xs is not None and len(case.xs) else 0
    per_step = weights + 2 * carry + step_input
    fwd = case.length * per_step
    return {
        "weights": weights,
        "carry": carry,
        "step_input": step_input,
        "per_step": per_step,
        "steps": case.length,
        "fwd": fwd,
        "fwd_bwd": 2 * fwd,
        "method": BYTES_METHOD,
    }


def dispatches(prepared: Prepared, framework: Framework) -> dict[str, Any]:
    """The record's counts.dispatch: {"fwd_bwd": {floor name: count}} of one blocked
    forward+backward call, or {"error": why} where the framework has no count or counting failed."""
    if framework.dispatch_count is None:
        return {"error": f"{framework.name} has no dispatch count"}
    try:
        return {"fwd_bwd": framework.dispatch_count(prepared.forward_backward, prepared.block)}
    except Exception as exc:  # a count that cannot be taken leaves the row without a dispatch bound, said
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def counts(prepared: Prepared, framework: Framework, case: Case, dtype: str) -> dict[str, Any]:
    """The record's `counts`: bytes and dispatches (module docstring)."""
    return {"bytes": traffic(case, dtype), "dispatch": dispatches(prepared, framework)}
