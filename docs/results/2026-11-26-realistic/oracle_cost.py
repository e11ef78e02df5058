"""The float64 numpy oracle's cost at the realistic suite's sizes (docs/cli.md#the-realistic-suite).

    python docs/results/2026-11-26-realistic/oracle_cost.py

Per model and size: seconds to build the case and to run the model's hand oracle once (median of
REPEATS), with the load average before and after (the machine may be shared). Run it with
OPENBLAS_NUM_THREADS=1 and without: on a loaded machine numpy's two BLAS threads wait for each other.
"""

from __future__ import annotations

import statistics
import time

from rnnbench import registry

REPEATS = 2
SIZES = [{"T": t, "B": 32, "I": h, "H": h} for t in (128, 512) for h in (256, 512)]


def main() -> None:
    print("load before:", open("/proc/loadavg").read().strip())
    print(f"| model | T | I=H | case s | oracle s (median of {REPEATS}) |\n|---|---|---|---|---|")
    for name in ("rnn", "lstm", "lstm2"):
        model = registry.get_model(name)
        for sizes in SIZES:
            start = time.perf_counter()
            case = model.make_case(model.sizes_with_defaults(sizes), 0)
            made = time.perf_counter() - start
            runs = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                model.oracle(case)
                runs.append(time.perf_counter() - start)
            print(f"| {name} | {sizes['T']} | {sizes['H']} | {made:.2f} | {statistics.median(runs):.2f} |", flush=True)
    print("load after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
