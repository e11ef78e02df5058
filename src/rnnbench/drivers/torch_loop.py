"""torch eager, plain Python loop over the model's step; ys collected in a list and stacked."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model, rollout
from rnnbench.ops import torch_ops


def loop_loss(model: Model, case: Case, consts):
    """The loss as a function of the inputs dict: rollout + loss, in torch ops."""
    ops = torch_ops()

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        ys, carry = rollout(ops, model, params, carry0, xs, case.length)
        return model.loss(ops, consts, ys, carry)

    return loss_fn


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    return _torch.prepared_from_loss(loop_loss(model, case, consts), inputs, wrt, {"mode": "eager"}, second_order=True)


DRIVER = Driver(
    name="torch_loop",
    framework="torch",
    summary="torch eager, Python for-loop",
    prepare=prepare,
    second_order=True,
    available=_torch.available,
    versions=_torch.versions,
    dtypes=("float64", "float32", "bfloat16"),
    environments=("main", "xla"),
)
