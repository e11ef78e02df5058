"""A torch loop driver with a plant switched by PLANT: "slow" adds extra matrix products to every
call (exact gradients, more time: a slowdown `compare` must decide and its profile difference must
explain, aten::mm first), "grad" scales one gradient by 1.5 (a wrong gradient the check must catch),
"" plants nothing. tests/test_ci_recipe.py loads it through RNNBENCH_PLUGINS=rnnbench_ci_plant, as
the environment variable RNNBENCH_CI_PLANT, or in a scratch repository's commits as this file with
PLANT's default rewritten (two commits, two plants)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from rnnbench.drivers.base import Prepared
from rnnbench.drivers.torch import loop as torch_loop

PLANT = ""  # a scratch commit rewrites this line; RNNBENCH_CI_PLANT, where set, wins
EXTRA = 12  # matrix products of EXTRA_N x EXTRA_N added to each call: several times a default row's time
EXTRA_N = 160

TORCH_LOOP = next(d for d in torch_loop.DRIVERS if d.name == "torch_loop")


def _slower(fn: Any) -> Any:
    import torch

    a = torch.randn(EXTRA_N, EXTRA_N)

    def call() -> Any:
        for _ in range(EXTRA):
            torch.mm(a, a)
        return fn()

    return call


def _wrong_gradient(loss_and_grads: Any) -> Any:
    def call() -> Any:
        loss, grads = loss_and_grads()
        name = sorted(g for g in grads if grads[g] is not None)[0]
        return loss, {**grads, name: grads[name] * 1.5}

    return call


def prepare(model: Any, case: Any, dtype: str, device: str) -> Prepared:
    prepared = TORCH_LOOP.prepare(model, case, dtype, device)
    plant = os.environ.get("RNNBENCH_CI_PLANT", PLANT)
    if plant == "slow":
        return dataclasses.replace(
            prepared,
            loss_and_grads=_slower(prepared.loss_and_grads),
            forward=_slower(prepared.forward),
            forward_backward=_slower(prepared.forward_backward),
        )
    if plant == "grad":
        return dataclasses.replace(prepared, loss_and_grads=_wrong_gradient(prepared.loss_and_grads))
    return prepared


DRIVERS = (
    dataclasses.replace(
        TORCH_LOOP,
        name="ci_plant",
        summary="torch_loop with a plant (tests/plugins/rnnbench_ci_plant.py)",
        prepare=prepare,
        second_order=False,
    ),
)
