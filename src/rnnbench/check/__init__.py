"""Gradient checking: the one tolerance policy, finite differences, and the per-parameter verdict."""
