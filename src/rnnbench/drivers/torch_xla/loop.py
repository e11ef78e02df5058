"""Mechanism: a plain Python loop over the model's step on torch_xla's lazy XLA device (the torch
loop's loss, torch_loop.loop_loss): tracing unrolls the T steps into one graph, compiled once per
shape and cached by graph hash; every call re-traces it."""

from __future__ import annotations

from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch.loop import loop_loss
from rnnbench.drivers.torch_xla import _framework as _torch_xla
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch_xla.model_tensors(model, case, dtype)
    return _torch_xla.prepared_from_loss(loop_loss(model, case, consts), inputs, wrt, {"loop": "python"})


DRIVERS = (
    Driver(
        name="torch_xla_loop",
        framework=_torch_xla.TORCH_XLA,
        summary="torch_xla lazy tensors, Python for-loop",
        prepare=prepare,
        environments=("xla",),
        compiled=True,
        devices=("cpu",),
    ),
)
