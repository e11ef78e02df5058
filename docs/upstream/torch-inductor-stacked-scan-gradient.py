#!/usr/bin/env python
"""torch.compile(backend="inductor") of two torch._higher_order_ops.scan calls in one graph gives
wrong gradients, silently (the forward is exact; eager, aot_eager and one scan alone are right).
Two forms: two independent tanh RNN layers under a loss on their outputs; two stacked layers
(layer 2 scans layer 1's outputs) under a loss on their final carries. Float64, T=16, B=4, I=8,
H=16; the reference is eager autograd of the same function.

Standalone: torch only. Exit 1 while the bug reproduces (some inductor gradient wrong), 0 once it
is fixed. Also prints the same with torch._functorch.config.donated_buffer = False.
"""
import sys

import torch
import torch._functorch.config
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # scan's while_loop needs it on torch 2.9.0
torch.manual_seed(0)
T, B, I, H = 16, 4, 8, 16


def rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


params = {k: rand(*s).requires_grad_() for k, s in dict(
    W1=(H, H), U1=(H, I), h1=(B, H), W2=(H, H), U2=(H, H), h2=(B, H)).items()}
xs, wy1, wy2, wc1, wc2 = rand(T, B, I), rand(T, B, H), rand(T, B, H), rand(B, H), rand(B, H)


def layer(W, U, h0, inputs):
    def combine(carry, x):
        h = torch.tanh(x @ U.T + carry[0] @ W.T)
        return (h.clone(),), h.clone()

    (h_T,), ys = scan(combine, (h0,), inputs)
    return ys, h_T


def independent(p):  # layer 2 reads layer 1's inputs projected to H, not its outputs
    ys1, _ = layer(p["W1"], p["U1"], p["h1"], xs)
    ys2, _ = layer(p["W2"], p["U2"], p["h2"], torch.tanh(xs @ p["U1"].T))
    return (ys1 * wy1).sum() + (ys2 * wy2).sum()


def stacked(p):  # layer 2 scans layer 1's outputs; the loss reads the final carries only
    ys1, c1 = layer(p["W1"], p["U1"], p["h1"], xs)
    _, c2 = layer(p["W2"], p["U2"], p["h2"], ys1)
    return (c1 * wc1).sum() + (c2 * wc2).sum()


def gradients(fn):
    return dict(zip(params, torch.autograd.grad(fn(params), list(params.values()))))


def worst(got, want):
    scale = max(float(w.abs().max()) for w in want.values())
    return max(float((got[k] - want[k]).abs().max()) for k in want) / scale


print(f"torch {torch.__version__}: two scans in one compiled graph vs eager autograd (max rel err)")
failed = False
for name, fn in (("independent, outputs loss", independent), ("stacked, final-carry loss", stacked)):
    want = gradients(fn)
    for backend, donated in (("inductor", True), ("aot_eager", True), ("inductor", False)):
        torch._functorch.config.donated_buffer = donated
        torch._dynamo.reset()
        err = worst(gradients(torch.compile(fn, backend=backend, fullgraph=True)), want)
        print(f"  {name:26} backend={backend:9} donated_buffer={donated!s:5}  got/want max rel err {err:.3g}")
        failed |= backend == "inductor" and donated and err > 1e-9
    torch._functorch.config.donated_buffer = True
sys.exit(1 if failed else 0)
