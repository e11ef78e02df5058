"""Gradient checking: the oracle ladder (exact dual numbers, 50 digits where float64 may not resolve
the gradient, finite differences only where a step has no derivative), the one tolerance policy,
and the per-parameter verdict."""
