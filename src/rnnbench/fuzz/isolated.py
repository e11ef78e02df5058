"""`rnnbench fuzz` with each driver in its own worker process: a framework that segfaults, is
killed or hangs on some body costs that (body, driver) only, recorded as "crash" / "timeout"; a
fresh worker continues with the next body. Workers stream one message per body over a pipe."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

from rnnbench.fuzz.grammar import generate
from rnnbench.fuzz.runner import FuzzSummary, Outcome

WORKER_START_GRACE_S = 120.0  # importing torch + jax on a loaded 2-core machine


def _worker(conn, driver_name: str, seed: int, start: int, stop: int, dtype: str, second_order: bool,
            shrink_per_kind: int, shrunk: Counter, repro_dir: Optional[str], device: str) -> None:
    """Fuzz bodies start..stop-1 on one driver, sending ("start", i) before and ("done", i, outcome,
    ill_reason) after each body."""
    from rnnbench import registry
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.report import explain_failure
    from rnnbench.fuzz.runner import explain_outcome

    driver = registry.get_driver(driver_name)
    for index in range(start, stop):
        conn.send(("start", index))
        fc = build(generate(seed, index))
        if fc.ill_conditioned:
            conn.send(("done", index, None, fc.ill_conditioned))
            continue
        out = explain_outcome(index, fc, driver, dtype, second_order, shrink_per_kind, shrunk,
                              lambda o, m, d: explain_failure(o, m, d, dtype, Path(repro_dir) if repro_dir else None, seed,
                                                              device), device)
        conn.send(("done", index, out, None))
    conn.send(("end",))
    conn.close()


def fuzz_isolated(cases: int, seed: int, driver_names: list[str], dtype: str = "float64", second_order: bool = True,
                  shrink_per_kind: int = 1, repro_dir: Optional[Path] = None, timeout_s: float = 300.0,
                  progress: Optional[Callable[[str], None]] = None, device: str = "cpu") -> FuzzSummary:
    """fuzz() with process isolation per driver (drivers run one after another)."""
    from rnnbench.run.runner import _exit_description

    summary = FuzzSummary(list(driver_names), cases, seed, dtype, device)
    ill: dict[int, str] = {}
    ctx = mp.get_context("spawn")
    for name in driver_names:
        shrunk: Counter = Counter()
        next_index = 0
        while next_index < cases:
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(child, name, seed, next_index, cases, dtype, second_order,
                                                     shrink_per_kind, shrunk, str(repro_dir) if repro_dir else None, device),
                               daemon=True)
            proc.start()
            child.close()
            current, limit = None, WORKER_START_GRACE_S + timeout_s
            while True:
                if not parent.poll(limit):  # a hang: kill the worker, record the body, go on
                    proc.kill()
                    proc.join()
                    failed, why = current if current is not None else next_index, f"timeout: no result in {limit:g} s"
                    break
                try:
                    msg = parent.recv()
                except EOFError:  # the worker died (segfault, OOM kill)
                    proc.join()
                    failed, why = current if current is not None else next_index, f"crash: {_exit_description(proc.exitcode)}"
                    break
                if msg[0] == "start":
                    current, limit = msg[1], timeout_s
                elif msg[0] == "done":
                    _, index, out, reason = msg
                    if out is None:
                        ill[index] = reason
                    else:
                        summary.outcomes.append(out)
                        if out.minimal is not None:  # a restarted worker must not shrink this kind again
                            shrunk[(name, out.kind)] += 1
                    next_index, current = index + 1, None
                    if progress is not None:
                        progress(f"{name}: body {index + 1}/{cases}")
                else:  # "end"
                    proc.join()
                    failed = None
                    break
            if failed is None:
                break
            status = why.split(":")[0]
            summary.outcomes.append(Outcome(failed, name, status, report=why, body=generate(seed, failed)))
            next_index = failed + 1
    summary.ill_conditioned = Counter(reason.split(" for ")[0] for reason in ill.values())
    return summary

