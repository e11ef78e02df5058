"""torch_xla, plain Python loop over the model's step on the lazy XLA device: tracing unrolls the
T steps into one graph (compiled once per shape, cached by graph hash); every call re-traces it."""

from __future__ import annotations

from rnnbench.drivers import _torch_xla
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.drivers.torch_loop import loop_loss
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch_xla.model_tensors(model, case, dtype)
    return _torch_xla.prepared_from_loss(loop_loss(model, case, consts), inputs, wrt, {"loop": "python"})


DRIVER = Driver(
    name="torch_xla_loop",
    framework="torch_xla",
    summary="torch_xla lazy tensors, Python for-loop",
    prepare=prepare,
    available=_torch_xla.available,
    versions=_torch_xla.versions,
    environments=("xla",),
    compiled=True,
    devices=("cpu",),
)
