"""The torch_xla framework layer: its Framework object and the plumbing its mechanisms share
(environment "xla": torch 2.9.0 + torch_xla 2.9.0, PJRT_DEVICE=CPU).

torch_xla tensors are lazy: ops only record a graph, which runs at torch_xla.sync(). Every timed
call is therefore blocked with torch_xla.sync(wait=True) (Prepared.block); without it a timing
measures tracing, not computation. Inputs are synced onto the device before anything is timed.

In one process, the XLA device must be created (torch_xla.device()) before the first plain-torch
backward, or torch 2.9.0's autograd engine rejects XLA backwards later (INTERNAL ASSERT on
device_ready_queues_). The runner gives every driver its own process; tests/conftest.py does it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rnnbench.drivers.base import Framework, Prepared
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.drivers.torch import _settings as _torch_settings
from rnnbench.model import Case, Model

TORCH_XLA = Framework(
    name="torch_xla",
    module="torch_xla",
    packages=("torch", "torch_xla", "numpy"),
    family="torch",
    thread_env=_jax.xla_thread_env,
    set_threads=_torch_settings.set_threads,
    threads_in_use=_torch_settings.threads_in_use,
    collect_after_failure=True,
    # its Prepared offers backward() only: torch.func's transforms on the lazy device are not wired here
    modes_missing={
        m: "not offered on the lazy XLA device (drivers/torch_xla/_framework.py passes no torch.func modes)"
        for m in ("jvp", "func", "per_example")
    },
)

SETTINGS = {"device": "xla (PJRT_DEVICE=CPU)", "lazy_tensors": True, "block": "torch_xla.sync(wait=True)"}


def block(result: Any) -> None:
    """Run every pending graph and wait for it (the result is one of the live tensors it computes)."""
    import torch_xla

    torch_xla.sync(wait=True)


def model_tensors(model: Model, case: Case, dtype: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(inputs by canonical name, consts, names whose gradients are compared) on the XLA device,
    already transferred (synced), so no timing includes the host-to-device copy."""
    import torch_xla

    device = torch_xla.device()
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    torch_xla.sync(wait=True)
    return inputs, consts, wrt


def prepared_from_loss(
    loss_fn: Callable[[dict[str, Any]], Any], inputs: dict[str, Any], wrt: list[str], settings: Mapping[str, Any]
) -> Prepared:
    """Like _torch.prepared_from_loss, with the lazy device's block; gradients are read after a sync."""
    base = _torch.prepared_from_loss(loss_fn, inputs, wrt, settings={**SETTINGS, **settings})

    computed: list[str] = []  # the last loss's dtype (Prepared.computed_dtype)

    def loss_and_grads():
        loss = base.forward_backward()
        block(loss)
        computed[:] = [str(loss.dtype).removeprefix("torch.")]
        return float(loss.detach().cpu()), {name: _torch.to_numpy(inputs[name].grad) for name in wrt}

    return Prepared(
        loss_and_grads,
        forward=base.forward,
        forward_backward=base.forward_backward,
        block=block,
        settings=base.settings,
        computed_dtype=lambda: computed[0] if computed else None,
    )
