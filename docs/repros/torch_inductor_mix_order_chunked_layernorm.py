#!/usr/bin/env python
"""pytorch#193061: torch.compile (inductor) gave silently wrong gradients for LayerNorms whose gains
and shifts are chunk()ed from one parameter (the LSTM gates of rnnbench's lstm_ln model, AdaLN's
scale-shift tables): the gradient of each chunk is a column reduction written into a view of the one
gradient buffer, and inductor's mix-order reduction (a row reduction fused with a column reduction
reading the same buffer) rebinds that output instead of writing the view (fix pytorch#193103;
workaround TORCHINDUCTOR_MIX_ORDER_REDUCTION=0).

Four gates' pre-activations z (B, 4H) split into (B, H) slices, each LayerNormed with gain and shift
chunks of one parameter (8H,), at B=8192, H=1024: past the fusion's size threshold (rows * cols >=
5 * 2**20, rows >= 2 * cols, rows >= 4096: torch/_inductor/scheduler.py MixOrderReduction.can_fuse).
float32, against eager autograd.

Needs only torch; the fusion exists for GPU Triton kernels only, so on a CPU (or without CUDA) it
cannot be reached. Exits 3 when inductor generated no mix-order kernel (cannot decide here), 1 when
it did and a gradient differs from eager, 0 when it did and all agree.
Run: python docs/repros/torch_inductor_mix_order_chunked_layernorm.py
"""
import sys

import torch
from torch._inductor import metrics

device = "cuda" if torch.cuda.is_available() else "cpu"
B, H = 8192, 1024
torch.manual_seed(0)
z = torch.randn(B, 4 * H, device=device, requires_grad=True)
ln = torch.cat([1 + 0.2 * torch.rand(4 * H), 0.2 * torch.rand(4 * H)]).to(device).requires_grad_()
w = torch.randn(B, 4 * H, device=device)


def loss(z, ln):
    chunks = ln.chunk(8)
    out = []
    for q, zq in enumerate(z.chunk(4, dim=-1)):
        c = zq - zq.mean(-1, keepdim=True)
        out.append(c / torch.sqrt((c * c).mean(-1, keepdim=True) + 1e-5) * chunks[q] + chunks[4 + q])
    return (torch.cat(out, -1) * w).sum()


want = torch.autograd.grad(loss(z, ln), (z, ln))
metrics.reset()
got = torch.autograd.grad(torch.compile(loss, fullgraph=True)(z, ln), (z, ln))
fused = metrics.codegen_mix_order_reduction
err = [float((a - b).abs().max() / b.abs().max()) for a, b in zip(got, want)]
print(f"torch {torch.__version__} on {device}: {fused} mix-order kernels; relative |dz|, |dln| error {err[0]:.2g}, {err[1]:.2g}")
if fused == 0:
    sys.exit(3)
sys.exit(1 if max(err) > 1e-3 else 0)
