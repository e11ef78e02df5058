"""torch eager loop under bf16 autocast with float32 parameters (mixed precision; BUGS.md §3)."""

from __future__ import annotations

from rnnbench.drivers import _torch, _torch_autocast
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_loop import loop_loss
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch.model_tensors(model, case, "float32", device)
    loss_fn = _torch_autocast.under_autocast(loop_loss(model, case, consts), device)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, {"mode": "eager", "autocast": "bfloat16", "params": "float32"})


DRIVER = Driver(
    name="torch_autocast_loop",
    framework="torch",
    summary="torch eager loop, bf16 autocast, fp32 parameters",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    supports=_torch_autocast.supports,
    dtypes=("bfloat16",),
    devices=("cpu",),
    autocast="bfloat16",
)
