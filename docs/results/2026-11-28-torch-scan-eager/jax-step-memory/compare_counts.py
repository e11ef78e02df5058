"""jax's step-memory count, eager (jax.vjp run op by op: the count as first written) against traced
(rnnbench.drivers._jax.residual_bytes: the jaxpr of the vjp), on every jax/flax driver x core model at
default sizes, with each one's CPU time. Run from the repository root:
    nice -n 10 .venv/bin/python docs/results/2026-11-28-torch-scan-eager/jax-step-memory/compare_counts.py all float32
"""
import sys, time
import numpy as np
import jax
from rnnbench import registry
from rnnbench.drivers import _jax

captured = {}
def eager_residual_bytes(loss_fn, diff, rest):
    _, vjp_fn = jax.vjp(lambda d: loss_fn(d, rest), diff)
    own = {id(x) for x in jax.tree_util.tree_leaves((diff, rest))}
    kept = {id(x): x for x in jax.tree_util.tree_leaves(vjp_fn) if hasattr(x, "nbytes") and id(x) not in own}
    return int(sum(x.nbytes for x in kept.values()))
def spy(loss_fn, diff, rest):
    t = time.process_time(); a = eager_residual_bytes(loss_fn, diff, rest); ta = time.process_time() - t
    t = time.process_time(); b = traced_impl(loss_fn, diff, rest); tb = time.process_time() - t
    captured["r"] = (a, ta, b, tb)
    return a
traced_impl = _jax.residual_bytes  # the module's (traced) count
_jax.residual_bytes = spy
models = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] != "all" else [m for m, mm in registry.models().items() if mm.suite == "core"]
drivers = [n for n, d in registry.drivers().items() if d.framework.name in ("jax", "flax") and "cpu" in d.devices]
dtype = sys.argv[2] if len(sys.argv) > 2 else "float32"
for m in models:
    model = registry.get_model(m)
    for drv in drivers:
        d = registry.get_driver(drv)
        if d.supports(model) is not None or dtype not in d.dtypes: continue
        case = model.make_case(model.sizes_with_defaults({}), 0).rounded_to(dtype)
        try:
            p = d.prepare(model, case, dtype, "cpu")
            p.loss_and_grads()
            p.saved_for_backward()
            a, ta, b, tb = captured["r"]
            print(f"{m:14s} {drv:24s} eager {a:8d} B {ta:5.2f} s | traced {b:8d} B {tb:5.2f} s {'SAME' if a == b else 'DIFF'}", flush=True)
        except Exception as e:
            print(f"{m:14s} {drv:24s} error {type(e).__name__}: {str(e)[:150]}", flush=True)
