"""Mechanism: jax.lax.associative_scan under jit, over a model's declared linear recurrence
h_t = a_t * h_{t-1} + b_t (Model.linear_recurrence): the (a, b) pairs of all T steps are composed
by a parallel prefix (depth O(log T), work O(T)), not by a loop over the step. Models that declare
no linear recurrence are unavailable on it, with the reason."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import (
    BY_PRECISION,
    Case,
    Model,
    combine_linear,
    linear_recurrence_inputs,
    supports_linear_recurrence,
)
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        a, b = linear_recurrence_inputs(ops, model, params, carry0=carry0, xs=xs)
        _, hs = jax.lax.associative_scan(combine_linear, (a, b), axis=0)
        return model.loss(ops, consts, hs, (hs[-1],))

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"jit": True, "loop": "lax.associative_scan"})


DRIVERS = (
    Driver(
        "jax_associative_scan",
        _jax.JAX,
        "jax.jit of jax.lax.associative_scan over a declared linear recurrence",
        prepare,
        supports=supports_linear_recurrence,
        dtypes=BY_PRECISION,
        **_jax.ROW_FIELDS,
    ),
)
