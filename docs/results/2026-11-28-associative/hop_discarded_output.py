"""Standalone repro (torch only): the autograd of torch's associative_scan higher-order op drops
the cross-leaf terms of the combine function's Jacobian. A linear recurrence h_t = a_t h_{t-1} + b_t
scanned as pairs (a, b) with the affine composition, its first output (the products of a) discarded
as every user of such a scan does: d loss / d a comes back zero, although a reaches the loss
through h. The same class as the report in pytorch#172568 (its comment of 2026-08-28, "gradients
could be wrong with multiple leaves", the same affine combine with combine_mode="pointwise").

The public associative_scan takes this path only with combine_mode="pointwise", which it accepts on
CUDA and XPU tensors only; combine_mode="generic" (the CPU rows of rnnbench) differentiates the
scan's own slicing ops with ordinary autograd and is right. The op is called directly here so the
backward runs on a CPU. Mechanism (torch/_higher_order_ops/associative_scan.py,
AssociativeScanAutogradOp.backward): the per-step vjp of the combine function is taken with ones
for every output (dummy_upstream_grad), then each leaf's gradient is scaled by that leaf's own
output cotangent (compute_grad, vmapped over the leaves independently): a leaf whose output has a
zero cotangent gets a zero gradient, and unequal cotangents mix wrongly.

Exits 1 while the bug is there. Run: python hop_discarded_output.py
"""

import functools
import sys

import torch
from torch._higher_order_ops.associative_scan import associative_scan_op, wrap_combine_fn_flat
from torch.utils import _pytree as pytree

torch.manual_seed(0)
T, n = 6, 3
a = (0.5 + 0.4 * torch.rand(T, n, dtype=torch.float64)).requires_grad_()
b = torch.randn(T, n, dtype=torch.float64, requires_grad=True)
w = torch.randn(T, n, dtype=torch.float64)


def compose(left, right):
    return left[0] * right[0], right[0] * left[1] + right[1]


combine = functools.partial(wrap_combine_fn_flat, combine_fn=compose, spec=pytree.tree_flatten((a, b))[1], num_leaves=2)


def scanned() -> torch.Tensor:
    _, h = associative_scan_op(combine, [a, b], ())
    return (h * w).sum()


def looped() -> torch.Tensor:
    h, hs = torch.zeros(n, dtype=torch.float64), []
    for t in range(T):
        h = a[t] * h + b[t]
        hs.append(h)
    return (torch.stack(hs) * w).sum()


print("torch", torch.__version__)
got = torch.autograd.grad(scanned(), (a, b))
want = torch.autograd.grad(looped(), (a, b))
errors = [float((g - r).abs().max()) for g, r in zip(got, want)]
print(f"max |error| d/da = {errors[0]:.3g} (d/da all zero: {bool((got[0] == 0).all())}), d/db = {errors[1]:.3g}")
sys.exit(1 if max(errors) > 1e-12 else 0)
