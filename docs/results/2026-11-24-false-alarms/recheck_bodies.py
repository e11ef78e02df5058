"""Re-judge chosen fuzzed bodies with the code on PYTHONPATH: what `rnnbench fuzz` would say of
them, first and (at float64) second order, without the shrinking and the worker isolation.

    python recheck_bodies.py --seed 2026 --bodies 21 --drivers torch_loop,jax_loop --dtypes float64,float32

Used for the campaign's alarm bodies after the oracle changed between the campaign and its report
(a change that can only widen error bounds leaves every ok verdict as it was; see the results page).
"""

from __future__ import annotations

import argparse

from rnnbench import registry
from rnnbench.fuzz.cases import build
from rnnbench.fuzz.grammar import generate
from rnnbench.fuzz.runner import run_driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--bodies", required=True, help="comma-separated body indices")
    ap.add_argument("--drivers", required=True)
    ap.add_argument("--dtypes", default="float64")
    args = ap.parse_args()
    for index in (int(i) for i in args.bodies.split(",")):
        for dtype in args.dtypes.split(","):
            fc = build(generate(args.seed, index), dtype=dtype)
            if fc.ill_conditioned:
                print(f"body {index} {dtype}: skipped as ill-conditioned ({fc.ill_conditioned})")
                continue
            for name in args.drivers.split(","):
                judged = run_driver(fc, registry.get_driver(name), dtype, second_order=True)
                status, hvp_status, report = judged.status, judged.hvp_status, judged.report
                print(f"body {index} {dtype} {name}: {status}" + (f", second order {hvp_status}" if hvp_status else ""))
                if report:
                    print("   " + report.replace("\n", "\n   "))


if __name__ == "__main__":
    main()
