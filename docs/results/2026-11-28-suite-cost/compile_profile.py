"""Where a compiled torch driver's first calls go, inside one check_recurrence: per (driver, loss
form) the wall and CPU seconds of check_pair (own + children), torch's own compile phases
(torch._dynamo.utils.compile_times: dynamo tracing, AOT autograd, inductor codegen, compile_file =
the C++ compiler) and every C++ compiler invocation (kind, seconds).

    python compile_profile.py readme|gru OUT.json [driver,driver,...]
Environment: TORCHINDUCTOR_COMPILE_THREADS etc. as the caller sets them (run_profile.sh).
"""

import json
import os
import sys
import time
from collections import defaultdict

T0 = time.perf_counter()
import torch  # noqa: E402
import torch._dynamo.utils as dutils  # noqa: E402
from torch._inductor import cpp_builder  # noqa: E402

import rnnbench  # noqa: E402
from rnnbench.run import pair  # noqa: E402

IMPORT_S = time.perf_counter() - T0
PAIRS: list = []  # one entry per check_pair
CURRENT: dict = {}
GXX: list = []


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def snapshot_metrics() -> None:
    """torch._dynamo.reset() clears compile_times: keep the current pair's before it does."""
    if CURRENT:
        for key, values in dutils.compilation_time_metrics.items():
            CURRENT["torch"][key] += sum(values)


_reset = torch._dynamo.reset


def reset(*a, **k):
    snapshot_metrics()
    dutils.compilation_time_metrics.clear()
    return _reset(*a, **k)


torch._dynamo.reset = reset
_run_compile_cmd = cpp_builder.run_compile_cmd


def run_compile_cmd(cmd_line, cwd):
    started = time.perf_counter()
    try:
        return _run_compile_cmd(cmd_line, cwd)
    finally:
        target = cmd_line.split(" -o ")[-1]
        kind = (
            "preprocess (-E)" if " -E " in cmd_line else "precompiled header" if ".gch" in target else "kernel / module"
        )
        GXX.append({"pair": CURRENT.get("name"), "kind": kind, "s": time.perf_counter() - started})


cpp_builder.run_compile_cmd = run_compile_cmd
_check_pair = pair.check_pair


def check_pair(model, driver, case, dtype, device, plan):
    snapshot_metrics()
    dutils.compilation_time_metrics.clear()
    name = f"{driver.name} #{sum(p['driver'] == driver.name for p in PAIRS)}"
    CURRENT.clear()
    CURRENT.update(name=name, torch=defaultdict(float))
    wall0, cpu0 = time.perf_counter(), cpu_s()
    try:
        return _check_pair(model, driver, case, dtype, device, plan)
    finally:
        snapshot_metrics()
        dutils.compilation_time_metrics.clear()
        PAIRS.append(
            {
                "driver": driver.name,
                "name": name,
                "wall_s": time.perf_counter() - wall0,
                "cpu_s": cpu_s() - cpu0,
                "torch": {k: round(v, 3) for k, v in CURRENT["torch"].items() if v >= 0.01},
            }
        )
        CURRENT.clear()


pair.check_pair = check_pair
sys.path.insert(0, os.path.dirname(__file__))
import phases  # noqa: E402  (the README example and the GRU, as phases.py writes them)

pair.check_pair = check_pair  # phases wraps it too: keep ours outermost

if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    load_before = os.getloadavg()
    wall0, cpu0 = time.perf_counter(), cpu_s()
    if len(sys.argv) > 3:
        names = sys.argv[3].split(",")
        _check = rnnbench.check_recurrence
        rnnbench.check_recurrence = lambda *a, **k: _check(*a, **{**k, "drivers": names})
    report = {"readme": phases.readme, "gru": phases.gru}[what]()
    result = {
        "what": what,
        "import_s": IMPORT_S,
        "check_wall_s": time.perf_counter() - wall0,
        "check_cpu_s": cpu_s() - cpu0,
        "process_wall_s": time.perf_counter() - T0,
        "process_cpu_s": cpu_s(),
        "compile_threads": torch._inductor.config.compile_threads,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rows": [[r.driver, r.loss, str(r.status), str(r.hvp_status)] for r in report.results],
        "pairs": PAIRS,
        "compiler": GXX,
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    for p in PAIRS:
        if p["wall_s"] > 0.3:
            top = sorted(p["torch"].items(), key=lambda kv: -kv[1])[:6]
            print(
                f"{p['wall_s']:6.2f} s wall {p['cpu_s']:6.2f} s cpu  {p['name']:<36} "
                + ", ".join(f"{k} {v:.2f}" for k, v in top)
            )
    kinds = defaultdict(lambda: [0, 0.0])
    for g in GXX:
        kinds[g["kind"]][0] += 1
        kinds[g["kind"]][1] += g["s"]
    for k, (n, s) in kinds.items():
        print(f"C++ compiler, {k}: {n} calls, {s:.2f} s")
    print(
        f"import {IMPORT_S:.1f} s; check {result['check_wall_s']:.1f} s wall {result['check_cpu_s']:.1f} s cpu; "
        f"process {result['process_wall_s']:.1f} s wall {result['process_cpu_s']:.1f} s cpu; "
        f"threads {result['compile_threads']}; load {load_before} -> {result['load_after']}"
    )
