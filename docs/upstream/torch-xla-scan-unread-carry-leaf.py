#!/usr/bin/env python
"""torch_xla.experimental.scan's backward fails an assertion (_scan_impl_flat: "assert carry_len +
y_len == len(fn_outputs)") when the step never reads one of its carry leaves, e.g. carry (h, k)
with k' = a * x: the step's backward returns None for k, tree_flatten_none drops it, and the
reverse scan's body returns one carry leaf fewer than it was given.

Run with PJRT_DEVICE=CPU. Standalone: torch, torch_xla, numpy. Exit 1 while the bug reproduces,
0 once the gradient is right, 3 when it runs but the gradient is wrong.
"""
import sys

import numpy as np
import torch
import torch_xla
from torch_xla.experimental.scan import scan

dev = torch_xla.device()
a0, h0, xs0 = np.array([0.7, -0.4]), np.array([0.2, 0.1]), np.array([[0.5, -0.3], [0.1, 0.9], [-0.6, 0.4]])


def truth() -> np.ndarray:
    """d/da of sum(h_T) + sum(k_T), h_t = a h_{t-1} + x_t, k_t = a x_t (k_{t-1} unread)."""
    hs = [h0]
    for x in xs0:
        hs.append(a0 * hs[-1] + x)
    g, da = np.ones(2), np.zeros(2)
    for t in range(len(xs0), 0, -1):
        da += g * hs[t - 1]
        g = g * a0
    return da + xs0[-1]


a = torch.tensor(a0, device=dev, requires_grad=True)
print(f"torch_xla {torch_xla.__version__}: carry (a, h, k), the step never reads k")
try:
    (_, h_T, k_T), _ = scan(lambda c, x: ((c[0], c[0] * c[1] + x, c[0] * x), c[1] * 1.0),
                            (a, torch.tensor(h0, device=dev), torch.zeros(2, dtype=torch.float64, device=dev)),
                            torch.tensor(xs0, device=dev))
    (h_T.sum() + k_T.sum()).backward()
except Exception as e:  # noqa: BLE001
    import traceback

    text = traceback.format_exc()
    print("scan RAISED", type(e).__name__, next((ln.strip() for ln in text.splitlines() if "assert " in ln), "")[:160])
    if "assert carry_len + y_len == len(fn_outputs)" in text:
        print("got: the error above; want d loss/d a =", truth())
        sys.exit(1)
    sys.exit(3)
got = a.grad.cpu().numpy()
print(f"got {got}, want {truth()}")
sys.exit(0 if np.allclose(got, truth(), rtol=1e-9, atol=1e-12) else 3)
