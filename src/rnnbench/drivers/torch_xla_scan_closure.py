"""torch_xla.experimental.scan with the idiomatic body that closes over the parameters (as
torch_scan does). torch_xla 2.9.0 cannot trace it (BUGS.md §2): AOTAutograd meets a captured XLA
tensor and fails with "Please convert all Tensors to FakeTensors first". It runs so that the
known-issues registry sees that failure on every run (and notices when it stops happening); a
model without parameters captures nothing and runs correctly."""

from __future__ import annotations

from rnnbench.drivers import _torch_xla
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch
    from torch_xla.experimental.scan import scan

    inputs, consts, wrt = _torch_xla.model_tensors(model, case, dtype)
    ops = torch_ops()
    has_xs = case.xs is not None

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        if has_xs and model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        if not has_xs:
            xs = torch.zeros(case.length, 1, dtype=carry0[0].dtype, device=carry0[0].device)

        def step(carry, x):  # closes over `params`: the form torch_xla cannot trace
            new_carry, y = model.step(ops, params, tuple(carry), x if has_xs else None)
            return tuple(new_carry), y

        carry, ys = scan(step, tuple(carry0), xs)
        return model.loss(ops, consts, ys, tuple(carry))

    settings = {"loop": "torch_xla.experimental.scan", "is_fn_pure": False, "params_via": "closure"}
    return _torch_xla.prepared_from_loss(loss_fn, inputs, wrt, settings)


DRIVER = Driver(
    name="torch_xla_scan_closure",
    framework="torch_xla",
    summary="torch_xla.experimental.scan, body closes over params (BUGS.md §2: cannot trace)",
    prepare=prepare,
    available=_torch_xla.available,
    versions=_torch_xla.versions,
    environments=("xla",),
    compiled=True,
    devices=("cpu",),
)
