"""Mechanism: jax.lax.fori_loop under jit with static bounds (0, T): jax lowers it to a scan over
the trip count, so it differentiates in reverse mode (a fori_loop with traced bounds lowers to a
while loop, which does not). The carry is (the model's carry leaves, ys), ys a zero buffer of T step
outputs written by dynamic_update_index_in_dim at t, and x_t read by dynamic_index_in_dim at t: the
shape of a while loop written by hand, not a scan over xs."""

from __future__ import annotations

from rnnbench.drivers.base import Batch, Driver, Prepared, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import BY_PRECISION, Case, Model, run_forward
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax
    import jax.numpy as jnp

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)

    def recur(step, params, carry0, xs, length):
        def x_at(t):
            return None if xs is None else jax.lax.dynamic_index_in_dim(xs, t, keepdims=False)

        y = jax.eval_shape(lambda c, x: step(ops, params, c, x)[1], tuple(carry0), x_at(0))

        def body(t, state):
            carry, ys = state
            carry, y = step(ops, params, carry, x_at(t))
            return carry, jax.lax.dynamic_update_index_in_dim(ys, y, t, 0)

        # Python ints as bounds: static, so fori_loop lowers to a scan (reverse-differentiable)
        carry, ys = jax.lax.fori_loop(0, length, body, (tuple(carry0), jnp.zeros((length, *y.shape), y.dtype)))
        return ys, carry

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        ys, carry = run_forward(ops, run_model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(
        loss_fn, diff, rest, {"jit": True, "loop": "lax.fori_loop", **projection}, batch=Batch(model, case, consts)
    )


DRIVERS = (
    Driver(
        "jax_fori_loop",
        _jax.JAX,
        "jax.jit of jax.lax.fori_loop(0, T) (static bounds: a scan), ys by dynamic_update_index_in_dim",
        prepare,
        dtypes=BY_PRECISION,
        suite="bugs",  # issue 52's mechanisms: the slow tier and `--suite bugs` run them on every core model
        **_jax.ROW_FIELDS,
    ),
)
