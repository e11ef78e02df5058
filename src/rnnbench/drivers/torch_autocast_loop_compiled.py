"""torch.compile (inductor) of the loop under bf16 autocast with float32 parameters. The compiled
backward of an inner autocast(enabled=False) region has been seen to run in bf16 (BUGS.md §3)."""

from __future__ import annotations

from rnnbench.drivers import _torch, _torch_autocast
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_loop import loop_loss
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    settings = {**_torch.compile_settings(), "autocast": "bfloat16", "params": "float32"}
    inputs, consts, wrt = _torch.model_tensors(model, case, "float32", device)
    compiled = torch.compile(loop_loss(model, case, consts), backend="inductor", fullgraph=True)
    # autocast outside the compiled function, as in the BUGS.md §3 report.
    loss_fn = _torch_autocast.under_autocast(compiled, device)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings)


DRIVER = Driver(
    name="torch_autocast_loop_compiled",
    framework="torch",
    summary="torch.compile(inductor) of the loop, bf16 autocast, fp32 parameters",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    supports=_torch_autocast.supports,
    compiled=True,
    dtypes=("bfloat16",),
    devices=("cpu",),
    autocast="bfloat16",
)
