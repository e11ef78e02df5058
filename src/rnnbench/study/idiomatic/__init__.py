"""The idiomatic comparison: every rnnbench mechanism against its framework's best idiomatic form of
the same math, timed in one process per framework, interleaved, with every candidate's gradients
checked against the oracle first (a baseline that is fast because it computes less is worthless).

    python -m rnnbench.study.idiomatic --out docs/results/<date>-idiomatic [--quick] [--threads 1]

What it writes (<out>.jsonl, <out>.md, <out>-tgrowth.jsonl and <out>-tgrowth.png, each
overwritten), the baseline families and the method: docs/measuring.md#the-idiomatic-comparison.
A family's time is its fastest variant's median; "best idiomatic" is the fastest family. A worker
is pinned to `threads` CPUs, since XLA's CPU client ignores thread variables.

Budgets: in the T sweep (run first, by increasing T), a candidate whose one fwd+bwd call took more
than Plan.slow_call_s, or whose next first call is predicted (from its last two, log-log) to
exceed Plan.first_call_budget_s, is not run at larger T; at the other points of the sweep's model,
one whose first call, extrapolated from the sweep, exceeds Plan.point_first_call_budget_s is not
run. Its record says "skipped" and why.

Each candidate is checked by rnnbench.rows.pair.check_pair (Candidate.as_driver), as a row is.
Compiled torch candidates: rnnbench.drivers.torch._compile.compiled resets dynamo before each compile,
which would drop the code of the candidates compiled before it (they would recompile in the
warm-up); the worker checks them with PairPlan(fresh_compiles=False) and resets each framework's
compile state once per point instead (Framework.compiles_kept, Framework.reset_compiles).
First calls are cold: each worker runs with the frameworks' on-disk compile caches off and empty.

Modules: plan (what a run measures), baselines (the idiomatic forms, written per framework),
candidates (what is timed), run (the workers: interleaved timing; the parent: one worker per
framework family), tables (records and the markdown page), __main__ (the command line).
"""

from rnnbench.study.idiomatic.candidates import SAME_MECHANISM, Candidate, candidates
from rnnbench.study.idiomatic.plan import Plan, plan_for

__all__ = ["SAME_MECHANISM", "Candidate", "candidates", "Plan", "plan_for"]
