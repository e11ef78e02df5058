#!/usr/bin/env python
"""Reverse-mode gradient through torch._higher_order_ops.while_loop is silently wrong when a carried
input's initial value does not require grad: the carry-to-carry gradient chain of that leaf is cut
between iterations (backprop through time truncated to one step). The forward is exact.

docs/bugs.md §1's case, as a while loop: h_t = a * h_{t-1} + x_t over 5 steps, h0 = 0.2 without grad,
loss = sum(h_t^2) written into a zero buffer carried by the loop. d loss/d a = 0.2687283356 (closed
form, docs/bugs.md §1). With h0 and the buffer requiring grad the same loop is right.

Standalone: torch. Exit 1 while the bug reproduces, 0 once it is fixed.
"""
import sys

import torch
from torch._higher_order_ops.while_loop import while_loop

X = [0.11, -0.37, 0.23, 0.41, -0.19]
WANT = 0.2687283356


def grad_a(initial_grad: bool) -> float:
    a = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    xs = torch.tensor(X, dtype=torch.float64).reshape(5, 1)
    h0 = torch.tensor([0.2], dtype=torch.float64, requires_grad=initial_grad)
    ys0 = torch.zeros(5, 1, dtype=torch.float64, requires_grad=initial_grad)

    def cond(t, h, ys):
        return t < 5

    def body(t, h, ys):
        h = a * h + torch.index_select(xs, 0, t.reshape(1)).squeeze(0)
        return t + 1, h, ys.index_copy(0, t.reshape(1), h.unsqueeze(0))

    _, _, ys = while_loop(cond, body, (torch.tensor(0), h0, ys0))
    (ys * ys).sum().backward()
    return a.grad.item()


got, control = grad_a(False), grad_a(True)
print(f"torch {torch.__version__}: d loss/d a, want {WANT}")
print(f"  while_loop, h0 and buffer without grad: {got:.10g}")
print(f"  while_loop, h0 and buffer with grad:    {control:.10g}")
sys.exit(1 if abs(got - WANT) > 1e-9 else 0)
