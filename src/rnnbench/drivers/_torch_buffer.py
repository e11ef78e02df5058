"""Shared by the preallocated-buffer torch drivers (BUGS.md §5): the loop writes each step's output
into a zero-initialised (T, ...) buffer in place, instead of collecting a list and stacking.

Under compile, a buffer filled by sliced assignment has been reported to lose requires_grad; the
gradient checker's missing_grad status is what catches that."""

from __future__ import annotations

from typing import Any, Callable

from rnnbench.drivers.base import unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


def write_setitem(ys: Any, t: int, y: Any) -> None:
    ys[t] = y


def write_index_put(ys: Any, t: int, y: Any) -> None:
    import torch

    ys.index_put_((torch.tensor([t], device=ys.device),), y.unsqueeze(0))


def buffer_loss(model: Model, case: Case, consts, write: Callable[[Any, int, Any], None]):
    """The loss as a function of the inputs dict; ys (T, ...) is allocated at the first step (its
    shape is the step's output shape) and filled by `write`."""
    ops = torch_ops()

    def loss_fn(inputs):
        params, carry, xs = unflatten(model, case, inputs)
        if xs is not None and model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        ys = None
        for t in range(case.length):
            carry, y = model.step(ops, params, tuple(carry), None if xs is None else xs[t])
            if ys is None:
                ys = y.new_zeros((case.length,) + tuple(y.shape))
            write(ys, t, y)
        return model.loss(ops, consts, ys, carry)

    return loss_fn
