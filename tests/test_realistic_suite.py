"""`--suite realistic`: the sizes people train at (docs/cli.md#the-realistic-suite). The selection
is read from the parser and the job planner, as `rnnbench run` builds it."""

from __future__ import annotations

from rnnbench import registry
from rnnbench.cli import options
from rnnbench.cli.main import parser
from rnnbench.machine import environments
from rnnbench.planning import plan
from rnnbench.suites import QUICK, REALISTIC


def _jobs(*flags: str):
    return plan.jobs(options.settings(parser().parse_args(["run", "--no-time", *flags])))


def test_realistic_runs_every_model_driver_pair_at_each_of_its_sizes() -> None:
    jobs = _jobs("--suite", "realistic")
    suite = REALISTIC
    sizes = {tuple(sorted(j.sizes.items())) for j in jobs}
    assert sizes == {tuple(sorted(s.items())) for s in suite.sizes}
    assert all(s["T"] >= 128 and s["H"] >= 256 and s["I"] == s["H"] and s["B"] == 32 for s in suite.sizes)
    pairs = {(j.model, j.driver) for j in jobs}
    assert pairs == {(m, d) for m in suite.models for d in suite.drivers}
    assert len(jobs) == len(pairs) * len(suite.sizes) and {j.environment for j in jobs} == {"main"}
    assert {j.dtype for j in jobs} == {"float32"}
    # the vendor layers of the main environment that run its models are all in it (the anchors every bar
    # chart marks; a GRU layer runs none of rnn, lstm, lstm2)
    models = [registry.get_model(m) for m in suite.models]
    anchors = {
        n
        for n, d in registry.drivers().items()
        if d.anchor and environments.runs(d, "main") and any(d.supports(m) is None for m in models)
    }
    assert anchors, "no vendor layer runs the realistic suite's models"
    assert anchors <= set(suite.drivers)


def test_sizes_replace_the_suites_sizes_and_quick_stays_the_default() -> None:
    jobs = _jobs("--suite", "realistic", "--sizes", "T=64")
    assert {j.sizes["T"] for j in jobs} == {64} and len({tuple(j.sizes.items()) for j in jobs}) == 1
    assert all(not j.sizes for j in _jobs()) and {j.model for j in _jobs()} == set(QUICK.models)
