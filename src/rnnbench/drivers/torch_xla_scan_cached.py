"""torch_xla.experimental.scan with its tracing cache on (is_fn_pure=True): the AOTAutograd trace
of the step is cached by the step function's identity and the carry/xs shapes, so steady-state
calls skip re-tracing (about 8x faster forward+backward on CPU than torch_xla_scan). Parameters
travel through the carry, as in torch_xla_scan (its scan cannot close over tensors, BUGS.md §2)."""

from __future__ import annotations

from rnnbench.drivers import _torch_xla
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_xla_scan import prepare_scan
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    return prepare_scan(model, case, dtype, is_fn_pure=True)


DRIVER = Driver(
    name="torch_xla_scan_cached",
    framework="torch_xla",
    summary="torch_xla.experimental.scan, params in carry, tracing cache (is_fn_pure=True)",
    prepare=prepare,
    available=_torch_xla.available,
    versions=_torch_xla.versions,
    environments=("xla",),
    compiled=True,
    devices=("cpu",),
)
