#!/usr/bin/env python
"""torch_xla.experimental.scan cannot trace a step that closes over a tensor: AssertionError "Please
convert all Tensors to FakeTensors first or instantiate FakeTensorMode with allow_non_fake_inputs"
(AOTAutograd meets the captured XLA tensor), whether or not it requires grad. torch's own scan and
jax.lax.scan accept closures; the workaround is to pass the tensor through the carry or xs.

Run with PJRT_DEVICE=CPU. Standalone: torch, torch_xla, numpy. Exit 1 while the bug reproduces,
0 once the gradient through the closure is right, 3 when it runs but the gradient is wrong.
"""
import sys

import numpy as np
import torch
import torch_xla
from torch_xla.experimental.scan import scan

dev = torch_xla.device()
a0, c0, xs0 = np.array([0.7, -0.4]), np.array([0.2, 0.1]), np.array([[0.5, -0.3], [0.1, 0.9], [-0.6, 0.4]])


def truth() -> np.ndarray:
    """d/da of sum(ys) for c_t = a * c_{t-1} + x_t, y_t = c_t (hand BPTT, float64)."""
    cs = [c0]
    for x in xs0:
        cs.append(a0 * cs[-1] + x)
    g, da = np.zeros(2), np.zeros(2)
    for t in range(len(xs0), 0, -1):
        g = g + 1.0
        da += g * cs[t - 1]
        g = g * a0
    return da


a = torch.tensor(a0, device=dev, requires_grad=True)
print(f"torch_xla {torch_xla.__version__}: a step that closes over `a`")
try:
    _, ys = scan(lambda c, x: (a * c + x, a * c + x), torch.tensor(c0, device=dev), torch.tensor(xs0, device=dev))
    ys.sum().backward()
except Exception as e:  # noqa: BLE001
    text = " ".join(f"{type(e).__name__}: {e}".split())
    print("scan RAISED", text[:200])
    if "Please convert all Tensors to FakeTensors" in text:
        print("got: the error above; want d loss/d a =", truth())
        sys.exit(1)
    sys.exit(3)
got = a.grad.cpu().numpy()
print(f"got {got}, want {truth()}")
sys.exit(0 if np.allclose(got, truth(), rtol=1e-9, atol=1e-12) else 3)
