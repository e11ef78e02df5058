"""Mechanism: torch._higher_order_ops.associative_scan over a model's declared linear recurrence
h_t = a_t * h_{t-1} + b_t (Model.linear_recurrence): the (a, b) pairs of all T steps are composed
by a parallel prefix, not by a loop over the step. Models that declare no linear recurrence are
unavailable on it, with the reason.

Configurations (rows of DRIVERS):
- compiled: torch.compile (inductor) of the loss around the scan, or eager.
- combine_mode: "generic" (the combine function vmapped over slices of the sequence, any device)
  or "pointwise" (the associative_scan higher-order op, lowered by inductor to one scan kernel;
  torch accepts it on CUDA and XPU tensors only, so that row is a GPU row).
- reverse: associative_scan's reverse=True, the native composition from the last pair: a
  Model.reverse model composes its pairs as they are, any other model its pairs flipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.drivers.base import Batch, Driver, Prepared, configured, unflatten
from rnnbench.drivers.torch import _compile as _torch_compile
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import BY_PRECISION, Case, Model, linear_recurrence_states, supports_linear_recurrence
from rnnbench.ops import torch_ops


@dataclass(frozen=True)
class AssociativeConfig:
    compiled: bool = False
    combine_mode: str = "generic"  # associative_scan's combine_mode
    reverse: bool = False  # associative_scan's reverse


def prepare(config: AssociativeConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    from torch._higher_order_ops.associative_scan import associative_scan

    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    ops = torch_ops()

    def scan(combine, pairs, reverse):
        return associative_scan(combine, pairs, dim=0, reverse=reverse, combine_mode=config.combine_mode)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        hs, carry = linear_recurrence_states(
            ops, model, params, carry0=carry0, xs=xs, scan=scan, reverse=config.reverse
        )
        return model.loss(ops, consts, hs, carry)

    settings: dict[str, object] = {"combine_mode": config.combine_mode}
    batch = Batch(model, case, consts)
    if config.reverse:  # the default rows' settings stay as their records have them
        settings["reverse"] = True
    if not config.compiled:
        return _torch.prepared_from_loss(
            loss_fn, inputs, wrt, settings={"mode": "eager", **settings}, second_order=True, batch=batch
        )
    compiled_fn, compiled_settings = _torch_compile.compiled(loss_fn)
    return _torch.prepared_from_loss(compiled_fn, inputs, wrt, settings={**compiled_settings, **settings}, batch=batch)


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
    # Native reverse (issue 52; pytorch#137943 reported reverse=True wrong): rows for a bug class.
    _row(
        "torch_associative_scan_reverse",
        "torch associative_scan (generic combine), reverse=True, eager",
        AssociativeConfig(reverse=True),
        suite="bugs",
    ),
    _row(
        "torch_associative_scan_reverse_compiled",
        "torch.compile(inductor) of torch associative_scan (generic combine), reverse=True",
        AssociativeConfig(compiled=True, reverse=True),
        suite="bugs",
    ),
)
