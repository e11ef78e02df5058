"""torch.compile (inductor) of torch._higher_order_ops.scan: the loop stays a loop in the graph,
so compile time does not grow with T.

torch 2.13.0 on CPU needs torch._dynamo.config.capture_scalar_outputs = True here (BUGS.md §1:
without it, DataDependentOutputException on aten._local_scalar_dense); it is set and recorded."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_scan import scan_loss
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    settings = _torch.compile_settings()
    torch._dynamo.config.capture_scalar_outputs = True
    settings["torch._dynamo.config.capture_scalar_outputs"] = True
    settings["clone_carry"] = True
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    compiled = torch.compile(scan_loss(model, case, consts, clone_carry=True), backend="inductor", fullgraph=True)
    return _torch.prepared_from_loss(compiled, inputs, wrt, settings)


DRIVER = Driver(
    name="torch_scan_compiled",
    framework="torch",
    summary="torch.compile(inductor) of torch scan",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
    environments=("main", "xla"),
)
