"""The one tolerance policy. Every comparison in rnnbench (CLI, asv, pytest) goes through here.

Error metric (see compare.py): for each compared input p,
    err_p = max_i |g_i - r_i| / max(max_i |r_i|, SCALE_FLOOR * G)
where r is the float64 oracle and G is the largest |r| over all inputs of the case. Normwise
relative error, not elementwise: in a sum of many products an entry's absolute error is set by the
magnitudes summed, not by the entry, so small entries have large elementwise error in a correct
computation. SCALE_FLOOR keeps an input whose true gradient is ~0 (the initial iterate of a
converged Newton iteration) from turning roundoff into an infinite relative error, while a wrong
gradient of O(G) still shows as err >= 1/SCALE_FLOOR-scaled, i.e. far beyond any tolerance.
ABSOLUTE_SCALE does the same when every gradient of the case is ~0 (a stationary point: d/dx cos(x)
at x = pi; a parameter that does not reach the loss): the scale never goes below ABSOLUTE_SCALE *
max(1, |loss|), so such entries are compared absolutely, against the case's loss scale.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

SCALE_FLOOR = 1e-3

# Unit roundoff per dtype: a forward whose condition number times this exceeds the tolerance cannot
# be judged at that dtype (compare.forward_rounding_bound).
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-8}

# eps: float64 1.1e-16, float32 6.0e-8 (unit roundoff), bfloat16 3.9e-3.
_MAX_REL_ERROR = {
    # Analytic oracle, float64 driver: roundoff grows with trip count and the conditioning of the
    # recurrence (~T * cond * eps). Measured max over all models and drivers at default sizes:
    # see README "Tolerances". 1e-9 leaves ~4 decades of margin; any real bug measured so far
    # (docs/bugs.md §1: 3e-1, §3: 1e-2) is >= 1e-3.
    ("float64", "analytic"): 1e-9,
    # Finite-difference oracle (check/differentiation/finite_diff.py: 5-point stencil with a step per entry and one
    # Richardson step): ~1e-11 relative on our cases; 1e-6 covers steeper user functions. Where
    # the oracle's own error bound exceeds this, the bound decides (compare.py: cannot_decide).
    ("float64", "finite_differences"): 1e-6,
    # float32 drivers vs the float64 oracle on the float32-rounded inputs: ~T * cond * 6e-8; the
    # worst measured case (taylor_expm, K=12, ||A||~2) sits near 1e-5. JAX's check_grads uses 2e-3.
    ("float32", "analytic"): 1e-4,
    ("float32", "finite_differences"): 1e-4,
    # Finite-difference Hessian-vector products (check/differentiation/hvp.py: mixed central difference, h=2e-3,
    # one Richardson step): roundoff ~eps |L| / h^2 ~ 3e-11 |L|, truncation ~h^4 ~ 2e-11 times the
    # fifth derivatives; 1e-5 covers the steeper fuzzed bodies (jax_loop on 150 fuzzed bodies:
    # at most 4.1e-7) and is still 100x under the O(1e-3..1) errors of wrong rules.
    ("float64", "finite_differences_hvp"): 1e-5,
    # Gradient differences of an analytic oracle along v (check/differentiation/hvp.py, h=1e-3, one Richardson
    # step): truncation ~h^4 ~ 1e-12, roundoff ~eps |g| / h ~ 1e-13 relative to g, more relative
    # to a small H v. Correct drivers measured at most 1.5e-9 (rnn, default sizes); 1e-6 leaves a
    # margin of ~700 and is 5 decades under the smallest wrong H v measured (0.26, torch_scan).
    ("float64", "gradient_differences_hvp"): 1e-6,
    # bfloat16 (8-bit mantissa): single roundings are 4e-3; accumulation over steps goes beyond.
    ("bfloat16", "analytic"): 5e-2,
    ("bfloat16", "finite_differences"): 5e-2,
}


# Gradients and H v entries below this fraction of max(1, |loss|) set no finer scale: roundoff in
# d loss/d x grows with |L| (float32: ~6e-8 |L| times the recurrence's growth, against a tolerance of
# 1e-4), the loss-difference H v oracle's is ~1e-11 |L| (eps |L| / h^2, h = 2e-3). Without it a
# stationary point or a loss linear in some input (true value 0) compares noise against noise. The
# cost: an input whose every gradient is below 1e-3 |L| has its errors measured against 1e-3 |L|, so
# a wrong gradient there must exceed tolerance * 1e-3 |L| to show (float64: 1e-12 |L| against an
# exact oracle, 1e-9 |L| against finite differences); an input with gradients of the loss's own
# order is unaffected.
ABSOLUTE_SCALE = 1e-3


@dataclass(frozen=True)
class Tolerance:
    max_rel_error: float
    scale_floor: float
    dtype: str
    oracle: str
    absolute_scale: float = 0.0  # the error scale never goes below this (see compare.py)


def tolerance(dtype: str, oracle_kind: str, device: str = "cpu") -> Tolerance:
    """Tolerance for a driver running at `dtype` on `device`, checked against an oracle of
    `oracle_kind` ("finite_differences" or any analytic kind). Device does not change the policy
    today: CUDA float32 matmuls may use TF32, which the drivers disable (torch
    allow_tf32=False, jax precision 'highest') rather than loosening tolerances."""
    kind = (
        oracle_kind
        if oracle_kind in ("finite_differences", "finite_differences_hvp", "gradient_differences_hvp")
        else "analytic"
    )
    try:
        return Tolerance(_MAX_REL_ERROR[(dtype, kind)], SCALE_FLOOR, dtype, kind)
    except KeyError:
        raise ValueError(f"no tolerance defined for dtype {dtype!r}") from None


def island_tolerance(oracle_kind: str, device: str = "cpu") -> Tolerance:
    """Tolerance for a gradient that flows only through an fp32 island (autocast disabled) of a step
    run under bf16 autocast (Model.island_grads). The island's semantics are float32 arithmetic, so
    its gradients get the float32 tolerance, not the bfloat16 one: a backward that silently runs the
    island's matmuls in bf16 (docs/bugs.md §3, measured 3e-3 normwise on rnn_fp32_island) is then 30x
    over tolerance, where the bf16 tolerance (5e-2) would hide it. Valid only when the bf16 regions
    of the forward are exact on the case's data (rnn_fp32_island uses dyadic inputs), so the island
    sees exactly the values the float64 oracle sees."""
    return tolerance("float32", oracle_kind, device)


def at_loss_scale(tol: Tolerance, loss: float) -> Tolerance:
    """`tol` on a case whose float64 loss is `loss` (sets the absolute scale, see ABSOLUTE_SCALE)."""
    return dataclasses.replace(tol, absolute_scale=ABSOLUTE_SCALE * max(1.0, abs(loss)) if np.isfinite(loss) else 0.0)


def hvp_tolerance(oracle_kind: str, loss: float) -> Tolerance:
    """Tolerance for a float64 Hessian-vector product against the `oracle_kind` H v oracle, on a case
    whose loss is `loss`."""
    return at_loss_scale(tolerance("float64", oracle_kind), loss)
