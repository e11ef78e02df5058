"""Mechanism: flax.linen: the model's step as a cell lifted with nn.scan (the transform nn.RNN is built on).

The recurrence module owns the canonical parameters (self.param); the scanned cell receives them
broadcast, as flax RNN layers do. Gradients come back in canonical layout because the parameter
tree *is* the canonical dict."""

from __future__ import annotations

from rnnbench.drivers.base import Batch, Driver, Prepared, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import BY_PRECISION, Case, Model, run_forward, scan_inputs
from rnnbench.ops import jax_ops


def recurrence_module(model: Model, case: Case):
    """The flax module running `model` (its step lifted with nn.scan) on `case`'s shapes."""
    import flax.linen as nn
    import jax.numpy as jnp

    ops = jax_ops()

    def recur(step, params, carry0, xs, length):
        # nn.scan needs something to scan over: a trip-count recurrence scans a dummy
        xs, step_x = scan_inputs(ops, xs, length, like=carry0[0])

        class StepCell(nn.Module):
            @nn.compact
            def __call__(self, carry, params, x):
                return step(ops, params, carry, step_x(x))

        scanned = nn.scan(
            StepCell,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=(nn.broadcast, 0),
            out_axes=0,
            length=length,
        )
        carry, ys = scanned()(tuple(carry0), params, xs)
        return ys, carry

    class Recurrence(nn.Module):
        @nn.compact
        def __call__(self, carry0, xs):
            params = {k: self.param(k, lambda rng, s=v.shape: jnp.zeros(s)) for k, v in case.params.items()}
            ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
            return carry, ys

    return Recurrence()


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)
    module = recurrence_module(run_model, case)

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        carry, ys = module.apply({"params": params}, carry0, xs)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(
        loss_fn, diff, rest, {"flax": "linen nn.scan", **projection}, batch=Batch(model, case, consts)
    )


DRIVERS = (
    Driver(
        "flax_scan",
        _jax.FLAX,
        "flax.linen nn.scan of the model's step as a cell",
        prepare,
        dtypes=BY_PRECISION,
        **_jax.ROW_FIELDS,
    ),
)
