"""Mechanism: a Python loop over the model's step traced under jax.jit (model.rollout): XLA sees T
unrolled copies of the step. The loop reads xs through one jnp.unstack (no pad per step in the
backward, as x[t] would give) and runs the model's input projection hoisted, as the model is written
(one matmul before the loop). Measured against running it per step (the rule _jax.input_projection
applies to lax.scan and nn.scan from 2 MiB): in the unrolled loop hoisting is faster at every size
tried (2026-11-26, docs/profiles/jax_loop_projection.py: Elman RNN float32, one CPU, 11-21
interleaved rounds of min-of-5 calls): fwd+bwd 30.9 vs 35.2 ms at T=128 B=32 I=128 H=256 (4 MiB projected), 68.2 vs 79.9 ms at T=256
(8 MiB), 76.5 vs 87.6 ms at T=64 B=64 I=256 H=512 (8 MiB). (The unrolled LSTM at those sizes
compiles for minutes, T^2 below, and was not measured.)

Configurations (rows of DRIVERS), ys: "stack" (a list, stacked) or "at_set" (a preallocated buffer
written by `ys = ys.at[t].set(y)`, the functional form of the docs/bugs.md §5 pattern).

Measured, kept as users write it: on XLA:CPU the optimized program of a recurrence whose carry has
an elementwise-only path from step to step (the LSTM's cell state c) grows as T^2. In the backward
the cotangent of c runs dc_{t-1} = f_t * dc_t + (what comes from h) through elementwise ops only;
XLA's fusion duplicates that cheap chain into every step's gate-gradient fusion (the one feeding the
dot that makes dh), so step t's fusion recomputes the chain from T down to t. LSTM B=32 I=128 H=256,
jax 0.10.2, value_and_grad: 1891 / 6851 / 25987 / 101123 multiplies in the optimized HLO at
T=16 / 32 / 64 / 128 (x4 per doubling; fusions 219 / 427 / 906 / 1802, linear), compile 7 / 15 /
78 / 250 s; the Elman RNN, whose carry goes through the matmul every step, stays linear (258
multiplies, 6 s at T=128). Neither jax.lax.optimization_barrier on the carry per step (XLA:CPU
expands every barrier before fusion runs: 2T of them before optimization, none after, the same op
counts) nor jax.checkpoint of the step (any policy) changes it. lax.scan (jax_lax_scan) is the
idiomatic form without it: it cannot fuse across iterations.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

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


def loop_loss(model: Model, case: Case, consts, dtype: str,
              ys: str = "stack") -> tuple[Callable[[dict, dict], Any], dict[str, Any]]:
    """(the loss as a function of (differentiated inputs, other inputs): the model's rollout + loss
    in jax ops at `dtype`, the settings a row records)."""
    ops = jax_ops()
    collect = _at_set(case.length) if ys == "at_set" else None

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        out, carry = rollout(ops, model, params, carry0, xs, case.length, collect)
        return model.loss(ops, consts, out, carry)

    settings = {"jit": True, "ys": "ys.at[t].set(y)"} if collect else {"jit": True, "loop": "python (unrolled)"}
    return loss_fn, {**settings, **({"input_projection": "hoisted"} if model.prologue is not None else {})}


def prepare(ys: str, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    loss_fn, settings = loop_loss(model, case, consts, dtype, ys)
    return _jax.prepared_from_loss(loss_fn, diff, rest, settings)


DRIVERS = tuple(
    Driver(name=name, framework=_jax.JAX, summary=summary, prepare=partial(prepare, ys), second_order=True,
           compiled=True, dtypes=("float64", "float32", "bfloat16"), suite=suite)
    for name, summary, ys, suite in (
        ("jax_loop", "jax.jit of a Python loop (unrolled)", "stack", "core"),
        ("jax_loop_buffer", "jax.jit of a Python loop, ys preallocated and written by .at[t].set", "at_set", "bugs"),
    )
)
