"""Loop-body fuzzer: random step bodies from a small grammar, run on every driver, checked against
float64 finite differences (gradients and Hessian-vector products), failures shrunk to a minimal body."""
