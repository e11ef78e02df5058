"""torch.compile (inductor) of the loop writing each step into a preallocated buffer:
`ys.index_put_((t,), y)` (BUGS.md §5: compile has lost requires_grad through sliced assignment)."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers._torch_buffer import buffer_loss, write_index_put
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.model import Case, Model


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    settings = {**_torch.compile_settings(), "ys": "ys.index_put_((t,), y)"}
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    compiled = torch.compile(buffer_loss(model, case, consts, write_index_put), backend="inductor", fullgraph=True)
    return _torch.prepared_from_loss(compiled, inputs, wrt, settings)


DRIVER = Driver(
    name="torch_loop_index_put_compiled",
    framework="torch",
    summary="torch.compile(inductor) of the loop, ys preallocated and written by ys.index_put_((t,), y)",
    prepare=prepare,
    available=_torch.available,
    versions=_torch.versions,
    compiled=True,
    dtypes=("float64", "float32", "bfloat16"),
    suite="bugs",
)
