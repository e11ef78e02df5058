"""The idiomatic comparison: every rnnbench mechanism against its framework's best idiomatic form of
the same math, timed in one process per framework, interleaved, with every candidate's gradients
checked against the oracle first (a baseline that is fast because it computes less is worthless).

    python -m rnnbench.study.idiomatic --out docs/results/<date>-idiomatic [--quick] [--threads 1]

Writes (each overwritten):
  <out>.jsonl          one record per (mechanism, baseline family, point): the mechanism's fwd+bwd
                       timing, the family's best variant's, their ratio (rnnbench record format)
  <out>.md             the ratio table (mechanism / best idiomatic) with the exact command
  <out>-tgrowth.jsonl  one record per (candidate, T) of the T sweep (mechanisms and each family's
                       best variant), rnnbench record format
  <out>-tgrowth.png    fwd+bwd ms vs T, log-log, drawn from <out>-tgrowth.jsonl by
                       `python -m rnnbench.report.charts idiomatic-tgrowth RECORDS PNG`

Baseline families, written plainly, as a user of the framework would (same loss, same inputs):
  torch: torch.nn.LSTM / torch.nn.RNN (the vendor drivers); a fastrnns-style loop over
         xs.unbind(0) with a fused cell (one addmm a step; the input projection hoisted into one
         matmul, or inside the cell); torch.compile(inductor) of that loop (hoisted).
  jax:   flax nn.RNN(OptimizedLSTMCell / SimpleCell) (the vendor drivers; nn.RNN is nn.scan of the
         cell); lax.scan of a fused cell for each unroll in Plan.unrolls, projection hoisted or in the cell.
A family's time is its fastest variant's median; "best idiomatic" is the fastest family.

Method: per point (model, sizes), in the framework's process: prepare every candidate, time its
first call (trace + compile + run) and judge its gradients (rnnbench.check.judge, the oracle
computed once); then the ok candidates are timed in rounds, each round one sample of each candidate
in a rotating order (A, B, C, then B, C, A, ...), each sample `inner` calls (enough for about
Plan.target_sample_ms); medians and quartiles per candidate; os.getloadavg() at the start and end
of each point's timing and at the start of every round, in each record. Threads: the process is
pinned to `threads` CPUs (XLA's CPU client ignores thread variables) and the frameworks' thread
settings are applied before import.

Budgets: in the T sweep (run first, by increasing T), a candidate whose one fwd+bwd call took more
than Plan.slow_call_s, or whose next first call is predicted (from its last two, log-log) to
exceed Plan.first_call_budget_s, is not run at larger T; at the other points of the sweep's model,
one whose first call, extrapolated from the sweep, exceeds Plan.point_first_call_budget_s is not
run. Its record says "skipped" and why.

Compiled torch candidates: rnnbench.drivers._torch.compiled resets dynamo before each compile,
which would drop the code of the candidates compiled before it (they would recompile in the
warm-up); the worker resets dynamo once per point instead (_torch.RESET_DYNAMO_BEFORE_COMPILE).
First calls are cold: each worker runs with the frameworks' on-disk compile caches off and empty.

Modules: plan (what a run measures), baselines (the idiomatic forms, written per framework),
candidates (what is timed), run (the workers: interleaved timing; the parent: one worker per
framework family), tables (records and the markdown page), __main__ (the command line).
"""

from rnnbench.study.idiomatic.candidates import SAME_MECHANISM, Candidate, candidates
from rnnbench.study.idiomatic.plan import Plan, plan_for

__all__ = ["SAME_MECHANISM", "Candidate", "candidates", "Plan", "plan_for"]
