"""Shared by the bf16-autocast torch drivers: float32 parameters, the loss run under
torch.autocast(bfloat16), as mixed-precision training does. Only models with an fp32 island
(Model.island_grads) are run: for them the check can tell float32 island semantics from bf16."""

from __future__ import annotations

from typing import Any, Callable, Optional

from rnnbench.model import Model


def supports(model: Model) -> Optional[str]:
    return None if model.island_grads else "model has no fp32 island (Model.island_grads is empty)"


def under_autocast(loss_fn: Callable[[dict], Any], device: str) -> Callable[[dict], Any]:
    """loss_fn run under bf16 autocast; the loss is returned in float32."""
    import torch

    def wrapped(inputs):
        with torch.autocast(device, dtype=torch.bfloat16):
            return loss_fn(inputs).float()

    return wrapped
