"""torch.compile (inductor) of the whole Python loop: dynamo unrolls the T steps into one graph,
so compile time grows with T."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_loop import loop_loss
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    settings = _torch.compile_settings()
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    compiled = torch.compile(loop_loss(model, case, consts), backend="inductor", fullgraph=True)
    return _torch.prepared_from_loss(compiled, inputs, wrt, settings)


DRIVER = Driver(
    name="torch_loop_compiled",
    framework="torch",
    summary="torch.compile(inductor) of the Python loop (unrolled)",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
)
