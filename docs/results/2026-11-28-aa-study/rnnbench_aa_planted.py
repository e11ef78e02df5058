"""The A/A study's planted slowdown: the torch loop under another name, whose timed calls each run
the training step (and the forward) PLANTED_SLOWDOWN times when that variable is set, else once.
Its gradients are the torch loop's, so it is checked and timed like any row.

Loaded through RNNBENCH_PLUGINS=rnnbench_aa_planted with this folder on PYTHONPATH."""

from __future__ import annotations

import dataclasses
import os

from rnnbench.drivers import torch_loop

TORCH_LOOP = next(d for d in torch_loop.DRIVERS if d.name == "torch_loop")
TIMES = int(os.environ.get("PLANTED_SLOWDOWN", "1"))


def _repeated(fn):
    def call():
        for _ in range(TIMES - 1):
            fn()
        return fn()

    return call


def prepare(model, case, dtype, device):
    prepared = TORCH_LOOP.prepare(model, case, dtype, device)
    return dataclasses.replace(
        prepared, forward_backward=_repeated(prepared.forward_backward), forward=_repeated(prepared.forward)
    )


DRIVERS = (
    dataclasses.replace(
        TORCH_LOOP, name="aa_planted", summary="the torch loop, each timed call run PLANTED_SLOWDOWN times", prepare=prepare
    ),
)
