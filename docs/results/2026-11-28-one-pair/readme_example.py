"""The README's check_recurrence example; its report written as JSON rows (argv[1]) for a before/after comparison."""

import json
import sys
import time

import numpy as np

import rnnbench


def step(ops, params, carry, x):  # written once; ops is numpy, torch or jax
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


started = time.perf_counter()
report = rnnbench.check_recurrence(step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))
wall = time.perf_counter() - started
print(report)
rows = [
    {k: v if isinstance(v, (int, float, type(None))) else str(v) for k, v in vars(r).items() if k != "grad_errors"}
    for r in report.results
]
with open(sys.argv[1], "w") as f:
    json.dump({"oracle_kind": str(report.oracle_kind), "ok": report.ok, "rows": rows, "wall_s": wall}, f, indent=1)
print("wall", wall)
