"""jax.lax.scan under jit: the step is traced once and lowered to an XLA while loop."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        if xs is not None and model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        carry, ys = jax.lax.scan(lambda c, x: model.step(ops, params, c, x), tuple(carry0), xs, length=case.length)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"jit": True, "loop": "lax.scan"})


DRIVER = Driver(
    name="jax_lax_scan",
    framework="jax",
    summary="jax.jit of jax.lax.scan",
    prepare=prepare,
    second_order=True,
    available=_jax.available,
    versions=_jax.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
)
