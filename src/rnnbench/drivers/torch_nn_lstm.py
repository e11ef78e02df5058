"""Anchor: torch.nn.LSTM, the vendor layer, on the canonical LSTM parameters.

Layout: weight_ih_l0 = W_ih, weight_hh_l0 = W_hh (gate order i, f, g, o, as canonical),
bias_ih_l0 = b; bias_hh_l0 is held at zero without grad."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared, supports_kind
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    H4, I = case.params["W_ih"].shape
    lstm = torch.nn.LSTM(I, H4 // 4).to(device=device, dtype=_torch.torch_dtype(dtype))
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(inputs["W_ih"])
        lstm.weight_hh_l0.copy_(inputs["W_hh"])
        lstm.bias_ih_l0.copy_(inputs["b"])
        lstm.bias_hh_l0.zero_()
    lstm.bias_hh_l0.requires_grad_(False)
    inputs.update(W_ih=lstm.weight_ih_l0, W_hh=lstm.weight_hh_l0, b=lstm.bias_ih_l0)
    ops = torch_ops()

    def loss_fn(inputs):
        h0, c0 = inputs["carry0.h"].unsqueeze(0), inputs["carry0.c"].unsqueeze(0)
        ys, (h_n, c_n) = lstm(inputs["xs"], (h0, c0))
        return model.loss(ops, consts, ys, (h_n[0], c_n[0]))

    return _torch.prepared_from_loss(loss_fn, inputs, wrt, {"layer": "torch.nn.LSTM"})


DRIVER = Driver(
    name="torch_nn_lstm",
    framework="torch",
    summary="anchor: torch.nn.LSTM",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    supports=supports_kind("lstm"),
    anchor=True,
)
