#!/usr/bin/env python
"""torch.compile (inductor) of two torch._higher_order_ops.scan calls in one graph: wrong gradients,
silently. Here both losses are wrong (outputs only, and outputs plus final carries, 2026-11-25:
1.06 and 1.0 normwise); backend="aot_eager" is right, and one scan alone is right. In rnnbench's
own formulation (parameters passed to the step, its stacked and bidirectional models) the dense
random-weight loss happens to come out right and every other loss form is wrong, which is what the
registry entry claims.

Two independent tanh RNN layers (no chaining: layer 2 does not read layer 1), T=16, B=4, I=8, H=16,
float64. The reference is eager autograd of the same function (eager scan's first-order gradients
agree with rnnbench's hand BPTT oracle). Needs only torch. Exits 1 while the bug reproduces, 0 once
it is fixed. Run: python docs/repros/torch_inductor_two_scans.py

Measured with rnnbench (docs/bugs.md#torch-inductor-stacked-scan-gradient): torch 2.13.0 CPU, wrong;
the suite's rnn2, lstm2 and birnn models show it under every loss form other than dense random
weights on every output and final carry.
"""
import sys

import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True
torch.manual_seed(0)
T, B, I, H = 16, 4, 8, 16


def rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


params = {k: rand(*s).requires_grad_() for k, s in dict(
    W1=(H, H), U1=(H, I), h1=(B, H), W2=(H, H), U2=(H, I), h2=(B, H)).items()}
xs, wy1, wy2, wc = rand(T, B, I), rand(T, B, H), rand(T, B, H), rand(B, H)


def layer(W, U, h0):
    def combine(carry, x):
        h = torch.tanh(x @ U.T + carry[0] @ W.T)
        return (h.clone(),), h.clone()

    (h_T,), ys = scan(combine, (h0,), xs)
    return ys, h_T


def make_loss(form):
    def loss(p):
        ys1, c1 = layer(p["W1"], p["U1"], p["h1"])
        ys2, c2 = layer(p["W2"], p["U2"], p["h2"])
        total = (ys1 * wy1).sum() + (ys2 * wy2).sum()
        if form == "weighted":
            total = total + (c1 * wc).sum() + (c2 * wc).sum()
        return total

    return loss


def gradients(fn):
    return dict(zip(params, torch.autograd.grad(fn(params), list(params.values()))))


def worst(got, want):
    scale = max(float(w.abs().max()) for w in want.values())
    return max(float((got[k] - want[k]).abs().max()) for k in want) / scale


failed = False
for form in ("ys_only", "weighted"):
    want = gradients(make_loss(form))
    for backend in ("inductor", "aot_eager"):
        torch._dynamo.reset()
        got = gradients(torch.compile(make_loss(form), backend=backend, fullgraph=True))
        err = worst(got, want)
        print(f"loss={form:9s} backend={backend:9s} max rel err {err:.3g}")
        failed |= err > 1e-9
if failed:
    print("MISMATCH: compiled gradients of two scans in one graph differ from eager autograd")
    sys.exit(1)
print("OK: every compiled gradient agrees with eager autograd")
