#!/usr/bin/env python
"""torch.compile(backend="inductor") cannot lower the backward of torch._higher_order_ops.scan when
the loss is an unweighted sum of a final carry leaf of two or more entries (loss = h_T.sum()):
LoweringException: AssertionError: target: while_loop. A weighted sum, or a one-element carry,
compiles.

Standalone: torch and numpy. Exit 1 while the bug reproduces, 0 once it compiles (whether the
gradient is then right is another report: torch-inductor-scan-expanded-carry-cotangent).
"""
import sys

import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # scan's while_loop needs it on torch 2.9.0


def f(h0, xs):
    def combine(h, x):
        h = h * x + x
        return h.clone(), h.clone()

    h_T, _ = scan(combine, h0, xs)
    return h_T.sum()  # cotangent expand(tangent, [2]): stride 0


print(f"torch {torch.__version__}: T=1, h of 2 entries, loss = h_T.sum(), h0 without grad")
h0 = torch.tensor([0.5, 1.5], dtype=torch.float64)
xs = torch.tensor([[0.9, 1.1]], dtype=torch.float64, requires_grad=True)
try:
    (got,) = torch.autograd.grad(torch.compile(f, backend="inductor", fullgraph=True)(h0, xs), [xs])
except Exception as e:  # noqa: BLE001
    text = " ".join(f"{type(e).__name__}: {e}".split())
    print("compile RAISED", text[:240])
    if "while_loop" in text and "Lowering" in text:
        print("got: the error above; want d loss/d xs = h0 + 1 =", (h0 + 1).tolist())
        sys.exit(1)
    raise
print(f"compiled: got d loss/d xs = {got.tolist()}, want {(h0 + 1).tolist()} (its value is judged elsewhere)")
sys.exit(0)
