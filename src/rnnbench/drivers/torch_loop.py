"""Mechanism: a torch Python for-loop over the model's step (model.rollout), the fastrnns shape.

Configurations (rows of DRIVERS):
- compiled: torch.compile (inductor) of the whole loop; dynamo unrolls the T steps into one graph,
  so compile time grows with T.
- ys: how step outputs become ys (T, ...): "stack" (a list, stacked at the end), or written into a
  zero-initialised preallocated buffer by "setitem" (`ys[t] = y`) or "index_put"
  (`ys.index_put_((t,), y)`): the recurrent form of docs/bugs.md §5, where compile has been
  reported to lose requires_grad through sliced assignment (missing_grad catches it).
- autocast: the loss under bf16 autocast with float32 parameters (docs/bugs.md §3), run on models
  with an fp32 island only.
- mode: torch.compile's mode; "reduce-overhead" replays the compiled program as CUDA graphs (one
  launch per graph instead of one per kernel: the launch cost an unrolled loop pays T times), so
  the row runs on CUDA only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model, rollout
from rnnbench.ops import torch_ops


def _setitem(ys: Any, t: int, y: Any) -> Any:
    ys[t] = y
    return ys


def _index_put(ys: Any, t: int, y: Any) -> Any:
    import torch

    ys.index_put_((torch.tensor([t], device=ys.device),), y.unsqueeze(0))
    return ys


# ys config -> (how the row's settings name it, the buffer write or None for a stacked list)
YS_FORMS: dict[str, tuple[str, Callable[[Any, int, Any], Any] | None]] = {
    "stack": ("list + torch.stack", None),
    "setitem": ("ys[t] = y", _setitem),
    "index_put": ("ys.index_put_((t,), y)", _index_put),
}


def loop_loss(model: Model, case: Case, consts, ys: str = "stack") -> Callable[[dict[str, Any]], Any]:
    """The loss as a function of the inputs dict: the model's rollout + loss, in torch ops."""
    ops = torch_ops()
    write = YS_FORMS[ys][1]

    def collect(buffer, t, y):
        if buffer is None:  # allocated at the first step: its shape is the step's output shape
            buffer = y.new_zeros((case.length,) + tuple(y.shape))
        return write(buffer, t, y)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        out, carry = rollout(ops, model, params, carry0, xs, case.length, None if write is None else collect)
        return model.loss(ops, consts, out, carry)

    return loss_fn


@dataclass(frozen=True)
class LoopConfig:
    compiled: bool = False
    ys: str = "stack"
    autocast: bool = False
    mode: str | None = None  # torch.compile's mode (compiled rows)


def prepare(config: LoopConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    # Under autocast the parameters stay float32 (the row's dtype names the autocast dtype).
    inputs, consts, wrt = _torch.model_tensors(model, case, "float32" if config.autocast else dtype, device)
    loss_fn = loop_loss(model, case, consts, config.ys)
    settings: dict[str, Any] = {"mode": "eager"}
    if config.compiled:
        loss_fn, settings = _torch.compiled(loss_fn, mode=config.mode)
    if config.ys != "stack":
        settings["ys"] = YS_FORMS[config.ys][0]
    if config.autocast:
        loss_fn = _torch.under_autocast(loss_fn, device)
        settings.update(autocast="bfloat16", params="float32")
    second_order = not config.compiled and not config.autocast  # torch.compile has no double backward
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings, second_order=second_order)


def _row(name: str, summary: str, config: LoopConfig, **fields) -> Driver:
    if config.autocast:
        fields.update(supports=_torch.supports_autocast, dtypes=("bfloat16",), devices=("cpu",), autocast="bfloat16")
    return Driver(
        name=name,
        framework=_torch.TORCH,
        summary=summary,
        prepare=partial(prepare, config),
        compiled=config.compiled,
        second_order=not config.compiled and not config.autocast,
        **{"dtypes": ("float64", "float32", "bfloat16"), **fields},
    )


DRIVERS = (
    _row("torch_loop", "torch eager, Python for-loop", LoopConfig(), environments=("main", "xla")),
    _row("torch_loop_compiled", "torch.compile(inductor) of the Python loop (unrolled)", LoopConfig(compiled=True)),
    _row(
        "torch_loop_compiled_cudagraphs",
        "torch.compile(inductor, mode=reduce-overhead: CUDA graphs) of the Python loop",
        LoopConfig(compiled=True, mode="reduce-overhead"),
        devices=("cuda",),
        suite="gpu",
    ),
    _row(
        "torch_loop_setitem",
        "torch eager loop, ys preallocated and written by ys[t] = y",
        LoopConfig(ys="setitem"),
        suite="bugs",
    ),
    _row(
        "torch_loop_setitem_compiled",
        "torch.compile(inductor) of the loop, ys preallocated and written by ys[t] = y",
        LoopConfig(compiled=True, ys="setitem"),
        suite="bugs",
    ),
    _row(
        "torch_loop_index_put",
        "torch eager loop, ys preallocated and written by ys.index_put_((t,), y)",
        LoopConfig(ys="index_put"),
        suite="bugs",
    ),
    _row(
        "torch_loop_index_put_compiled",
        "torch.compile(inductor) of the loop, ys preallocated and written by ys.index_put_((t,), y)",
        LoopConfig(compiled=True, ys="index_put"),
        suite="bugs",
    ),
    _row("torch_autocast_loop", "torch eager loop, bf16 autocast, fp32 parameters", LoopConfig(autocast=True)),
    _row(
        "torch_autocast_loop_compiled",
        "torch.compile(inductor) of the loop, bf16 autocast, fp32 parameters",
        LoopConfig(compiled=True, autocast=True),
    ),
)
