"""torch.compile (inductor) of torch._higher_order_ops.scan: the loop stays a loop in the graph,
so compile time does not grow with T.

Two settings are needed on CPU and are set and recorded here; each has a variant driver that
leaves it out, so the known-issues registry can tell when upstream no longer needs it:
- torch._dynamo.config.capture_scalar_outputs = True: torch 2.9.0's inductor otherwise fails on
  aten._local_scalar_dense (BUGS.md §1; torch_scan_compiled_default_config).
- every carry leaf cloned, not only y: torch 2.13.0's inductor otherwise refuses a recurrence whose
  carry comes from tanh/sigmoid ("scan might be aliasing the input or the output!";
  torch_scan_compiled_clone_y_only)."""

from __future__ import annotations

from typing import Callable

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_scan import scan_loss
from rnnbench.model import Case, Model


def make_prepare(capture_scalar_outputs: bool, clone_carry: bool) -> Callable[[Model, Case, str, str], Prepared]:
    def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
        import torch

        settings = _torch.compile_settings()
        torch._dynamo.config.capture_scalar_outputs = capture_scalar_outputs
        settings["torch._dynamo.config.capture_scalar_outputs"] = capture_scalar_outputs
        settings["clone_carry"] = clone_carry
        inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
        loss_fn = scan_loss(model, case, consts, clone_carry=clone_carry)
        compiled = torch.compile(loss_fn, backend="inductor", fullgraph=True)
        return _torch.prepared_from_loss(compiled, inputs, wrt, settings)

    return prepare


DRIVER = Driver(
    name="torch_scan_compiled",
    framework="torch",
    summary="torch.compile(inductor) of torch scan",
    prepare=make_prepare(capture_scalar_outputs=True, clone_carry=True),
    available=_torch.available,
    versions=_torch.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
    environments=("main", "xla"),
)
