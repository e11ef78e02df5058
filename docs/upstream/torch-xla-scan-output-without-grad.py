#!/usr/bin/env python
"""torch_xla.experimental.scan raises "element 1 of tensors does not require grad and does not have a
grad_fn" when a step output (a new carry leaf or y) depends on nothing that requires grad, e.g.
y = 2 * x with xs not differentiated. torch's scan and jax.lax.scan accept the same step.

Run with PJRT_DEVICE=CPU. Standalone: torch, torch_xla, numpy. Exit 1 while the bug reproduces,
0 once the gradient is right, 3 when it runs but the gradient is wrong.
"""
import sys

import numpy as np
import torch
import torch_xla
from torch_xla.experimental.scan import scan

dev = torch_xla.device()
a0, c0, xs0 = np.array([0.7, -0.4]), np.array([0.2, 0.1]), np.array([[0.5, -0.3], [0.1, 0.9], [-0.6, 0.4]])
wc = np.array([0.3, -0.8])


def truth() -> np.ndarray:
    """d/da of sum(wc * c_T) + sum(ys), c_t = a * c_{t-1} + x_t, y_t = 2 x_t (no parameter in ys)."""
    cs = [c0]
    for x in xs0:
        cs.append(a0 * cs[-1] + x)
    g, da = wc.copy(), np.zeros(2)
    for t in range(len(xs0), 0, -1):
        da += g * cs[t - 1]
        g = g * a0
    return da


a = torch.tensor(a0, device=dev, requires_grad=True)
print(f"torch_xla {torch_xla.__version__}: y = 2 * x, xs without grad; `a` enters through the carry")
try:
    (a_T, c_T), ys = scan(lambda carry, x: ((carry[0], carry[0] * carry[1] + x), 2 * x),
                          (a, torch.tensor(c0, device=dev)), torch.tensor(xs0, device=dev))
    ((c_T * torch.tensor(wc, device=dev)).sum() + ys.sum()).backward()
except Exception as e:  # noqa: BLE001
    text = " ".join(f"{type(e).__name__}: {e}".split())
    print("scan RAISED", text[:200])
    if "does not require grad and does not have a grad_fn" in text:
        print("got: the error above; want d loss/d a =", truth())
        sys.exit(1)
    sys.exit(3)
got = a.grad.cpu().numpy()
print(f"got {got}, want {truth()}")
sys.exit(0 if np.allclose(got, truth(), rtol=1e-9, atol=1e-12) else 3)
