"""jax: the Python loop traced under jit (XLA sees T unrolled copies of the step)."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model, rollout
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        ys, carry = rollout(ops, model, params, carry0, xs, case.length)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"jit": True, "loop": "python (unrolled)"})


DRIVER = Driver(
    name="jax_loop",
    framework="jax",
    summary="jax.jit of a Python loop (unrolled)",
    prepare=prepare,
    second_order=True,
    available=_jax.available,
    versions=_jax.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
)
