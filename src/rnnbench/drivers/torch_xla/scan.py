"""Mechanism: torch_xla.experimental.scan over the model's step; recurrences without xs scan over a
(T, 1) dummy.

Configurations (rows of DRIVERS):
- params_via="carry": torch_xla 2.9.0's scan cannot close over tensors (docs/bugs.md §2), so the
  parameters travel through the carry, carry = (parameters, model carry), and the step returns
  them unchanged; their gradients accumulate through the reverse scan's carry cotangent.
  params_via="closure": the idiomatic body that closes over the parameters (as torch_scan does).
  torch_xla 2.9.0 cannot trace it (AOTAutograd meets a captured XLA tensor: "Please convert all
  Tensors to FakeTensors first"); it runs so that the known-issues registry sees that failure on
  every run and notices when it stops. A model without parameters captures nothing and runs.
- is_fn_pure: torch_xla's tracing cache. False (its default): every call re-traces the step with
  AOTAutograd, which dominates the steady-state time on CPU. True: the trace is cached by the step
  function's identity and the carry/xs shapes (about 8x faster forward+backward on CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rnnbench.drivers.base import Prepared, configured, unflatten
from rnnbench.drivers.torch_xla import _framework as _torch_xla
from rnnbench.model import Case, Model, Recur, run_forward, scan_inputs
from rnnbench.ops import torch_ops


@dataclass(frozen=True)
class ScanConfig:
    params_via: str = "carry"  # "carry" or "closure"
    is_fn_pure: bool = False


def carried_params_step(step: Callable, names: tuple[str, ...], has_xs: bool) -> Callable:
    """The scan body fn((params, carry), x) -> ((params, carry'), y) of one recurrence. It captures
    no tensor, only the step and the parameter names."""
    ops = torch_ops()

    def body(carry, x):
        params_t, state = carry
        new_state, y = step(ops, dict(zip(names, params_t)), tuple(state), x if has_xs else None)
        return (params_t, tuple(new_state)), y

    return body


def xla_scan_recur(config: ScanConfig) -> Recur:
    """torch_xla scan as the model's `recur`. Built once per prepare and reused by every call:
    torch_xla's cache (is_fn_pure=True) is keyed by the body's identity, so each recurrence's body
    is made once and kept."""
    from torch_xla.experimental.scan import scan

    ops = torch_ops()
    bodies: dict[tuple, Callable] = {}

    def recur(step, params, carry0, xs, length):
        has_xs = xs is not None
        xs, step_x = scan_inputs(ops, xs, length, like=carry0[0])
        if config.params_via == "carry":
            key = (step, tuple(params), has_xs)
            body = bodies.setdefault(key, carried_params_step(step, tuple(params), has_xs))
            (_, carry), ys = scan(body, (tuple(params.values()), tuple(carry0)), xs, is_fn_pure=config.is_fn_pure)
        else:

            def closure(carry, x):  # closes over `params`: the form torch_xla 2.9.0 cannot trace
                new_carry, y = step(ops, params, tuple(carry), step_x(x))
                return tuple(new_carry), y

            carry, ys = scan(closure, tuple(carry0), xs, is_fn_pure=config.is_fn_pure)
        return ys, tuple(carry)

    return recur


def scan_loss(config: ScanConfig, model: Model, case: Case, consts) -> Callable[[dict[str, Any]], Any]:
    ops = torch_ops()
    recur = xla_scan_recur(config)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
        return model.loss(ops, consts, ys, tuple(carry))

    return loss_fn


def prepare(config: ScanConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch_xla.model_tensors(model, case, dtype)
    settings = {"loop": "torch_xla.experimental.scan", "is_fn_pure": config.is_fn_pure, "params_via": config.params_via}
    return _torch_xla.prepared_from_loss(scan_loss(config, model, case, consts), inputs, wrt, settings)


DRIVERS = tuple(
    configured(
        name,
        _torch_xla.TORCH_XLA,
        summary,
        prepare=prepare,
        config=config,
        environments=("xla",),
        compiled=True,
        devices=("cpu",),
    )
    for name, summary, config in (
        (
            "torch_xla_scan",
            "torch_xla.experimental.scan, params in carry, re-traced each call (is_fn_pure=False)",
            ScanConfig(),
        ),
        (
            "torch_xla_scan_cached",
            "torch_xla.experimental.scan, params in carry, tracing cache (is_fn_pure=True)",
            ScanConfig(is_fn_pure=True),
        ),
        (
            "torch_xla_scan_closure",
            "torch_xla.experimental.scan, body closes over params (docs/bugs.md §2: cannot trace)",
            ScanConfig(params_via="closure"),
        ),
    )
)
