"""Units of correctness-only work (fuzz chunks) run several at once on this machine: one thread per
unit in flight, each waiting on its own worker processes (rnnbench.processes.isolation), up to `workers`
at once; the same `run(units, emit)` as the Ray executor.

Timed rows never come here: they need cores to themselves, so `rnnbench run` keeps running its
rows one after another. A fuzz chunk's worker is busy on one core most of the time (tracing, jit
compiles, one body at a time), so on a machine of N cores N chunks at once use the cores a single
worker left idle.

This thread is the one writer: each unit's records pass through a queue and are emitted here, in
the order they arrive. Signals reach this (main) thread only (rnnbench.processes.parent): on an
interruption, or when emit raises, the pool sets its stop event; each unit's run_isolated looks at
it between the pipe's wait slices (rnnbench.processes.isolation.cancellable; never inside a callback, so
a result already read is queued whole), ends its workers and queues the results they had already
written; those records are emitted before the interruption goes on, so an interrupted fuzz keeps
every finished body.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rnnbench.processes.isolation import cancellable
from rnnbench.processes.parent import signals_deferred

Emit = Callable[[dict], None]
WAIT_S = 0.2  # how often this thread looks at its units while no record arrives


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


class LocalPool:
    """Run units (rnnbench.rows.executors.Unit) in up to `workers` threads of this process."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)

    def run(self, units: Sequence, emit: Emit) -> None:
        """Every unit's work(emit) in a thread of its own, `workers` at once; emit(record) is called
        in this thread only. An exception in a unit ends the others and is raised here."""
        inbox: queue.Queue = queue.Queue()
        waiting, running = list(units), []
        stop = threading.Event()

        def body(unit) -> None:
            try:
                with cancellable(stop):
                    unit.work(inbox.put)
            except BaseException as exc:  # protocol.Cancelled (the pool's stop) included: run() decides
                inbox.put(_Ended(threading.current_thread(), exc))
            else:
                inbox.put(_Ended(threading.current_thread(), None))

        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    thread = threading.Thread(target=body, args=(waiting.pop(0),), daemon=True)
                    thread.start()
                    running.append(thread)
                try:
                    message = inbox.get(timeout=WAIT_S)
                except queue.Empty:
                    continue
                if isinstance(message, _Ended):
                    message.thread.join()
                    running.remove(message.thread)
                    if message.error is not None:
                        raise message.error
                else:
                    with signals_deferred():  # a record taken from the queue is written whole
                        emit(message)
        except (KeyboardInterrupt, BrokenPipeError):
            _stop(stop, running)
            _flush(inbox, emit)  # results the stopped units' workers had written
            raise
        except BaseException:
            _stop(stop, running)
            raise


def _stop(stop: threading.Event, threads: list[threading.Thread]) -> None:
    """End every unit still running: its workers are killed and reaped in its own thread."""
    with signals_deferred():
        stop.set()
        for thread in threads:
            thread.join()


@dataclass
class _Ended:
    """A unit's last message: its thread ends, with the exception that ended it, if any."""

    thread: threading.Thread
    error: BaseException | None


def _flush(inbox: queue.Queue, emit: Emit) -> None:
    with signals_deferred():
        while True:
            try:
                message = inbox.get_nowait()
            except queue.Empty:
                return
            if not isinstance(message, _Ended):
                emit(message)
