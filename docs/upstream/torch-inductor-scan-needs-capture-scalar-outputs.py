#!/usr/bin/env python
"""torch.compile(backend="inductor") of torch._higher_order_ops.scan under autograd fails with
"Backend compiler inductor failed with aten._local_scalar_dense.default" unless
torch._dynamo.config.capture_scalar_outputs = True.

Standalone: torch and numpy. Exit 1 while the bug reproduces, 0 once the compiled gradient is right,
3 when the compile succeeds but the gradient is wrong (another bug; this one cannot be judged).
"""
import sys

import numpy as np
import torch
from torch._higher_order_ops.scan import scan

a0, c0 = np.array([0.7, -0.4, 0.9]), np.array([0.2, 0.1, -0.3])
xs0 = np.linspace(-0.5, 0.5, 5 * 3).reshape(5, 3)


def truth() -> np.ndarray:
    """d/da of sum(ys**2) for c_t = a * c_{t-1} + x_t, y_t = c_t (hand BPTT, float64)."""
    cs = [c0]
    for x in xs0:
        cs.append(a0 * cs[-1] + x)
    g, da = np.zeros(3), np.zeros(3)
    for t in range(len(xs0), 0, -1):
        g = g + 2 * cs[t]          # d loss / d c_t: from y_t, plus the carry from step t+1
        da += g * cs[t - 1]
        g = g * a0
    return da


def loss(a, c, xs):
    def step(carry, x):
        new = a * carry + x
        return new.clone(), new.clone()

    _, ys = scan(step, c, xs)
    return (ys**2).sum()


print(f"torch {torch.__version__}, capture_scalar_outputs={torch._dynamo.config.capture_scalar_outputs} (default)")
a = torch.tensor(a0, requires_grad=True)
c = torch.tensor(c0, requires_grad=True)  # a differentiated carry0: not the carry0-without-grad bug
try:
    (got,) = torch.autograd.grad(torch.compile(loss, backend="inductor", fullgraph=True)(a, c, torch.tensor(xs0)), [a])
except Exception as e:  # noqa: BLE001
    text = f"{type(e).__name__}: {e}"
    print("compile RAISED", text.splitlines()[0][:200])
    if "_local_scalar_dense" in text:
        print("got: the error above; want: d loss/d a =", truth())
        sys.exit(1)
    sys.exit(3)
err = float(np.max(np.abs(got.numpy() - truth())))
print(f"got d loss/d a = {got.numpy()}\nwant {truth()}  max abs err {err:.3g}")
sys.exit(0 if err < 1e-9 else 3)
