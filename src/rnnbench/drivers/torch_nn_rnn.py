"""Anchor: torch.nn.RNN (tanh), the vendor layer, on the canonical Elman parameters.

Layout: weight_ih_l0 = W_ih, weight_hh_l0 = W_hh, bias_ih_l0 = b; bias_hh_l0 is held at zero
without grad (the canonical model has one bias)."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared, supports_kind
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    H, I = case.params["W_ih"].shape
    rnn = torch.nn.RNN(I, H, nonlinearity="tanh").to(device=device, dtype=_torch.torch_dtype(dtype))
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(inputs["W_ih"])
        rnn.weight_hh_l0.copy_(inputs["W_hh"])
        rnn.bias_ih_l0.copy_(inputs["b"])
        rnn.bias_hh_l0.zero_()
    rnn.bias_hh_l0.requires_grad_(False)
    inputs.update(W_ih=rnn.weight_ih_l0, W_hh=rnn.weight_hh_l0, b=rnn.bias_ih_l0)
    ops = torch_ops()

    def loss_fn(inputs):
        ys, h_n = rnn(inputs["xs"], inputs["carry0.h"].unsqueeze(0))
        return model.loss(ops, consts, ys, (h_n[0],))

    return _torch.prepared_from_loss(loss_fn, inputs, wrt, {"layer": "torch.nn.RNN"})


DRIVER = Driver(
    name="torch_nn_rnn",
    framework="torch",
    summary="anchor: torch.nn.RNN(tanh)",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    supports=supports_kind("elman_tanh"),
    anchor=True,
)
