"""Mechanism: jax.lax.scan under jit: the step is traced once and lowered to an XLA while loop."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import BY_PRECISION, Case, Model, run_forward
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)

    def recur(step, params, carry0, xs, length):
        # lax.scan takes xs=None with a length, and then hands the step None
        carry, ys = jax.lax.scan(lambda c, x: step(ops, params, c, x), tuple(carry0), xs, length=length)
        return ys, carry

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        ys, carry = run_forward(ops, run_model, params, carry0, xs, case.length, recur)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"jit": True, "loop": "lax.scan", **projection})


DRIVERS = (
    Driver(
        "jax_lax_scan",
        _jax.JAX,
        "jax.jit of jax.lax.scan",
        prepare,
        dtypes=BY_PRECISION,
        repro="scan",
        **_jax.ROW_FIELDS,
    ),
)
