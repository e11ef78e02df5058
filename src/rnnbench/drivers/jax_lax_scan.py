"""Mechanism: jax.lax.scan under jit: the step is traced once and lowered to an XLA while loop.

Configurations (rows of DRIVERS):
- unroll: lax.scan's unroll, the number of steps each iteration of the while loop runs (1: one
  step per iteration). Unrolling trades a larger program for fewer loop iterations, and lets XLA
  fuse across neighbouring steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Prepared, configured, unflatten
from rnnbench.model import BY_PRECISION, Case, Model, run_forward
from rnnbench.ops import jax_ops


@dataclass(frozen=True)
class LaxScanConfig:
    unroll: int = 1  # lax.scan's unroll


def prepare(config: LaxScanConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)

    def recur(step, params, carry0, xs, length):
        # lax.scan takes xs=None with a length, and then hands the step None
        carry, ys = jax.lax.scan(
            lambda c, x: step(ops, params, c, x), tuple(carry0), xs, length=length, unroll=config.unroll
        )
        return ys, carry

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        ys, carry = run_forward(ops, run_model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
        return model.loss(ops, consts, ys, carry)

    settings = {"jit": True, "loop": "lax.scan", **projection}
    if config.unroll != 1:  # the default row's settings stay as its records have them
        settings["unroll"] = config.unroll
    return _jax.prepared_from_loss(loss_fn, diff, rest, settings)


DRIVERS = (
    configured(
        "jax_lax_scan",
        _jax.JAX,
        "jax.jit of jax.lax.scan",
        prepare=prepare,
        config=LaxScanConfig(),
        dtypes=BY_PRECISION,
        repro="scan",
        **_jax.ROW_FIELDS,
    ),
    configured(
        "jax_lax_scan_unroll8",
        _jax.JAX,
        "jax.jit of jax.lax.scan, unroll=8",
        prepare=prepare,
        config=LaxScanConfig(unroll=8),
        dtypes=BY_PRECISION,
        repro="scan",
        **_jax.ROW_FIELDS,
    ),
)
