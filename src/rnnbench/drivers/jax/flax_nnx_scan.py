"""Mechanism: flax NNX (flax's current module API): the model's step lifted with nnx.scan (carry,
broadcast parameters, scanned xs); flax.linen's nn.scan is drivers/jax/flax_scan.py. The parameters are
plain arrays passed to the scanned function, so jax returns canonical gradients."""

from __future__ import annotations

from rnnbench.drivers.base import Batch, Driver, Prepared, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import BY_PRECISION, Case, Model, run_forward, scan_inputs
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    from flax import nnx

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)

    def recur(step, params, carry0, xs, length):
        # nnx.scan needs something to scan over: a trip-count recurrence scans a dummy
        xs, step_x = scan_inputs(ops, xs, length, like=carry0[0])

        @nnx.scan(in_axes=(nnx.Carry, None, 0), out_axes=(nnx.Carry, 0), length=length)
        def scanned(carry, params, x):
            return step(ops, params, carry, step_x(x))

        carry, ys = scanned(tuple(carry0), params, xs)
        return ys, carry

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        ys, carry = run_forward(ops, run_model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(
        loss_fn, diff, rest, {"flax": "nnx.scan", **projection}, batch=Batch(model, case, consts)
    )


DRIVERS = (
    Driver(
        "flax_nnx_scan",
        _jax.FLAX,
        "flax nnx.scan of the model's step",
        prepare,
        dtypes=BY_PRECISION,
        **_jax.ROW_FIELDS,
    ),
)
