"""Mechanism: torch._higher_order_ops.while_loop over the model's step, a counter against the trip
count as its condition: the carry is (t, the model's carry leaves, ys), ys a zero buffer of T step
outputs written by index_copy at t, and x_t read by index_select at t (an index that is a tensor, so
the body is traced once for every t). torch's while_loop differentiates in reverse mode (it records
the carries of every iteration); it has no double backward, so the rows check first order only.

Configurations (rows of DRIVERS):
- compiled: torch.compile (inductor) of the loss around the loop, or eager.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnbench.drivers.base import Batch, Driver, Prepared, configured, unflatten
from rnnbench.drivers.torch import _compile as _torch_compile
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import BY_PRECISION, Case, Model, is_integer, loop_recur, run_forward, scan_inputs
from rnnbench.ops import forward_pass, numpy_ops, torch_ops


def output_shapes(model: Model, case: Case) -> list[tuple[tuple[int, ...], bool]]:
    """(shape of one step's y, whether it is integer) for each recurrence of the model's forward, in
    the order it runs them: what each loop's ys buffer is allocated as (the numpy forward of the case)."""
    ops, shapes = numpy_ops(), []

    def recording(step, params, carry0, xs, length):
        ys, carry = loop_recur(ops)(step, params, carry0, xs, length)
        shapes.append((tuple(np.shape(ys))[1:], is_integer(np.asarray(ys))))
        return ys, carry

    with forward_pass():
        run_forward(ops, model, case.params, carry0=case.carry0, xs=case.xs, length=case.length, recur=recording)
    return shapes


def while_loss(model: Model, case: Case, consts, dtype: str) -> Callable[[dict[str, Any]], Any]:
    """The loss as a function of the inputs dict, every recurrence run by while_loop."""
    import torch
    from torch._higher_order_ops.while_loop import while_loop

    ops, shapes = torch_ops(), output_shapes(model, case)
    float_dtype = _torch.torch_dtype(dtype)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        calls = iter(shapes)

        def recur(step, params, carry0, xs, length):
            shape, integer = next(calls)
            xs, step_x = scan_inputs(ops, xs, length, like=carry0[0])
            device = carry0[0].device
            ys0 = torch.zeros((length, *shape), dtype=torch.int64 if integer else float_dtype, device=device)

            def cond(t, *state):
                return t < length

            def body(t, *state):
                carry, ys = state[:-1], state[-1]
                index = t.reshape(1)
                new_carry, y = step(ops, params, carry, step_x(torch.index_select(xs, 0, index).squeeze(0)))
                # while_loop forbids outputs aliasing its inputs: a new carry leaf may be an old one,
                # x, or a closed-over parameter (lifted to an input).
                lifted = (*carry, *params.values())
                new_carry = tuple(n.clone() if any(n is i for i in lifted) else n for n in new_carry)
                return (t + 1, *new_carry, ys.index_copy(0, index, y.unsqueeze(0)))

            out = while_loop(cond, body, (torch.tensor(0, device=device), *carry0, ys0))
            return out[-1], tuple(out[1:-1])

        ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
        return model.loss(ops, consts, ys, carry)

    return loss_fn


@dataclass(frozen=True)
class WhileConfig:
    compiled: bool = False


def prepare(config: WhileConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    loss_fn = while_loss(model, case, consts, dtype)
    settings: dict[str, Any] = {"loop": "while_loop", "mode": "eager"}
    if config.compiled:
        loss_fn, compiled_settings = _torch_compile.compiled(loss_fn)
        settings = {"loop": "while_loop", **compiled_settings}
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings=settings, batch=Batch(model, case, consts))


def _row(name: str, summary: str, config: WhileConfig) -> Driver:
    return configured(
        name,
        _torch.TORCH,
        summary,
        prepare=prepare,
        config=config,
        compiled=config.compiled,
        dtypes=BY_PRECISION,
        suite="bugs",  # issue 52's mechanisms: the slow tier and `--suite bugs` run them on every core model
    )


DRIVERS = (
    _row("torch_while_loop", "torch while_loop, counter to T, ys by index_copy, eager", WhileConfig()),
    _row(
        "torch_while_loop_compiled",
        "torch.compile(inductor) of torch while_loop, counter to T, ys by index_copy",
        WhileConfig(compiled=True),
    ),
)
