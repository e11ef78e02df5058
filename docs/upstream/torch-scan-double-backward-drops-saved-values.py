#!/usr/bin/env python
"""Double backward (create_graph=True) through eager torch._higher_order_ops.scan gives a wrong
second derivative, silently: the gradient it builds does not depend on the values scan saved for
its backward, so every second-order term through them is lost. First derivatives are right.

c_t = c_{t-1} * p, y_t = c_t, loss = sum(ys) + c_T over 3 steps: d2 loss/d p2 = c0 (2 + 12 p).

Standalone: torch and numpy. Exit 1 while the bug reproduces (wrong value, or the double backward
raises), 0 once it is fixed.
"""
import sys

import torch
from torch._higher_order_ops.scan import scan

P, C0 = 1.2, 1.0


def loss_scan(p, c0):
    def step(c, x):
        new = c * p
        return new.clone(), new.clone()

    c_T, ys = scan(step, c0, torch.zeros(3, 1, dtype=torch.float64))
    return ys.sum() + c_T.sum()


def loss_loop(p, c0):
    c, total = c0, 0.0
    for _ in range(3):
        c = c * p
        total = total + c.sum()
    return total + c.sum()


def second_derivative(loss_fn):
    p = torch.tensor([P], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(loss_fn(p, torch.tensor([C0], dtype=torch.float64)), [p], create_graph=True)
    if g.grad_fn is None:  # the gradient does not depend on p at all
        return g.detach().item(), 0.0
    (h,) = torch.autograd.grad(g.sum(), [p])
    return g.item(), h.item()


want = C0 * (2 + 12 * P)
print(f"torch {torch.__version__}: d2 loss/d p2, want {want} (closed form)")
print(f"  python loop: first {second_derivative(loss_loop)[0]:.10g}, second {second_derivative(loss_loop)[1]:.10g}")
try:
    first, second = second_derivative(loss_scan)
except Exception as e:  # noqa: BLE001  (torch 2.9.0: KeyError 'example_value' in scan's gen_schema)
    print(f"  scan: the double backward RAISED {type(e).__name__}: {str(e)[:160]}")
    sys.exit(1)
print(f"  scan:        first {first:.10g}, second {second:.10g}")
print(f"got {second}, want {want}")
sys.exit(1 if abs(second - want) > 1e-9 * abs(want) else 0)
