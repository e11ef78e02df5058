"""The memory a row's training step allocates for its backward: the activations its forward saves
(docs/measuring.md#step-memory), counted by the driver's framework (Prepared.saved_for_backward:
torch's saved-tensor hooks, jax.vjp's residuals) and recorded as `step_memory`. Where a driver gives
no count, or counting fails, the record says "not measured" and why."""

from __future__ import annotations

from typing import Any

from rnnbench.drivers.base import Prepared

METHOD = (
    "bytes of the distinct buffers, other than the inputs, that one training forward keeps for its "
    "backward (torch: saved_tensors_hooks; jax: the residuals of jax.vjp); not the process's RSS"
)


def step_memory(prepared: Prepared | None) -> dict[str, Any]:
    """{"saved_mb": MiB or None, "method": how it was counted, or why it was not}."""
    if prepared is None or prepared.saved_for_backward is None:
        return {"saved_mb": None, "method": "not measured: the driver's framework gives no count"}
    try:
        saved = prepared.saved_for_backward()
    except Exception as exc:  # a count is a report, never a reason to lose the row
        return {"saved_mb": None, "method": f"not measured: {type(exc).__name__}: {str(exc)[:200]}"}
    return {"saved_mb": saved / 2**20, "method": METHOD}
