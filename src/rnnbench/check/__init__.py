"""Gradient checking: the oracle ladder (exact dual numbers, 50 digits where float64 may not resolve
the gradient, finite differences only where a step has no derivative), the one tolerance policy,
and the per-parameter verdict.

By kind: this package's own modules are the measure every part shares (tolerance, compare);
differentiation/ computes derivatives itself, bugs/ holds the known-issues registry, oracles/ what
a row is judged against, verdicts/ a driver's output against them. See docs/architecture.md."""
