"""The plant catalog: torch loop drivers with one planted derivative bug each, the classes real
frameworks ship (docs/bugs.md). The forward of every plant is exact; only a derivative is wrong.
tests/test_plants.py asserts that each plant is caught, at float64 and float32 (second order: at
float64, where it is checked), through `rnnbench run` rows, the fuzzer and check_recurrence:
wherever the plant's class can occur.

Loaded through RNNBENCH_PLUGINS=rnnbench_plants (tests/test_plants.py does it for its own tests)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rnnbench.drivers.base import Driver, unflatten
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.drivers.torch import loop as torch_loop
from rnnbench.model import run_forward
from rnnbench.ops import torch_ops

TORCH_LOOP = next(d for d in torch_loop.DRIVERS if d.name == "torch_loop")
TEST = dataclasses.replace(_torch.TORCH, name="test")  # torch underneath, recorded as "test"
PATHS = ("run", "fuzz", "api")


@dataclass
class Forward:
    """What a planted loop knows of the forward it is in: which recurrence (1 = the first of a
    stacked model), and whether the loss sent the final carry an expanded (stride-0) cotangent."""

    recurrence: int = 0
    expanded_final_cotangent: bool = False
    carry0: tuple = ()  # the carry entering step 0 (detached), for frozen_jacobian


# A fault rewrites one step: fault(step, ops, params, carry, x, t, length, forward) -> (carry, y).
Fault = Callable


def _plain(step, ops, params, carry, x, t, length, forward):
    return step(ops, params, carry, x)


def zeroed_carry_cotangent(step, ops, params, carry, x, t, length, forward):
    """The carry entering every step after the first is detached: BPTT through time is lost
    (docs/bugs.md §1's class)."""
    if t >= 1:
        carry = tuple(c.detach() for c in carry)
    return step(ops, params, carry, x)


def truncated_bptt(step, ops, params, carry, x, t, length, forward, every: int = 4):
    """The carry is detached every `every` steps: gradients flow through windows of 4 steps only."""
    if t > 0 and t % every == 0:
        carry = tuple(c.detach() for c in carry)
    return step(ops, params, carry, x)


def frozen_jacobian(step, ops, params, carry, x, t, length, forward):
    """Exact values, but every step's backward uses the step's Jacobian at the initial carry (a
    saved value from the wrong iteration, the class of stale saved tensors)."""
    if t == 0:
        forward.carry0 = tuple(c.detach() for c in carry)
        return step(ops, params, carry, x)
    value_carry, value_y = step(ops, params, tuple(c.detach() for c in carry), x)
    at_frozen = tuple(c0 + (c - c.detach()) for c0, c in zip(forward.carry0, carry))
    grad_carry, grad_y = step(ops, params, at_frozen, x)
    straight = lambda value, grad: value.detach() + (grad - grad.detach())
    return tuple(straight(v, g) for v, g in zip(value_carry, grad_carry)), straight(value_y, grad_y)


def bf16_cotangents(step, ops, params, carry, x, t, length, forward):
    """Every carry cotangent is rounded to bfloat16 on its way back (a low-precision backward)."""
    import torch

    new, y = step(ops, params, carry, x)
    for c in new:
        if c.requires_grad:
            c.register_hook(lambda g: g.to(torch.bfloat16).to(g.dtype))
    return new, y


def detached_buffer_writes(step, ops, params, carry, x, t, length, forward):
    """Outputs written into a preallocated buffer with .detach(): d loss/d ys never flows back."""
    new, y = step(ops, params, carry, x)
    return new, y.detach()


def params_detached_last_step(step, ops, params, carry, x, t, length, forward):
    """The last step reads detached parameters: its share of d loss/d params is lost."""
    if t == length - 1:
        params = {k: v.detach() for k, v in params.items()}
    return step(ops, params, carry, x)


def lane0_under_expanded_cotangent(step, ops, params, carry, x, t, length, forward):
    """Wrong only when the final carry's cotangent is an expanded (stride-0) tensor, as an unweighted
    sum gives: every earlier carry cotangent is replaced by its lane 0, the mechanism of the
    registered inductor bug (docs/bugs.md). Weighted losses never see it."""
    new, y = step(ops, params, carry, x)
    for c in new:
        if not c.requires_grad:
            continue
        if t == length - 1:

            def note(g, forward=forward):
                forward.expanded_final_cotangent = 0 in g.stride() and g.numel() > 1
                return g

            c.register_hook(note)
        else:
            c.register_hook(
                lambda g, forward=forward: (
                    g[..., :1].expand_as(g).contiguous() if forward.expanded_final_cotangent else g
                )
            )
    return new, y


def wrong_in_second_recurrence(step, ops, params, carry, x, t, length, forward):
    """Only a recurrence that follows another in the same graph (layer 2 of a stacked model) loses
    its carry cotangent: single recurrences are exact (pytorch/pytorch#153679's shape)."""
    if forward.recurrence >= 2 and t >= 1:
        carry = tuple(c.detach() for c in carry)
    return step(ops, params, carry, x)


@dataclass(frozen=True)
class Plant:
    """name: the driver's name. fault: the step rewrite. grads / hvp: a transform of the prepared
    driver's gradients / H v instead. order: the derivative it breaks. paths: where its class can
    occur (a fault of stacked recurrences cannot occur in the fuzzer's or the API's single step)."""

    name: str
    fault: Fault = _plain
    grads: Callable[[dict], dict] | None = None
    hvp_scale: float | None = None
    order: int = 1
    paths: tuple[str, ...] = PATHS


def _nan_at_first_entry(grads: dict) -> dict:
    """The first compared gradient with its first entry NaN (issue 49: wrong at every dtype)."""
    out, done = dict(grads), False
    for name, g in grads.items():
        if g is not None and np.size(g) and not done:
            g = np.array(g, copy=True)
            g.flat[0] = np.nan
            out[name], done = g, True
    return out


PLANTS = (
    Plant("plant_zeroed_carry_cotangent", zeroed_carry_cotangent),
    Plant("plant_truncated_bptt", truncated_bptt),
    Plant("plant_frozen_jacobian", frozen_jacobian),
    Plant("plant_bf16_cotangents", bf16_cotangents),
    Plant("plant_detached_buffer_writes", detached_buffer_writes),
    Plant("plant_params_detached_last_step", params_detached_last_step),
    Plant("plant_scaled_gradient", grads=lambda g: {k: None if v is None else v * 1.001 for k, v in g.items()}),
    Plant("plant_nan_gradient", grads=_nan_at_first_entry),
    Plant("plant_halved_hvp", hvp_scale=0.5, order=2),
    Plant("plant_lane0_under_expanded_cotangent", lane0_under_expanded_cotangent),
    Plant("plant_wrong_in_second_recurrence", wrong_in_second_recurrence, paths=("run",)),
)


def planted_driver(plant: Plant) -> Driver:
    def prepare(model, case, dtype, device):
        inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
        ops = torch_ops()

        def loss_fn(inputs):
            params, carry0, xs = unflatten(model, case, inputs)
            forward = Forward()

            def recur(step, params, carry, xs, length):
                forward.recurrence += 1
                ys = []
                for t in range(length):
                    carry, y = plant.fault(
                        step, ops, params, tuple(carry), None if xs is None else xs[t], t, length, forward
                    )
                    ys.append(y)
                return ops.stack(ys), carry

            ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
            return model.loss(ops, consts, ys, carry)

        prepared = _torch.prepared_from_loss(loss_fn, inputs, wrt, settings={}, second_order=True)
        if plant.grads is not None:
            base = prepared.loss_and_grads
            prepared = dataclasses.replace(
                prepared, loss_and_grads=lambda: (lambda lg: (lg[0], plant.grads(lg[1])))(base())
            )
        if plant.hvp_scale is not None:
            base_hvp = prepared.hvp
            prepared = dataclasses.replace(
                prepared,
                hvp=lambda v: {
                    k: None if h is None else np.asarray(h) * plant.hvp_scale for k, h in base_hvp(v).items()
                },
            )
        return prepared

    return dataclasses.replace(
        TORCH_LOOP,
        name=plant.name,
        framework=TEST,
        summary=f"test: {plant.name}",
        prepare=prepare,
        environments=("main",),
        second_order=True,
    )


DRIVERS = tuple(planted_driver(p) for p in PLANTS)
