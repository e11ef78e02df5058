"""Work in worker processes, written once: `rnnbench run` sends rows, `rnnbench fuzz` sends bodies.

The parent starts `command` (a Python interpreter running a module that calls `serve`), writes the
items to its stdin, and reads one event per item back on a private pipe (the worker's original
stdout; anything a framework prints goes to stderr, so the stream stays clean). A worker that dies
(segfault, out-of-memory kill) or hangs costs only the item it had started: the parent records that
item as "crash" (with how the process ended and the last lines of its stderr) or "timeout" (the
worker is killed), then starts a fresh worker for the items after it.

Events are pickled: items and results are any picklable data (records, fuzz outcomes with their
bodies); the parent and every environment's interpreter run the same rnnbench source.
"""

from __future__ import annotations

import os
import pickle
import queue
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from rnnbench.status import Status

WORKER_START_GRACE_S = 120.0  # importing torch / jax / torch_xla on a loaded 2-core machine can take a minute
STDERR_TAIL_LINES = 20


def exit_description(returncode: Optional[int]) -> str:
    """How a worker ended, for the record: a signal by name (SIGKILL with the usual culprit)."""
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        hint = " (e.g. the kernel's out-of-memory killer)" if sig == signal.SIGKILL else ""
        return f"worker killed by signal {-returncode} ({sig.name}){hint}"
    return f"worker exited with code {returncode}"


def _memory_limiter(limit_gb: Optional[float]) -> Optional[Callable[[], None]]:
    if not limit_gb:
        return None
    limit = int(limit_gb * 2**30)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _tail(path: Path) -> str:
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:])


def run_isolated(
    command: Sequence[str],
    items: Sequence[Any],
    timeout_s: float,
    on_result: Callable[[int, Any], None],
    on_failure: Callable[[int, str, str], None],
    on_start: Callable[[int], None] = lambda index: None,
    context: Callable[[], Any] = lambda: None,
    env: Optional[Mapping[str, str]] = None,
    memory_limit_gb: Optional[float] = None,
) -> None:
    """Process every item in workers, in order. on_start(i) when the worker begins item i,
    on_result(i, result) when it returns, on_failure(i, status, report) when the worker crashed or
    hung on it (status "crash" / "timeout"). context() is sent to each new worker with its items
    (e.g. state the previous worker left, such as what the fuzzer has shrunk already)."""
    next_index = 0
    while next_index < len(items):
        next_index = _one_worker(command, items, next_index, timeout_s, on_result, on_failure, on_start,
                                 context(), env, memory_limit_gb)


def _one_worker(command, items, first, timeout_s, on_result, on_failure, on_start, context, env, memory_limit_gb) -> int:
    """One worker over items[first:]; returns the index the next worker starts at."""
    fd, err_name = tempfile.mkstemp(prefix="rnnbench-worker-", suffix=".stderr")
    err_path = Path(err_name)
    proc = None
    try:
        with os.fdopen(fd, "w") as err_file:
            proc = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_file,
                                    env=dict(env) if env is not None else None,
                                    preexec_fn=_memory_limiter(memory_limit_gb))
        try:
            pickle.dump((context, list(items[first:])), proc.stdin)
            proc.stdin.close()
        except BrokenPipeError:  # died before reading its work: judged below like any early death
            pass
        events: "queue.Queue[Optional[tuple]]" = queue.Queue()

        def reader() -> None:
            try:
                while True:
                    events.put(pickle.load(proc.stdout))
            except (EOFError, pickle.UnpicklingError, OSError):
                events.put(None)

        threading.Thread(target=reader, daemon=True).start()
        started: Optional[int] = None
        done = first
        while True:
            wait = timeout_s if started is not None else timeout_s + WORKER_START_GRACE_S
            try:
                event = events.get(timeout=wait)
            except queue.Empty:
                proc.kill()
                proc.wait()
                failed = done if started is None else started
                on_failure(failed, Status.TIMEOUT, f"no result within {wait:g} s; worker killed\n"
                                                   f"--- last stderr lines ---\n{_tail(err_path)}")
                return failed + 1
            if event is None:  # the pipe closed: finished, or died
                proc.wait()
                if done == len(items):
                    return done
                failed = done if started is None else started
                on_failure(failed, Status.CRASH, f"{exit_description(proc.returncode)}\n"
                                                 f"--- last stderr lines ---\n{_tail(err_path)}")
                return failed + 1
            kind, index = event[0], first + event[1]
            if kind == "start":
                started = index
                on_start(index)
            else:  # ("result", i, value)
                on_result(index, event[2])
                done, started = index + 1, None
    finally:
        if proc is not None and proc.poll() is None:  # the parent is leaving (an exception): no orphan
            proc.kill()
            proc.wait()
        err_path.unlink(missing_ok=True)


def serve(handle: Callable[[Any, Any], Any], setup: Callable[[Any, list], None] = lambda context, items: None) -> int:
    """The worker's side: read (context, items) from stdin, call setup(context, items) once, then
    handle(context, item) for each item, announcing it first. An exception from handle ends the
    worker (the parent records the item as a crash, with the traceback in its stderr tail):
    handlers turn the failures they expect into results themselves."""
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # framework chatter on stdout would corrupt the protocol
    context, items = pickle.load(sys.stdin.buffer)
    setup(context, items)
    for i, item in enumerate(items):
        pickle.dump(("start", i), protocol)
        protocol.flush()
        try:
            result = handle(context, item)
        except Exception:
            traceback.print_exc()
            return 1
        pickle.dump(("result", i, result), protocol)
        protocol.flush()
    return 0
