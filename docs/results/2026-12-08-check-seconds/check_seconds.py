"""The README's check_recurrence example, or a user GRU, on every driver (drivers="all"), timed; every row's
verdict written to OUT.json for comparing two runs (same_statuses.py).

    python check_seconds.py readme|gru OUT.json

Prints one line: wall and CPU seconds of the check (CPU: this process and its waited-for children, which is
where inductor's compiler calls run)."""

import json
import os
import resource
import sys
import time

import numpy as np

import rnnbench


def cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def readme():
    def step(ops, params, carry, x):
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    return rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)), drivers="all"
    )


def gru():
    rng = np.random.default_rng(0)
    H, I, T = 8, 4, 16

    def step(ops, p, carry, x):
        (h,) = carry
        z = ops.sigmoid(ops.matmul(p["Wz"], x) + ops.matmul(p["Uz"], h) + p["bz"])
        r = ops.sigmoid(ops.matmul(p["Wr"], x) + ops.matmul(p["Ur"], h) + p["br"])
        n = ops.tanh(ops.matmul(p["Wn"], x) + r * ops.matmul(p["Un"], h) + p["bn"])
        h = (1 - z) * n + z * h
        return (h,), h

    params = {k: 0.3 * rng.standard_normal((H, I)) for k in ("Wz", "Wr", "Wn")}
    params |= {k: 0.3 * rng.standard_normal((H, H)) for k in ("Uz", "Ur", "Un")}
    params |= {k: 0.1 * rng.standard_normal(H) for k in ("bz", "br", "bn")}
    return rnnbench.check_recurrence(
        step, params=params, carry0=(np.zeros(H),), xs=rng.standard_normal((T, I)), drivers="all"
    )


if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    wall, cpu, load = time.perf_counter(), cpu_s(), os.getloadavg()[0]
    report = {"readme": readme, "gru": gru}[what]()
    wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    rows = [
        [
            r.driver,
            r.loss,
            str(r.status),
            None if r.max_rel_error is None else f"{r.max_rel_error:.3g}",
            str(r.hvp_status),
        ]
        for r in report.results
    ]
    with open(out, "w") as f:
        json.dump(
            {"wall_s": wall, "cpu_s": cpu, "load_before": load, "load_after": os.getloadavg()[0], "rows": rows}, f
        )
    print(f"{what}: check {wall:.1f} s wall, {cpu:.1f} s CPU, load {load:.1f} -> {os.getloadavg()[0]:.1f}")
