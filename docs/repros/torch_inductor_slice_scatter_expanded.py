#!/usr/bin/env python
"""pytorch#180164: torch.compile of slice_scatter(x.expand(...), y, dim).sum(dim) zeroed x's gradient
(the meta function's output inherited the broadcast input's zero strides; fix pytorch#180169). The
issue's own shapes, float64 and float32, against eager autograd.

Needs only torch. Exits 1 while a gradient differs from eager, 0 when both agree.
Run: python docs/repros/torch_inductor_slice_scatter_expanded.py
"""
import sys

import torch


def f(x, y):
    return torch.slice_scatter(x.expand(4, 13, 33), y, dim=1, start=0, end=6).sum(dim=1)


wrong = False
torch.manual_seed(0)
for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-3)):
    x = torch.randn(1, 1, 33, dtype=dtype, requires_grad=True)
    y = torch.randn(4, 6, 33, dtype=dtype, requires_grad=True)
    g = torch.randn(4, 33, dtype=dtype)
    want = torch.autograd.grad(f(x, y), (x, y), g)
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(f, fullgraph=True)(x, y), (x, y), g)
    err = [float((a - b).abs().max()) for a, b in zip(got, want)]
    print(f"torch {torch.__version__} {dtype}: |dx - eager| {err[0]:.3g}, |dy - eager| {err[1]:.3g}")
    wrong |= max(err) > tol * max(1.0, float(want[0].abs().max()))
sys.exit(1 if wrong else 0)
