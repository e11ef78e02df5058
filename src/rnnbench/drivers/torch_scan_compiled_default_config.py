"""torch_scan_compiled with dynamo's default configuration (capture_scalar_outputs=False).

Exists to exercise a known issue (BUGS.md §1): torch 2.9.0's inductor cannot compile scan on CPU
unless torch._dynamo.config.capture_scalar_outputs = True (it fails on aten._local_scalar_dense),
which torch_scan_compiled sets. torch 2.13.0 compiles it either way (measured on every model), so
the two environments show the setting's effect side by side. Runs on two models only: the failure
is at compile time and does not depend on the model, so more rows would only cost compile time."""

from __future__ import annotations

from typing import Optional

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver
from rnnbench.drivers.torch_scan_compiled import make_prepare
from rnnbench.model import Model

MODELS = ("decay", "rnn")


def supports(model: Model) -> Optional[str]:
    return None if model.name in MODELS else f"configuration variant, run on {', '.join(MODELS)} only"


DRIVER = Driver(
    name="torch_scan_compiled_default_config",
    framework="torch",
    summary="torch.compile(inductor) of torch scan, capture_scalar_outputs left off",
    prepare=make_prepare(capture_scalar_outputs=False, clone_carry=True),
    available=_torch.available,
    versions=_torch.versions,
    supports=supports,
    compiled=True,
    environments=("main", "xla"),
)
