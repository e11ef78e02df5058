"""Where torch_scan_compiled's time goes, against the same RNN as a compiled unbind loop.

    python docs/profiles/torch_scan_compiled_saved_weight.py [T] [H]

Standalone (torch only). Elman RNN, B=32, I=128, float32, one thread, pinned to one CPU. Prints
each form's fwd+bwd median, then, for the compiled scan: the (T, H, H) buffers in inductor's
generated code (the closed-over W_hh^T saved once per step, and its reversed copy), and the
kernels that take the time (cProfile of 5 calls, by internal time).
"""

from __future__ import annotations

import cProfile
import glob
import os
import pstats
import re
import sys
import tempfile
import time

os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
CACHE = tempfile.mkdtemp(prefix="scanprof-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = CACHE  # an empty cache: the generated code below is this run's
os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._higher_order_ops.scan import scan  # noqa: E402

torch.set_num_threads(1)
T = int(sys.argv[1]) if len(sys.argv) > 1 else 128
H = int(sys.argv[2]) if len(sys.argv) > 2 else 256
B, I = 32, 128
g = torch.Generator().manual_seed(0)
W_ih = (torch.randn(H, I, generator=g) / I**0.5).requires_grad_()
W_hh = (torch.randn(H, H, generator=g) / H**0.5).requires_grad_()
b = torch.zeros(H, requires_grad=True)
xs, h0, wy = torch.randn(T, B, I, generator=g), torch.zeros(B, H), torch.randn(T, B, H, generator=g)


def scan_loss(W_ih, W_hh, b):
    xp, W_hh_t = F.linear(xs, W_ih, b), W_hh.t()

    def cell(carry, x):
        h = torch.tanh(torch.addmm(x, carry[0], W_hh_t))
        return (h.clone(),), h.clone()  # carry cloned: torch 2.13's inductor refuses the aliasing form

    _, ys = scan(cell, (h0,), xp)
    return (ys * wy).sum()


def loop_loss(W_ih, W_hh, b):
    xp, W_hh_t, h, ys = F.linear(xs, W_ih, b), W_hh.t(), h0, []
    for x in xp.unbind(0):
        h = torch.tanh(torch.addmm(x, h, W_hh_t))
        ys.append(h)
    return (torch.stack(ys) * wy).sum()


def step(fn):
    for p in (W_ih, W_hh, b):
        p.grad = None
    fn(W_ih, W_hh, b).backward()


def median_ms(fn, n=15):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step(fn)
        times.append(time.perf_counter() - start)
    return sorted(times)[n // 2] * 1e3


compiled = {"scan": torch.compile(scan_loss, fullgraph=True), "unbind loop": torch.compile(loop_loss, fullgraph=True)}
for name, fn in compiled.items():
    step(fn), step(fn), step(fn)
print(f"torch {torch.__version__}, RNN T={T} B={B} I={I} H={H}, float32, 1 thread")
for _ in range(2):  # interleaved
    print("  fwd+bwd median ms: " + ", ".join(f"{name} {median_ms(fn):.1f}" for name, fn in compiled.items()))

stack = f"({T}, {H}, {H})"
print(f"\n(T, H, H) = {stack} float32 buffers ({T * H * H * 4 / 2**20:.0f} MiB each) in inductor's generated code:")
for path in sorted(glob.glob(f"{CACHE}/**/*.py", recursive=True)):
    for line in open(path):
        if f"empty_strided_cpu({stack}" in line or re.search(rf"rand_strided\({re.escape(stack)}", line):
            print(f"  {os.path.basename(path)[:12]}: {line.strip()[:110]}")

profile = cProfile.Profile()
profile.enable()
for _ in range(5):
    step(compiled["scan"])
profile.disable()
print("\ncompiled scan, 5 calls, by internal time (kernel.kernel = an inductor C++ kernel; torch.mm/addmm = the matmuls):")
pstats.Stats(profile).sort_stats("tottime").print_stats(6)

import shutil  # noqa: E402

shutil.rmtree(CACHE, ignore_errors=True)
