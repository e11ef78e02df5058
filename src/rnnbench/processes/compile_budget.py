"""--compile-budget: a first call (trace + compile + run) that runs past its budget becomes a
`timeout` record that says how long it had run, never a silent absence.

The budget is an interval timer in the worker's main thread (SIGALRM): its handler raises
CompileBudgetExceeded, a BaseException, so the drivers' `except Exception` (a failure is a result)
does not swallow it and run_row turns it into the record. A signal handler runs only between
Python bytecodes: torch.compile (dynamo, inductor, its compile workers) spends its time in Python
and is stopped on time; a compiler that holds the thread in native code for minutes (XLA) is
stopped when it returns, or by the row's --timeout in the parent, whichever comes first."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator


class CompileBudgetExceeded(BaseException):
    """The first call had not ended after `budget_s`; `elapsed_s` when it was stopped."""

    def __init__(self, budget_s: float, elapsed_s: float):
        super().__init__(f"first call still running after {elapsed_s:.1f} s (compile budget {budget_s:g} s)")
        self.budget_s = budget_s
        self.elapsed_s = elapsed_s


@contextlib.contextmanager
def budget(seconds: float | None) -> Iterator[None]:
    """Raise CompileBudgetExceeded in the block once it has run `seconds` (None or 0: no budget;
    outside the main thread, where no signal can be delivered: no budget either)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return
    start = time.perf_counter()

    def expired(signum, frame) -> None:
        raise CompileBudgetExceeded(float(seconds), time.perf_counter() - start)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
