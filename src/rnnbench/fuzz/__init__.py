"""Loop-body fuzzer: random step bodies from a small grammar, run on every driver, checked against
the oracle ladder (gradients and Hessian-vector products: exact dual numbers, finite differences only
where a step has no derivative), failures shrunk to a minimal body."""
