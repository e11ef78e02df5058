"""Mechanism: a Python loop over the model's step traced under jax.jit (model.rollout): XLA sees T
unrolled copies of the step. The loop reads xs through one jnp.unstack (no pad per step in the
backward, as x[t] would give) and runs the model's input projection hoisted, as the model is written
(one matmul before the loop): unlike the scans (_jax.input_projection), the unrolled loop was faster
hoisted at every size measured (docs/measuring.md#the-idiomatic-comparison, "The input projection").

Configurations (rows of DRIVERS), ys: "stack" (a list, stacked) or "at_set" (a preallocated buffer
written by `ys = ys.at[t].set(y)`, the functional form of the docs/bugs.md §5 pattern).

Kept as users write it, though on XLA:CPU the optimized program of a recurrence whose carry has an
elementwise-only path from step to step (the LSTM's cell state c) grows as T^2: XLA's fusion
duplicates the backward's cheap cotangent chain of c into every step's gate-gradient fusion, so
step t recomputes the chain from T down to t. Neither jax.lax.optimization_barrier on the carry nor
jax.checkpoint of the step changes it; lax.scan (jax_lax_scan) is the idiomatic form without it.
The op counts and compile times: docs/measuring.md#what-remains-above-11-and-the-measured-cause.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rnnbench.drivers.base import Batch, Prepared, configured, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import BY_PRECISION, Case, Model, rollout
from rnnbench.ops import jax_ops


def _at_set(length: int):
    import jax.numpy as jnp

    def collect(ys, t, y):
        if ys is None:
            ys = jnp.zeros((length,) + y.shape, dtype=y.dtype)
        return ys.at[t].set(y)

    return collect


def loop_loss(
    model: Model, case: Case, consts, *, dtype: str, ys: str = "stack"
) -> tuple[Callable[[dict, dict], Any], dict[str, Any]]:
    """(the loss as a function of (differentiated inputs, other inputs): the model's rollout + loss
    in jax ops at `dtype`, the settings a row records)."""
    ops = jax_ops()
    collect = _at_set(case.length) if ys == "at_set" else None

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        out, carry = rollout(ops, model, params, carry0=carry0, xs=xs, length=case.length, collect=collect)
        return model.loss(ops, consts, out, carry)

    settings = {"jit": True, "ys": "ys.at[t].set(y)"} if collect else {"jit": True, "loop": "python (unrolled)"}
    return loss_fn, {**settings, **({"input_projection": "hoisted"} if model.prologue is not None else {})}


def prepare(ys: str, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    loss_fn, settings = loop_loss(model, case, consts, dtype=dtype, ys=ys)
    return _jax.prepared_from_loss(loss_fn, diff, rest, settings, batch=Batch(model, case, consts))


DRIVERS = tuple(
    configured(
        name,
        _jax.JAX,
        summary,
        prepare=prepare,
        config=ys,
        dtypes=BY_PRECISION,
        suite=suite,
        repro=repro,
        **_jax.ROW_FIELDS,
    )
    for name, summary, ys, suite, repro in (
        ("jax_loop", "jax.jit of a Python loop (unrolled)", "stack", "core", "loop"),
        (
            "jax_loop_buffer",
            "jax.jit of a Python loop, ys preallocated and written by .at[t].set",
            "at_set",
            "bugs",
            None,
        ),
    )
)
