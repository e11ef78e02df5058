#!/usr/bin/env python
"""torch.compile(backend="inductor"): the gradient through torch._higher_order_ops.scan is silently
wrong when the loss is an UNWEIGHTED sum of a final carry leaf (loss = h_T.sum()): from the second
backward step every lane of the carried gradient holds lane 0's value. A weighted sum
(h_T * w).sum(), eager scan, aot_eager and a compiled Python loop are right.

h_t = h_{t-1} * x_t + x_t, h of n entries, h0 and xs differentiated. Truth: hand BPTT in numpy.
Standalone: torch and numpy. Exit 1 while the bug reproduces, 0 once it is fixed, 3 when the
compile fails instead (torch 2.9.0 cannot lower this backward at all: another report).
"""
import sys

import numpy as np
import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # scan's while_loop needs it on torch 2.9.0


def truth(h0, xs, w):
    """d/d h0 and d/d xs of sum(w * h_T), float64."""
    hs = [h0]
    for x in xs:
        hs.append(hs[-1] * x + x)
    g, dxs = w.copy(), np.zeros_like(xs)
    for t in range(len(xs) - 1, -1, -1):
        dxs[t] = g * (hs[t] + 1.0)
        g = g * xs[t]
    return g, dxs


def compiled_grads(h0, xs, w, weighted):
    def f(h0, xs, w):
        def combine(h, x):
            h = h * x + x
            return h.clone(), h.clone()

        h_T, _ = scan(combine, h0, xs)
        return (h_T * w).sum() if weighted else h_T.sum()

    torch._dynamo.reset()
    h0_t, xs_t = torch.tensor(h0, requires_grad=True), torch.tensor(xs, requires_grad=True)
    loss = torch.compile(f, backend="inductor", fullgraph=True)(h0_t, xs_t, torch.tensor(w))
    return [g.detach().numpy() for g in torch.autograd.grad(loss, [h0_t, xs_t])]


print(f"torch {torch.__version__}: compiled scan, gradient of a final-carry loss vs hand BPTT (float64)")
rng = np.random.default_rng(0)
errors = {}
for T, n in [(3, 3), (1, 2)]:  # (1, 2): the smallest case (one step, two lanes, h0 differentiated)
    h0, xs, w = rng.uniform(0.5, 1.5, n), rng.uniform(0.5, 1.5, (T, n)), rng.uniform(0.5, 1.5, n)
    for weighted in (False, True):
        name = f"T={T} n={n} loss={'(h_T * w).sum()' if weighted else 'h_T.sum()'}"
        want = truth(h0, xs, w if weighted else np.ones(n))
        try:
            got = compiled_grads(h0, xs, w, weighted)
        except Exception as e:  # noqa: BLE001
            print(f"  {name:32} compile RAISED {type(e).__name__}: {' '.join(str(e).split())[:120]}")
            sys.exit(3)
        errors[(T, n, weighted)] = max(float(np.max(np.abs(g - v)) / np.max(np.abs(v))) for g, v in zip(got, want))
        print(f"  {name:32} got d h0 {np.round(got[0], 6)} want {np.round(want[0], 6)}  "
              f"max rel err {errors[(T, n, weighted)]:.3g}")
if any(e > 1e-9 for (_, _, weighted), e in errors.items() if weighted):
    print("the weighted controls are wrong too: not this bug")
    sys.exit(3)
sys.exit(1 if any(e > 1e-9 for e in errors.values()) else 0)
