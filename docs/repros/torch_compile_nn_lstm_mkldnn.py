#!/usr/bin/env python
"""torch.compile (inductor) of torch.nn.LSTM with torch._dynamo.config.allow_rnn = True on a CPU: at
float32, with an input that does not require grad (torch then picks its MKLDNN LSTM kernel), the
compiled training step raises "TypeError: expected Tensor() for op:
torch.ops.aten.mkldnn_rnn_layer.default": the null MKLDNN workspace of pytorch#185163 (root cause C
there; #158007). An error, not a wrong value. float64, and float32 with an input that requires grad,
take the decomposed path and agree with eager; nn.GRU has no MKLDNN kernel and agrees at both dtypes.

Needs only torch. Exits 1 while the error reproduces, 0 once the compiled gradients agree with
eager, 3 where torch does not take the MKLDNN path here (MKLDNN off: cannot decide).
Run: python docs/repros/torch_compile_nn_lstm_mkldnn.py
"""
import sys

import torch

if not torch._C._get_mkldnn_enabled():
    print("MKLDNN is not enabled in this torch build: the path cannot be reached here")
    sys.exit(3)
torch.manual_seed(0)
lstm = torch.nn.LSTM(8, 16)
x = torch.randn(5, 4, 8)  # no grad: the MKLDNN kernel's condition


def loss(x):
    y, _ = lstm(x)
    return (y * y).sum()


want = torch.autograd.grad(loss(x), list(lstm.parameters()))
with torch._dynamo.config.patch(allow_rnn=True):
    compiled = torch.compile(loss, backend="inductor", fullgraph=True)
    try:
        got = torch.autograd.grad(compiled(x), list(lstm.parameters()))
    except Exception as exc:
        print(f"torch {torch.__version__}: compiled nn.LSTM raises {type(exc).__name__}: {str(exc)[:200]}")
        sys.exit(1)
err = max(float((a - b).abs().max()) for a, b in zip(got, want))
print(f"torch {torch.__version__}: compiled nn.LSTM runs; largest gradient difference from eager {err:.3g}")
sys.exit(0 if err < 1e-4 else 1)
