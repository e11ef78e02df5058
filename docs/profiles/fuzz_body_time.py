"""Where a fuzzed body's time goes: `rnnbench fuzz` default settings (loss forms weighted, sum_carry,
mean, last_y; float64; second order) on every default driver, in this process, each component timed.

Components (seconds summed over bodies x loss forms x drivers):
  build       rnnbench.fuzz.cases.build: the case and its first-order oracle. Each driver's worker
              builds every body itself, so it is paid once per driver.
  oracle      the first-order oracle alone (inside build)
  hvp_oracle  the second-order oracle (once per body and driver worker)
  check       check_gradients: prepare, trace/compile and first call of the driver, and the judge
  hvp         the driver's H v call and its judge (check_second_order minus the oracle)
  startup     one worker's start: python -m rnnbench.fuzz.isolated's imports (measured apart)

Usage: python docs/profiles/fuzz_body_time.py [BODIES] [SEED]   (default 6 bodies, seed 0)
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict

TIMES: dict[str, float] = defaultdict(float)


def timed(name: str, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[name] += time.perf_counter() - start

    return wrapper


def main(bodies: int, seed: int) -> None:
    from rnnbench import losses
    from rnnbench.cli import fuzz_drivers
    from rnnbench.fuzz import cases, runner

    drivers = fuzz_drivers(None, "float64")
    for attr in ("finite_difference_oracle", "exact_oracle"):  # the oracle build calls (before / after)
        if hasattr(cases, attr):
            setattr(cases, attr, timed("oracle", getattr(cases, attr)))
    build = timed("build", cases.build)
    hvp_oracle = cases.FuzzCase.hvp_oracle
    cases.FuzzCase.hvp_oracle = lambda self: timed("hvp_oracle", hvp_oracle)(self)
    runner.check_gradients = timed("check", runner.check_gradients)
    runner.check_second_order = timed("hvp+hvp_oracle", runner.check_second_order)
    per_driver: dict[str, float] = defaultdict(float)
    judged = bodies * len(losses.CHECKED)
    wall = time.perf_counter()
    for driver in drivers:
        start = time.perf_counter()
        for index in range(judged):
            from rnnbench.fuzz.grammar import judged_body

            fc = build(judged_body(seed, index, losses.CHECKED), dtype="float64")
            if fc.ill_conditioned is None:
                fc.hvp_oracle()  # computed before check_second_order reads it (as in run_driver)
                runner.run_driver(fc, driver, "float64", second_order=True)
        per_driver[driver.name] = time.perf_counter() - start
    wall = time.perf_counter() - wall
    TIMES["hvp"] = TIMES.pop("hvp+hvp_oracle", 0.0)  # the oracle was computed before the call
    print(f"{bodies} bodies x {len(losses.CHECKED)} losses x {len(drivers)} drivers, float64, second order; "
          f"wall {wall:.1f} s")
    for name in ("build", "oracle", "hvp_oracle", "check", "hvp"):
        print(f"  {name:<11} {TIMES[name]:8.2f} s  ({100 * TIMES[name] / wall:5.1f} % of wall)")
    for name, seconds in per_driver.items():
        print(f"  driver {name:<26} {seconds:7.2f} s")
    modules = sorted({d.framework.module for d in drivers})
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import rnnbench.fuzz.isolated, importlib; "
                    f"[importlib.import_module(m) for m in {modules!r}]"], check=True)
    print(f"  startup     {time.perf_counter() - start:8.2f} s  (one worker: imports of {', '.join(modules)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
