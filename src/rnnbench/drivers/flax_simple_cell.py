"""Anchor: flax.linen nn.RNN(nn.SimpleCell) (tanh) on the canonical Elman parameters.

Layout: cell/i/kernel = W_ih.T, cell/i/bias = b, cell/h/kernel = W_hh.T (no bias). The mapping
is done inside the differentiated function, so jax returns canonical gradients directly."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, module_available, package_versions, supports_kind, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import jax_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import flax.linen as nn

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    H = case.params["W_hh"].shape[0]
    layer = nn.RNN(nn.SimpleCell(features=H), time_major=True, return_carry=True)
    ops = jax_ops()

    def loss_fn(diff, rest):
        p, (h0,), xs = unflatten(model, case, {**diff, **rest})
        variables = {"params": {"cell": {"i": {"kernel": p["W_ih"].T, "bias": p["b"]}, "h": {"kernel": p["W_hh"].T}}}}
        h_T, ys = layer.apply(variables, xs, initial_carry=h0)
        return model.loss(ops, consts, ys, (h_T,))

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"layer": "flax.linen.RNN(SimpleCell)"})


DRIVER = Driver(
    name="flax_simple_cell",
    framework="flax",
    summary="anchor: flax nn.RNN(SimpleCell)",
    prepare=prepare,
    second_order=True,
    available=module_available("flax"),
    versions=package_versions("flax", "jax", "jaxlib"),
    supports=supports_kind("elman_tanh"),
    compiled=True,
    anchor=True,
)
