#!/usr/bin/env python
"""torch.compile(backend="inductor") refuses the backward of a scan whose step is c' = c + x (x from
xs, c0 and xs requiring grad) and reads c' twice (new carry and output): "RuntimeError: scan might be
aliasing the input or the output!", although the step clones its carry and output. The backward step
returns one tensor (the carry cotangent plus the output cotangent) as the gradient of both c and x.
A step c' = c * x compiles.

Standalone: torch and numpy. Exit 1 while the bug reproduces, 0 once the compiled gradient is right,
3 if another failure comes first (this one cannot be judged).
"""
import sys

import numpy as np
import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # scan's while_loop needs it on torch 2.9.0


def f(c0, xs, w):
    def step(c, x):
        c = c + x  # one add: its backward hands the same cotangent to c and to x
        return c.clone(), c.clone()

    c, _ = scan(step, c0, xs)
    return (w * c).sum()


def grads(fn):
    c0 = torch.tensor([0.5, -0.2], dtype=torch.float64, requires_grad=True)
    xs = torch.tensor([[0.9, 1.1], [0.7, -1.2]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.3, -0.8], dtype=torch.float64)
    return [g.numpy() for g in torch.autograd.grad(fn(c0, xs, w), [c0, xs])]


# c_T = c0 + x_0 + x_1, so d loss/d c0 = w and d loss/d x_t = w for each step
w = np.array([0.3, -0.8])
want = [w, np.tile(w, (2, 1))]
print(f"torch {torch.__version__}: c' = c + x, T=2, c of 2 entries, c0 and xs with grad, loss = sum(w * c_T)")
try:
    torch._dynamo.reset()
    got = grads(torch.compile(f, backend="inductor", fullgraph=True))
except Exception as e:  # noqa: BLE001
    text = " ".join(f"{type(e).__name__}: {e}".split())
    print("compile RAISED", text[:200])
    if "scan might be aliasing the input or the output" in text:
        print("got: the error above; want (d c0, d xs) =", [g.tolist() for g in want])
        sys.exit(1)
    sys.exit(3)
err = max(float(np.max(np.abs(g - wt))) for g, wt in zip(got, want))
print(f"got {[g.tolist() for g in got]}\nwant {[g.tolist() for g in want]}\nmax abs err {err:.3g}")
sys.exit(0 if err < 1e-12 else 3)
