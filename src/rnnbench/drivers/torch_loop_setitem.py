"""torch eager Python loop writing each step into a preallocated buffer: `ys[t] = y` (BUGS.md §5)."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers._torch_buffer import buffer_loss, write_setitem
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    loss_fn = buffer_loss(model, case, consts, write_setitem)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, {"mode": "eager", "ys": "ys[t] = y"}, second_order=True)


DRIVER = Driver(
    name="torch_loop_setitem",
    framework="torch",
    summary="torch eager loop, ys preallocated and written by ys[t] = y",
    prepare=prepare,
    second_order=True,
    available=_torch.available,
    versions=_torch.versions,
    dtypes=("float64", "float32", "bfloat16"),
    suite="bugs",
)
