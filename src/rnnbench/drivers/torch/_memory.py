"""Part of the torch layer: what a training forward keeps for its backward (Prepared.saved_for_backward, the
step memory of rows.memory): the storages autograd saves, and what eager scan keeps on its autograd node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def saved_bytes(loss_fn: Callable[[dict[str, Any]], Any], inputs: dict[str, Any]) -> int:
    """Bytes of the distinct storages, other than the inputs', that autograd saves for backward in
    one training forward (torch.autograd.graph.saved_tensors_hooks sees each saved tensor; a
    storage saved at every step, e.g. a weight's, counts once). A compiled step's saved tensors
    are those of its compiled forward; the placeholders a higher-order op traces its body with
    hold no memory and are not counted. Eager scan keeps its forward's intermediates on its autograd
    node, past the hooks (scan_kept): those are counted too."""
    import torch

    own = {t.untyped_storage().data_ptr() for t in inputs.values() if torch.is_tensor(t)}
    saved: dict[int, int] = {}

    def pack(t):
        try:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
        except RuntimeError:  # a traced placeholder (a higher-order op tracing its body) holds no memory
            return t
        if ptr not in own:
            saved[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(inputs)
    for t in scan_kept(loss.grad_fn):
        pack(t)
    del loss  # frees the graph and what it saved
    return sum(saved.values())


def scan_kept(grad_fn: Any) -> list[Any]:
    """What eager torch scan keeps for its backward on its autograd node (its ScanAutogradImpl's saved
    forward intermediates, xs and additional inputs), past saved_tensors_hooks; every node from `grad_fn`."""
    kept, seen, stack = [], set(), [grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        impl = getattr(node, "_scan_impl", None)
        for name in ("saved_intermediates", "saved_fw_xs", "saved_fw_additional_inputs"):
            kept += [t for t in getattr(impl, name, None) or () if hasattr(t, "untyped_storage")]
        stack += [fn for fn, _ in node.next_functions]
    return kept
