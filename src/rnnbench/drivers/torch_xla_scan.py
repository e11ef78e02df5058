"""torch_xla.experimental.scan, without its tracing cache (is_fn_pure=False, the default): every
call re-traces the step with AOTAutograd, which dominates the steady-state time on CPU.

torch_xla 2.9.0's scan cannot close over tensors (BUGS.md §2; torch_xla_scan_closure shows the
failure), so the parameters travel through the carry: carry = (parameters, model carry), and the
step returns the parameters unchanged. Their gradients accumulate through the reverse scan's carry
cotangent. Recurrences without xs scan over a (T, 1) dummy."""

from __future__ import annotations

from typing import Any, Callable

from rnnbench.drivers import _torch_xla
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


def carried_params_step(model: Model, case: Case) -> Callable:
    """The scan body fn((params, carry), x) -> ((params, carry'), y). Built once per prepare and
    reused by every call: torch_xla's cache (is_fn_pure=True) is keyed by this object's identity.
    It captures no tensor, only the model and the parameter names."""
    ops = torch_ops()
    names = tuple(case.params)
    has_xs = case.xs is not None

    def step(carry, x):
        params_t, state = carry
        new_state, y = model.step(ops, dict(zip(names, params_t)), tuple(state), x if has_xs else None)
        return (params_t, tuple(new_state)), y

    return step


def scan_loss(model: Model, case: Case, consts, is_fn_pure: bool) -> Callable[[dict[str, Any]], Any]:
    import torch
    from torch_xla.experimental.scan import scan

    ops = torch_ops()
    step = carried_params_step(model, case)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        if xs is not None and model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        if xs is None:
            xs = torch.zeros(case.length, 1, dtype=carry0[0].dtype, device=carry0[0].device)
        (_, carry), ys = scan(step, (tuple(params.values()), tuple(carry0)), xs, is_fn_pure=is_fn_pure)
        return model.loss(ops, consts, ys, tuple(carry))

    return loss_fn


def prepare_scan(model: Model, case: Case, dtype: str, is_fn_pure: bool) -> Prepared:
    inputs, consts, wrt = _torch_xla.model_tensors(model, case, dtype)
    settings = {"loop": "torch_xla.experimental.scan", "is_fn_pure": is_fn_pure, "params_via": "carry"}
    return _torch_xla.prepared_from_loss(scan_loss(model, case, consts, is_fn_pure), inputs, wrt, settings)


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    return prepare_scan(model, case, dtype, is_fn_pure=False)


DRIVER = Driver(
    name="torch_xla_scan",
    framework="torch_xla",
    summary="torch_xla.experimental.scan, params in carry, re-traced each call (is_fn_pure=False)",
    prepare=prepare,
    available=_torch_xla.available,
    versions=_torch_xla.versions,
    environments=("xla",),
    compiled=True,
    devices=("cpu",),
)
