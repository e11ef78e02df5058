"""torch_xla 2.9.0: torch_xla.experimental.scan raises when a step output depends on nothing
differentiable (y = x with xs not requiring grad); jax.lax.scan and torch's scan accept it.
Run with PJRT_DEVICE=CPU in the torch_xla environment. Found by `rnnbench fuzz` (not registered:
the fuzzer's other torch_xla_scan errors, AssertionError in aot_autograd, are not yet reduced)."""
import torch, torch_xla
from torch_xla.experimental.scan import scan
dev = torch_xla.device()
w = torch.tensor([0.5], device=dev, requires_grad=True)
xs = torch.ones(3, 1, device=dev)            # per-step inputs, no grad
def step(c, x):
    return c * 2, x.clone()                  # y does not depend on anything differentiable
for name, fn in [("y = x", step), ("y = c * x", lambda c, x: (c * 2, c * x))]:
    try:
        c, ys = scan(fn, w, xs)
        (c.sum() + ys.sum()).backward()
        print(name, "ok, grad", w.grad.cpu().tolist()); w.grad = None
    except Exception as e:
        print(name, "raises", type(e).__name__, str(e)[:100])
