"""rnnbench.run.isolation, the one worker-process layer of `run` and `fuzz`: a crash or hang costs
its item only, later items run in a fresh worker, and no worker outlives the call."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rnnbench.run.isolation import run_isolated
from rnnbench.status import Status

PLUGINS = Path(__file__).parent / "plugins"


def _run(items, timeout_s=5.0, context=lambda: "ctx"):
    results, failures, started = {}, {}, []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH")]))}
    run_isolated([sys.executable, "-m", "isolation_worker"], items, timeout_s,
                 on_result=lambda i, r: results.__setitem__(i, r),
                 on_failure=lambda i, status, report: failures.__setitem__(i, (status, report)),
                 on_start=started.append, context=context, env=env)
    return results, failures, started


def _alive(pids) -> list[int]:
    return [p for p in pids if Path(f"/proc/{p}").exists() and "isolation_worker" in Path(f"/proc/{p}/cmdline").read_text()]


def test_each_failure_costs_its_item_only() -> None:
    items = ["a", "segfault", "b", "hang", "c", "sigkill", "raise", "d"]
    results, failures, started = _run(items, timeout_s=3.0)
    assert sorted(results) == [0, 2, 4, 7] and [results[i][0] for i in (0, 2, 4, 7)] == ["a", "b", "c", "d"]
    assert failures[1][0] == Status.CRASH and "SIGSEGV" in failures[1][1]
    assert failures[3][0] == Status.TIMEOUT and "worker killed" in failures[3][1]
    assert failures[5][0] == Status.CRASH and "out-of-memory" in failures[5][1]
    assert failures[6][0] == Status.CRASH and "handler bug" in failures[6][1]  # the traceback, from stderr
    assert started == list(range(len(items)))
    pids = {r[2] for r in results.values()}
    assert len(pids) == 4  # b, c and d each in a fresh worker after a failure
    assert not _alive(pids)


def test_context_is_sent_to_every_new_worker() -> None:
    calls = []

    def context():
        calls.append(1)
        return len(calls)

    results, failures, _ = _run(["a", "segfault", "b"], context=context)
    assert results[0][1] == 1 and results[2][1] == 2 and set(failures) == {1}


def test_a_worker_that_cannot_start_is_a_crash_of_its_first_item() -> None:
    failures = {}
    run_isolated([sys.executable, "-c", "import sys; sys.exit(3)"], ["x", "y"], 5.0,
                 on_result=lambda i, r: None, on_failure=lambda i, s, r: failures.__setitem__(i, (s, r)))
    assert failures[0][0] == Status.CRASH and "exited with code 3" in failures[0][1]
    assert failures[1][0] == Status.CRASH
