"""Oracle time on the campaign's bodies: the ladder (dual numbers; 50 digits where the condition
number asks) against the finite-difference oracles it replaced, first and second order, on the same
bodies (seed SEED, default 2026; 2027 for the 1000-body campaign of 2026-11-26-fuzz-1000; the four
default loss forms, float64), one process, interleaved per case.

Usage: python docs/results/2026-11-26-fuzz-campaign/oracle_time.py BODIES [SEED] > oracle_time.txt
"""

from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np

from rnnbench import losses
from rnnbench.check.oracle import oracle_grads
from rnnbench.check.second_order import hvp_oracle
from rnnbench.fuzz.cases import build
from rnnbench.fuzz.grammar import judged_body
from rnnbench.model import reference_loss


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(bodies: int, seed: int) -> None:
    totals, kinds, worst = Counter(), Counter(), 0.0
    for index in range(bodies * len(losses.CHECKED)):
        fc = build(judged_body(seed, index, losses.CHECKED))
        if fc.ill_conditioned:
            kinds["ill_conditioned"] += 1
            continue
        model, case, data_seed = fc.model, fc.case, fc.body.data_seed
        ladder, t1 = timed(lambda: oracle_grads(model, case))
        fd, t2 = timed(lambda: oracle_grads(model, case, "finite_differences"))
        hv, t3 = timed(lambda: hvp_oracle(model, case, data_seed))
        hv_fd, t4 = timed(lambda: hvp_oracle(model, case, data_seed, "finite_differences"))
        totals.update({"ladder": t1, "fd": t2, "ladder_hvp": t3, "fd_hvp": t4})
        kinds[ladder.kind] += 1
        kinds[hv.kind] += 1
        # how far finite differences were from the exact value where they claimed a finite bound, at
        # the judge's scale (the case's largest gradient, at least 1e-3 max(1, |loss|): tolerance.py)
        scale = max(max(float(np.max(np.abs(g))) for g in ladder.grads.values()),
                    1e-3 * max(1.0, abs(reference_loss(model, case))))
        for n in ladder.grads:
            ok = np.isfinite(fd.error_of(n))
            if np.any(ok):
                worst = max(worst, float(np.max(np.abs(fd.grads[n] - ladder.grads[n])[ok])) / scale)
    judged = sum(v for k, v in kinds.items() if k in ("dual", "dual_mp", "finite_differences", "ill_conditioned"))
    print(f"{bodies} bodies x {len(losses.CHECKED)} loss forms = {judged} cases (seed {seed}, float64)")
    print(f"first order:  ladder {totals['ladder']:.2f} s, finite differences {totals['fd']:.2f} s "
          f"({totals['fd'] / totals['ladder']:.1f}x)")
    print(f"second order: ladder {totals['ladder_hvp']:.2f} s, finite differences {totals['fd_hvp']:.2f} s "
          f"({totals['fd_hvp'] / totals['ladder_hvp']:.1f}x)")
    print("rungs taken: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    print(f"largest finite-difference error against the exact value, where it claimed a finite bound "
          f"(relative to the judge's scale): {worst:.3g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 25, int(sys.argv[2]) if len(sys.argv) > 2 else 2026)
