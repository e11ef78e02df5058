"""jax: Python loop under jit writing each step into a preallocated buffer, `ys = ys.at[t].set(y)`
(the functional form of the BUGS.md §5 pattern)."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax.numpy as jnp

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()

    def loss_fn(diff, rest):
        params, carry, xs = unflatten(model, case, {**diff, **rest})
        if xs is not None and model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        ys = None
        for t in range(case.length):
            carry, y = model.step(ops, params, tuple(carry), None if xs is None else xs[t])
            if ys is None:
                ys = jnp.zeros((case.length,) + y.shape, dtype=y.dtype)
            ys = ys.at[t].set(y)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"jit": True, "ys": "ys.at[t].set(y)"})


DRIVER = Driver(
    name="jax_loop_buffer",
    framework="jax",
    summary="jax.jit of a Python loop, ys preallocated and written by .at[t].set",
    prepare=prepare,
    second_order=True,
    available=_jax.available,
    versions=_jax.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
    suite="bugs",
)
