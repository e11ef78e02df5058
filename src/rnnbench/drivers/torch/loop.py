"""Mechanism: a torch Python for-loop over the model's step (model.rollout), the fastrnns shape.

Configurations (rows of DRIVERS):
- compiled: torch.compile (inductor) of the whole loop; dynamo unrolls the T steps into one graph,
  so compile time grows with T.
- ys: how step outputs become ys (T, ...): "stack" (a list, stacked at the end), or written into a
  zero-initialised preallocated buffer by "setitem" (`ys[t] = y`) or "index_put"
  (`ys.index_put_((t,), y)`): the recurrent form of docs/bugs.md §5, where compile has been
  reported to lose requires_grad through sliced assignment (missing_grad catches it). The
  expanded forms start from a buffer made by `expand` of a 0-d zero (stride 0 on every axis) and
  write it out of place, `ys = ys.slice_scatter(y[None], 0, t, t + 1)` or `ys = ys.index_put((t,),
  y[None])` (an expanded tensor cannot be written in place): the buffer of pytorch#180164, where a
  slice_scatter's output inherited its broadcast input's strides and inductor zeroed the gradient.
- autocast: the loss under bf16 autocast with float32 parameters (docs/bugs.md §3), run on models
  with an fp32 island only.
- mode: torch.compile's mode; "reduce-overhead" replays the compiled program as CUDA graphs (one
  launch per graph instead of one per kernel: the launch cost an unrolled loop pays T times), so
  the row runs on CUDA only.
- checkpoint: each step under torch.utils.checkpoint (non-reentrant): its activations are recomputed
  in the backward instead of kept (remat).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rnnbench.drivers.base import Batch, Driver, Prepared, configured, unflatten
from rnnbench.drivers.torch import _compile as _torch_compile
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import BY_PRECISION, Case, Model, loop_recur, rollout, run_forward
from rnnbench.ops import torch_ops


def _setitem(ys: Any, t: int, y: Any) -> Any:
    ys[t] = y
    return ys


def _index_put(ys: Any, t: int, y: Any) -> Any:
    import torch

    ys.index_put_((torch.tensor([t], device=ys.device),), y.unsqueeze(0))
    return ys


def _slice_scatter(ys: Any, t: int, y: Any) -> Any:
    return ys.slice_scatter(y.unsqueeze(0), 0, t, t + 1)


def _index_put_out_of_place(ys: Any, t: int, y: Any) -> Any:
    import torch

    return ys.index_put((torch.tensor([t], device=ys.device),), y.unsqueeze(0))


def _zeros(shape: tuple[int, ...], like: Any) -> Any:
    return like.new_zeros(shape)


def _expanded_zeros(shape: tuple[int, ...], like: Any) -> Any:
    return like.new_zeros(()).expand(shape)  # every stride 0: a broadcast, not a buffer


# ys config -> (how the row's settings name it, the buffer write or None for a stacked list, the buffer)
YS_FORMS: dict[str, tuple[str, Callable[[Any, int, Any], Any] | None, Callable[[tuple[int, ...], Any], Any]]] = {
    "stack": ("list + torch.stack", None, _zeros),
    "setitem": ("ys[t] = y", _setitem, _zeros),
    "index_put": ("ys.index_put_((t,), y)", _index_put, _zeros),
    "expanded_slice_scatter": ("expand(zeros), ys = ys.slice_scatter(y, t)", _slice_scatter, _expanded_zeros),
    "expanded_index_put": ("expand(zeros), ys = ys.index_put((t,), y)", _index_put_out_of_place, _expanded_zeros),
}


def loop_loss(
    model: Model, case: Case, consts, ys: str = "stack", checkpoint: bool = False
) -> Callable[[dict[str, Any]], Any]:
    """The loss as a function of the inputs dict: the model's rollout + loss, in torch ops
    (checkpoint: each step under torch.utils.checkpoint)."""
    ops = torch_ops()
    _, write, allocate = YS_FORMS[ys]

    def collect(buffer, t, y):
        if buffer is None:  # allocated at the first step: its shape is the step's output shape
            buffer = allocate((case.length,) + tuple(y.shape), y)
        return write(buffer, t, y)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        if checkpoint:
            recur = _torch.checkpointed(loop_recur(ops, None if write is None else collect))
            out, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
            return model.loss(ops, consts, out, carry)
        out, carry = rollout(
            ops, model, params, carry0=carry0, xs=xs, length=case.length, collect=None if write is None else collect
        )
        return model.loss(ops, consts, out, carry)

    return loss_fn


@dataclass(frozen=True)
class LoopConfig:
    compiled: bool = False
    ys: str = "stack"
    autocast: bool = False
    mode: str | None = None  # torch.compile's mode (compiled rows)
    checkpoint: bool = False  # each step under torch.utils.checkpoint

    @property
    def second_order(self) -> bool:
        return not self.compiled and not self.autocast  # torch.compile has no double backward


def prepare(config: LoopConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    # Under autocast the parameters stay float32 (the row's dtype names the autocast dtype).
    inputs, consts, wrt = _torch.model_tensors(model, case, "float32" if config.autocast else dtype, device)
    loss_fn = loop_loss(model, case, consts, config.ys, checkpoint=config.checkpoint)
    settings: dict[str, Any] = {"mode": "eager"}
    if config.checkpoint:
        settings["checkpoint"] = "torch.utils.checkpoint(use_reentrant=False) per step"
    if config.compiled:
        loss_fn, settings = _torch_compile.compiled(loss_fn, mode=config.mode)
    if config.ys != "stack":
        settings["ys"] = YS_FORMS[config.ys][0]
    if config.autocast:
        loss_fn = _torch.under_autocast(loss_fn, device)
        settings.update(autocast="bfloat16", params="float32")
    return _torch.prepared_from_loss(
        loss_fn, inputs, wrt, settings=settings, second_order=config.second_order, batch=Batch(model, case, consts)
    )


def _row(name: str, summary: str, config: LoopConfig, **fields) -> Driver:
    if config.autocast:
        fields.update(supports=_torch.supports_autocast, dtypes=("bfloat16",), devices=("cpu",), autocast="bfloat16")
    # A compiled loop's graph holds no higher-order op, and no registered bug of one depends on the layout of the
    # loss's cotangent (the scan's and while_loop's do: torch-inductor-scan-expanded-carry-cotangent, and the donated
    # buffers of torch-inductor-scan-body-grad-reuses-donated-buffer, which follow the whole graph), so its linear loss
    # forms share one program (Driver.shared_loss_program). Not the expanded index_put buffer: its registered bug
    # (torch-inductor-index-put-expanded-self) shows under some forms only, and the weighted loss at last_y's
    # weights reads the broken buffer where last_y's own program does not (measured: forward_mismatch, not ok).
    shared = config.compiled and not config.autocast and config.ys != "expanded_index_put"
    fields = {
        "dtypes": BY_PRECISION,
        "compiled": config.compiled,
        "second_order": config.second_order,
        "shared_loss_program": shared,
        **fields,
    }
    return configured(name, _torch.TORCH, summary, prepare=prepare, config=config, **fields)


_LOOP = {False: "torch eager loop", True: "torch.compile(inductor) of the loop"}  # a summary's start, by compiled
DRIVERS = (
    _row("torch_loop", "torch eager, Python for-loop", LoopConfig(), environments=("main", "xla"), repro="loop"),
    _row(
        "torch_loop_compiled",
        "torch.compile(inductor) of the Python loop (unrolled)",
        LoopConfig(compiled=True),
        repro="loop",
    ),
    _row(
        "torch_loop_compiled_cudagraphs",
        "torch.compile(inductor, mode=reduce-overhead: CUDA graphs) of the Python loop",
        LoopConfig(compiled=True, mode="reduce-overhead"),
        devices=("cuda",),
        suite="gpu",
    ),
    # The preallocated buffers of docs/bugs.md §5, eager and compiled: rows for a bug class.
    *(
        _row(
            name,
            f"{_LOOP[compiled]}, ys preallocated and written by {YS_FORMS[ys][0]}",
            LoopConfig(compiled=compiled, ys=ys),
            suite="bugs",
        )
        for name, ys, compiled in (
            ("torch_loop_setitem", "setitem", False),
            ("torch_loop_setitem_compiled", "setitem", True),
            ("torch_loop_index_put", "index_put", False),
            ("torch_loop_index_put_compiled", "index_put", True),
            ("torch_loop_expanded_slice_scatter", "expanded_slice_scatter", False),
            ("torch_loop_expanded_slice_scatter_compiled", "expanded_slice_scatter", True),
            ("torch_loop_expanded_index_put", "expanded_index_put", False),
            ("torch_loop_expanded_index_put_compiled", "expanded_index_put", True),
        )
    ),
    *(
        _row(name, f"{_LOOP[compiled]}, bf16 autocast, fp32 parameters", LoopConfig(compiled=compiled, autocast=True))
        for name, compiled in (("torch_autocast_loop", False), ("torch_autocast_loop_compiled", True))
    ),
    # Remat (issue 52): a row for a bug class, run on every core model by the slow tier and `--suite bugs`.
    _row(
        "torch_loop_checkpoint",
        "torch eager loop, each step under torch.utils.checkpoint (remat)",
        LoopConfig(checkpoint=True),
        suite="bugs",
    ),
)
