"""Where one check's seconds go: imports, the oracle, each driver's prepare + first call per loss
form, H v (driver and oracle), repeatability, with a cProfile of the whole check beside it.

    python phases.py readme OUT.json     # the README's check_recurrence example
    python phases.py gru OUT.json        # a user GRU on torch_loop, jax_lax_scan, torch_scan_compiled
Phases are wall-clock seconds of wrapped functions (nested phases are inside their parents: a
driver's H v contains its H v oracle). OUT.json gets the phases, the load and the report rows;
OUT.prof the cProfile (with --profile).
"""

import cProfile
import json
import os
import sys
import time
from collections import defaultdict

T0 = time.perf_counter()
PHASES: dict = defaultdict(float)
COUNTS: dict = defaultdict(int)


def timed(key, fn):
    def wrapper(*a, **k):
        started = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            PHASES[key] += time.perf_counter() - started
            COUNTS[key] += 1

    return wrapper


started = time.perf_counter()
import numpy as np  # noqa: E402

import rnnbench  # noqa: E402

PHASES["import rnnbench"] = time.perf_counter() - started
for lib in ("torch", "jax", "flax"):
    started = time.perf_counter()
    __import__(lib)
    PHASES[f"import {lib}"] = time.perf_counter() - started

from rnnbench import losses  # noqa: E402
from rnnbench.check import oracle as oracle_mod  # noqa: E402
from rnnbench.check import second_order as so  # noqa: E402
from rnnbench.run import pair  # noqa: E402

oracle_mod.oracle_grads = timed("oracle (first order)", oracle_mod.oracle_grads)
so.hvp_oracle = timed("oracle (H v)", so.hvp_oracle)
losses.with_loss = timed("loss forms (with_loss)", losses.with_loss)
pair.oracle_grads = oracle_mod.oracle_grads  # check_gradients's own name for it (a row's oracle)
pair.repeatability = timed("repeatability (second call)", pair.repeatability)
pair.second_order = timed("H v (driver + oracle)", pair.second_order)
_timed_call = pair.timed_call


def first_call(fn):
    key = f"first call {CURRENT[0]}"
    return timed(key, _timed_call)(fn)


pair.timed_call = first_call
CURRENT = [""]
_check_pair = pair.check_pair


def check_pair(model, driver, case, dtype, device, plan):
    CURRENT[0] = driver.name
    return timed(f"check_pair {driver.name}", _check_pair)(model, driver, case, dtype, device, plan)


pair.check_pair = check_pair


def readme():
    def step(ops, params, carry, x):
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    return rnnbench.check_recurrence(step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))


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
        step, params=params, carry0=(np.zeros(H),), xs=rng.standard_normal((T, I)),
        drivers=["torch_loop", "jax_lax_scan", "torch_scan_compiled"],
    )


def realistic():
    """One realistic-suite row in this process, as a worker runs it: lstm, T=128, B=32, I=H=256,
    float32, torch_loop (argv[3], argv[4] override the driver and T)."""
    from rnnbench.run import row, timing

    row.measure = timed("timing (measure)", row.measure)
    row.first_call = timed("timing (fwd first call)", row.first_call)
    row.check_pair = check_pair
    driver = sys.argv[3] if len(sys.argv) > 3 and not sys.argv[3].startswith("-") else "torch_loop"
    T = int(sys.argv[4]) if len(sys.argv) > 4 and not sys.argv[4].startswith("-") else 128
    job = row.Job(model="lstm", driver=driver, sizes={"T": T, "B": 32, "I": 256, "H": 256}, timing=timing.TimingConfig())
    return timed("run_row", row.run_row)(job)


if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    load_before = os.getloadavg()
    prof = cProfile.Profile() if "--profile" in sys.argv else None
    started = time.perf_counter()
    if prof:
        prof.enable()
    report = {"readme": readme, "gru": gru, "realistic": realistic}[what]()
    if prof:
        prof.disable()
        prof.dump_stats(out.replace(".json", ".prof"))
    check_s = time.perf_counter() - started
    if isinstance(report, dict):  # a row's record
        rows = [[report["driver"], report.get("loss"), report["status"], None]]
        report = type("Row", (), {"ok": report["status"] == "ok"})
    else:
        print(report)
        rows = [[r.driver, r.loss, str(r.status), str(r.hvp_status)] for r in report.results]
    result = {
        "what": what, "check_s": check_s, "process_s": time.perf_counter() - T0,
        "load_before": load_before, "load_after": os.getloadavg(), "ok": report.ok,
        "phases": {k: [round(v, 3), COUNTS.get(k, 1)] for k, v in sorted(PHASES.items(), key=lambda kv: -kv[1])},
        "rows": rows,
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    for k, (v, n) in result["phases"].items():
        print(f"{v:8.2f} s  x{n:<3} {k}")
    print(f"check {check_s:.1f} s, process {result['process_s']:.1f} s, load {load_before} -> {result['load_after']}")
