"""Mechanism: jax.lax.associative_scan under jit, over a model's declared linear recurrence
h_t = a_t * h_{t-1} + b_t (Model.linear_recurrence): the (a, b) pairs of all T steps are composed
by a parallel prefix (depth O(log T), work O(T)), not by a loop over the step. Models that declare
no linear recurrence are unavailable on it, with the reason.

Configurations (rows of DRIVERS):
- reverse: associative_scan's reverse=True, the native composition from the last pair: a
  Model.reverse model composes its pairs as they are, any other model its pairs flipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.drivers.base import Batch, Prepared, configured, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import BY_PRECISION, Case, Model, linear_recurrence_states, supports_linear_recurrence
from rnnbench.ops import jax_ops


@dataclass(frozen=True)
class AssociativeConfig:
    reverse: bool = False  # associative_scan's reverse


def prepare(config: AssociativeConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()

    def scan(combine, pairs, reverse):
        return jax.lax.associative_scan(combine, pairs, reverse=reverse, axis=0)

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        hs, carry = linear_recurrence_states(
            ops, model, params, carry0=carry0, xs=xs, scan=scan, reverse=config.reverse
        )
        return model.loss(ops, consts, hs, carry)

    settings = {"jit": True, "loop": "lax.associative_scan"}
    if config.reverse:  # the default row's settings stay as its records have them
        settings["reverse"] = True
    return _jax.prepared_from_loss(loss_fn, diff, rest, settings, batch=Batch(model, case, consts))


DRIVERS = (
    configured(
        "jax_associative_scan",
        _jax.JAX,
        "jax.jit of jax.lax.associative_scan over a declared linear recurrence",
        prepare=prepare,
        config=AssociativeConfig(),
        supports=supports_linear_recurrence,
        dtypes=BY_PRECISION,
        **_jax.ROW_FIELDS,
    ),
    configured(
        "jax_associative_scan_reverse",
        _jax.JAX,
        "jax.jit of jax.lax.associative_scan(reverse=True) over a declared linear recurrence",
        prepare=prepare,
        config=AssociativeConfig(reverse=True),
        supports=supports_linear_recurrence,
        dtypes=BY_PRECISION,
        suite="bugs",
        **_jax.ROW_FIELDS,
    ),
)
