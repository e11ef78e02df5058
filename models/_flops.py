"""Analytic FLOP counts for the roofline, with one convention for every model.

- A matmul (m, k) @ (k, n) costs 2 m k n.
- An elementwise op costs 1 per output element, transcendental ones (tanh, sigmoid, division)
  included: their hardware cost is higher, so elementwise-bound models are *over*-credited, never
  under-credited, and still sit far below the GEMM peak they are compared with.
- Backward of a matmul costs its forward once per operand that needs a gradient (dA = G B^T,
  dB = A^T G), which is why `matmul_bwd` is passed in explicitly per model.
- Backward of an elementwise op costs 2 per forward flop (local derivative, then the chain product).

fwd_bwd counts the forward pass plus the backward pass, as one training step would run them.
"""

from __future__ import annotations


def count(matmul_fwd: float, matmul_bwd: float, elementwise_fwd: float) -> dict[str, float]:
    """{"fwd", "fwd_bwd"}: all flops; {"matmul_fwd", "matmul_fwd_bwd"}: the matmul part alone,
    which tests check against torch's own FLOP counter on the Python-loop driver."""
    fwd = float(matmul_fwd + elementwise_fwd)
    return {
        "fwd": fwd,
        "fwd_bwd": fwd + float(matmul_bwd + 2 * elementwise_fwd),
        "matmul_fwd": float(matmul_fwd),
        "matmul_fwd_bwd": float(matmul_fwd + matmul_bwd),
    }
