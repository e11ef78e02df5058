#!/usr/bin/env python
"""torch.compile (inductor) of torch._higher_order_ops.scan: the gradient is wrong when the loss is an
UNWEIGHTED sum of a final carry leaf (loss = h_T.sum()); a weighted sum (h_T * w).sum() is right.

Recurrence h_t = h_{t-1} * x_t + x_t (no closed-over parameter needed), carry h of n elements.
Truth is the analytic float64 gradient written out in numpy. Needs only torch and numpy.
Exits 1 while the bug reproduces, 0 once it is fixed. Run: python docs/repros/torch_inductor_scan_sum_carry.py

Measured: torch 2.13.0 (CPU): silently wrong; every lane of the gradient carry takes lane 0's value
(d h0 and d xs for lanes 1.. are off; lane 0 is right). Smallest case: T=1, n=2, h0 requiring grad.
torch 2.9.0 (CPU, with capture_scalar_outputs): the same code path fails to lower instead
(LoweringException: AssertionError in lowering.slice_), weighted losses compile and are right.
backend="aot_eager", the eager scan and a compiled Python loop are right on both versions.

Mechanism: the cotangent of h_T.sum() is expand(scalar, [n]) (stride 0); the backward scan carries it
as its initial gradient carry, and inductor's while_loop lowering forces every loop-carried buffer and
body output to the exact strides of that stride-0 example (ir.WhileLoop.create -> require_exact_strides),
which require_strides realizes by slicing each stride-0 dim to element 0 and expanding, so after the
first step every lane of the carried gradient holds lane 0's value.
"""
import sys

import numpy as np
import torch
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # torch 2.9.0 needs it to compile scan's while_loop


def truth(h0, xs, w):
    """d/d h0 and d/d xs of sum(w * h_T) for h_t = h_{t-1} * x_t + x_t, float64 numpy."""
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
        hT, ys = scan(combine, h0, xs)
        return (hT * w).sum() if weighted else hT.sum()

    torch._dynamo.reset()
    h0_t = torch.tensor(h0, requires_grad=True)
    xs_t = torch.tensor(xs, requires_grad=True)
    loss = torch.compile(f, backend="inductor", fullgraph=True)(h0_t, xs_t, torch.tensor(w))
    return [g.detach().numpy() for g in torch.autograd.grad(loss, [h0_t, xs_t])]


print(f"torch {torch.__version__}: compiled scan, gradients of the final-carry loss vs analytic float64")
rng = np.random.default_rng(0)
bad = False
for T, n in [(3, 3), (1, 2)]:
    h0, xs, w = rng.uniform(0.5, 1.5, n), rng.uniform(0.5, 1.5, (T, n)), rng.uniform(0.5, 1.5, n)
    for weighted in (False, True):
        name = f"T={T} n={n} loss={'(h_T * w).sum()' if weighted else 'h_T.sum()      '}"
        want = truth(h0, xs, w if weighted else np.ones(n))
        try:
            got = compiled_grads(h0, xs, w, weighted)
        except Exception as e:  # torch 2.9.0 fails to lower the stride-0 carry instead
            print(f"  {name}  compile RAISED {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            bad = True
            continue
        err = max(float(np.max(np.abs(g - v)) / np.max(np.abs(v))) for g, v in zip(got, want))
        print(f"  {name}  d h0 got {np.round(got[0], 6)} want {np.round(want[0], 6)}  max rel err {err:.3g}")
        bad |= err > 1e-9
if bad:
    print("MISMATCH: compiled scan's gradient of an unweighted sum of the final carry is wrong")
    sys.exit(1)
print("OK: compiled scan agrees with the analytic float64 gradient")
