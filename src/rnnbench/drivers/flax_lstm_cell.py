"""Anchor: flax.linen nn.RNN(nn.OptimizedLSTMCell) on the canonical LSTM parameters.

Layout: for gate q in (i, f, g, o), rows q*H:(q+1)*H of W_ih / W_hh / b become cell/i<q>/kernel
(transposed, no bias), cell/h<q>/kernel (transposed) and cell/h<q>/bias. flax's carry is (c, h);
canonical is (h, c)."""

from __future__ import annotations

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, module_available, package_versions, supports_kind, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import jax_ops


def flax_lstm_params(W_ih, W_hh, b, H: int) -> dict:
    params = {}
    for q, gate in enumerate("ifgo"):
        rows = slice(q * H, (q + 1) * H)
        params[f"i{gate}"] = {"kernel": W_ih[rows].T}
        params[f"h{gate}"] = {"kernel": W_hh[rows].T, "bias": b[rows]}
    return {"params": {"cell": params}}


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import flax.linen as nn

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    H = case.params["W_hh"].shape[1]
    layer = nn.RNN(nn.OptimizedLSTMCell(features=H), time_major=True, return_carry=True)
    ops = jax_ops()

    def loss_fn(diff, rest):
        p, (h0, c0), xs = unflatten(model, case, {**diff, **rest})
        (c_T, h_T), ys = layer.apply(flax_lstm_params(p["W_ih"], p["W_hh"], p["b"], H), xs, initial_carry=(c0, h0))
        return model.loss(ops, consts, ys, (h_T, c_T))

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"layer": "flax.linen.RNN(OptimizedLSTMCell)"})


DRIVER = Driver(
    name="flax_lstm_cell",
    framework="flax",
    summary="anchor: flax nn.RNN(OptimizedLSTMCell)",
    prepare=prepare,
    second_order=True,
    available=module_available("flax"),
    versions=package_versions("flax", "jax", "jaxlib"),
    supports=supports_kind("lstm"),
    compiled=True,
    anchor=True,
)
