"""Mechanism: torch._higher_order_ops.associative_scan over a model's declared linear recurrence
h_t = a_t * h_{t-1} + b_t (Model.linear_recurrence): the (a, b) pairs of all T steps are composed
by a parallel prefix, not by a loop over the step. Models that declare no linear recurrence are
unavailable on it, with the reason.

Configurations (rows of DRIVERS):
- compiled: torch.compile (inductor) of the loss around the scan, or eager.
- combine_mode: "generic" (the combine function vmapped over slices of the sequence, any device)
  or "pointwise" (the associative_scan higher-order op, lowered by inductor to one scan kernel;
  torch accepts it on CUDA and XPU tensors only, so that row is a GPU row).
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.drivers import _torch, _torch_compile
from rnnbench.drivers.base import Driver, Prepared, configured, unflatten
from rnnbench.model import (
    BY_PRECISION,
    Case,
    Model,
    combine_linear,
    linear_recurrence_inputs,
    supports_linear_recurrence,
)
from rnnbench.ops import torch_ops


@dataclass(frozen=True)
class AssociativeConfig:
    compiled: bool = False
    combine_mode: str = "generic"  # associative_scan's combine_mode


def prepare(config: AssociativeConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    from torch._higher_order_ops.associative_scan import associative_scan

    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    ops = torch_ops()

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        a, b = linear_recurrence_inputs(ops, model, params, carry0=carry0, xs=xs)
        _, hs = associative_scan(combine_linear, (a, b), dim=0, combine_mode=config.combine_mode)
        return model.loss(ops, consts, hs, (hs[-1],))

    settings = {"combine_mode": config.combine_mode}
    if not config.compiled:
        return _torch.prepared_from_loss(
            loss_fn, inputs, wrt, settings={"mode": "eager", **settings}, second_order=True
        )
    compiled_fn, compiled_settings = _torch_compile.compiled(loss_fn)
    return _torch.prepared_from_loss(compiled_fn, inputs, wrt, settings={**compiled_settings, **settings})


def _row(name: str, summary: str, config: AssociativeConfig, **fields) -> Driver:
    fields = {"compiled": config.compiled, "second_order": not config.compiled, **fields}
    return configured(
        name,
        _torch.TORCH,
        summary,
        prepare=prepare,
        config=config,
        supports=supports_linear_recurrence,
        dtypes=BY_PRECISION,
        **fields,
    )


DRIVERS = (
    _row("torch_associative_scan", "torch associative_scan (generic combine), eager", AssociativeConfig()),
    _row(
        "torch_associative_scan_compiled",
        "torch.compile(inductor) of torch associative_scan (generic combine)",
        AssociativeConfig(compiled=True),
    ),
    _row(
        "torch_associative_scan_compiled_pointwise",
        "torch.compile(inductor) of torch associative_scan, pointwise combine: one scan kernel",
        AssociativeConfig(compiled=True, combine_mode="pointwise"),
        devices=("cuda",),
        suite="gpu",
    ),
)
