"""Mechanism: a Python loop over the model's step traced under jax.jit (model.rollout): XLA sees T
unrolled copies of the step.

Configurations (rows of DRIVERS), ys: "stack" (a list, stacked) or "at_set" (a preallocated buffer
written by `ys = ys.at[t].set(y)`, the functional form of the docs/bugs.md §5 pattern).
"""

from __future__ import annotations

from functools import partial

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model, rollout
from rnnbench.ops import jax_ops


def _at_set(length: int):
    import jax.numpy as jnp

    def collect(ys, t, y):
        if ys is None:
            ys = jnp.zeros((length,) + y.shape, dtype=y.dtype)
        return ys.at[t].set(y)

    return collect


def prepare(ys: str, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    collect = _at_set(case.length) if ys == "at_set" else None

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        out, carry = rollout(ops, model, params, carry0, xs, case.length, collect)
        return model.loss(ops, consts, out, carry)

    settings = {"jit": True, "ys": "ys.at[t].set(y)"} if collect else {"jit": True, "loop": "python (unrolled)"}
    return _jax.prepared_from_loss(loss_fn, diff, rest, settings)


DRIVERS = tuple(
    Driver(name=name, framework=_jax.JAX, summary=summary, prepare=partial(prepare, ys), second_order=True,
           compiled=True, dtypes=("float64", "float32", "bfloat16"), suite=suite)
    for name, summary, ys, suite in (
        ("jax_loop", "jax.jit of a Python loop (unrolled)", "stack", "core"),
        ("jax_loop_buffer", "jax.jit of a Python loop, ys preallocated and written by .at[t].set", "at_set", "bugs"),
    )
)
