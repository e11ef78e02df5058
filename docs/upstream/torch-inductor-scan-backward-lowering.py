#!/usr/bin/env python
"""torch.compile(backend="inductor") cannot lower scan's backward on CPU for a 0-dimensional carry
when the loss does not use the final carry: LoweringException: NotImplementedError: Pointwise
target: while_loop. A (1,)-shaped carry, or a loss that reads the final carry, compiles.

Standalone: torch and numpy. Exit 1 while the bug reproduces, 0 once the compiled gradient is right,
3 when the compile succeeds but the gradient is wrong (another bug; this one cannot be judged).
"""
import sys

import numpy as np
import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # scan's while_loop needs it on 2.9.0 (another issue)
X, A, C0 = np.array([0.11, -0.37, 0.23, 0.41, -0.19]), 0.7, 0.2


def truth() -> tuple[float, float]:
    """(d/da, d/dc0) of sum(ys**2), c_t = a c_{t-1} + x_t, y_t = c_t: hand BPTT in float64."""
    cs = [C0]
    for x in X:
        cs.append(A * cs[-1] + x)
    g, da = 0.0, 0.0
    for t in range(len(X), 0, -1):
        g += 2 * cs[t]
        da += g * cs[t - 1]
        g *= A
    return da, g


def loss(a, c, xs):
    def step(carry, x):
        new = a * carry + x
        return new.clone(), new.clone()

    _, ys = scan(step, c, xs)
    return (ys**2).sum()  # the final carry is not used


print(f"torch {torch.__version__}: 0-d parameter and carry, loss = sum(ys**2)")
a = torch.tensor(A, dtype=torch.float64, requires_grad=True)
c = torch.tensor(C0, dtype=torch.float64, requires_grad=True)
try:
    got = torch.autograd.grad(torch.compile(loss, backend="inductor", fullgraph=True)(a, c, torch.tensor(X)), [a, c])
except Exception as e:  # noqa: BLE001
    text = f"{type(e).__name__}: {e}"
    print("compile RAISED", " ".join(text.split())[:240])
    if "while_loop" in text and "Pointwise" in text:
        print("got: the error above; want: (d/da, d/dc0) =", truth())
        sys.exit(1)
    sys.exit(3)
err = max(abs(float(g) - w) for g, w in zip(got, truth()))
print(f"got (d/da, d/dc0) = {[float(g) for g in got]}  want {truth()}  max abs err {err:.3g}")
sys.exit(0 if err < 1e-9 else 3)
