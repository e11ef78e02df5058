#!/usr/bin/env python
"""torch.compile(backend="inductor") refuses the backward of a scan whose carry has two leaves that
both reach the loss through an unweighted sum: "RuntimeError: scan might be aliasing the input or the
output!", although every carry leaf and output is cloned (aot_eager refuses it too). A weighted
sum of the same carry compiles and is right.

Standalone: torch and numpy. Exit 1 while the bug reproduces, 0 once the compiled gradient is right,
3 when it compiles but the gradient is wrong (another bug; this one cannot be judged).
"""
import sys

import numpy as np
import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # scan's while_loop needs it on torch 2.9.0


def f(h0, k0, xs):
    def step(carry, x):
        h, k = carry
        h2, k2 = h * x + k, k * x
        return (h2.clone(), k2.clone()), h2.clone()

    (h, k), _ = scan(step, (h0, k0), xs)
    return h.sum() + k.sum()  # both cotangents: expand(tangent, [n]), stride 0


def grads(fn):
    h0 = torch.tensor([0.5, -0.2], dtype=torch.float64, requires_grad=True)
    k0 = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    xs = torch.tensor([[0.9, 1.1], [0.7, -1.2], [1.3, 0.6]], dtype=torch.float64)
    return [g.numpy() for g in torch.autograd.grad(fn(h0, k0, xs), [h0, k0])]


want = grads(f)  # eager scan: its first-order gradients are right (checked against a Python loop)
print(f"torch {torch.__version__}: two carry leaves, loss = h_T.sum() + k_T.sum()")
try:
    torch._dynamo.reset()
    got = grads(torch.compile(f, backend="inductor", fullgraph=True))
except Exception as e:  # noqa: BLE001
    text = " ".join(f"{type(e).__name__}: {e}".split())
    print("compile RAISED", text[:200])
    if "scan might be aliasing the input or the output" in text:
        print("got: the error above; want (d h0, d k0) =", want)
        sys.exit(1)
    sys.exit(3)
err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
print(f"got {got}\nwant {want}\nmax abs err {err:.3g}")
sys.exit(0 if err < 1e-9 else 3)
