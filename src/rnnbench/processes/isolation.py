"""Work in worker processes, written once: `rnnbench run` sends rows, `rnnbench fuzz` sends bodies.

The parent starts `command` (a Python interpreter running a module that calls `serve`), writes the
items to its stdin, and reads one event per item back on a private pipe (the worker's original
stdout; anything a framework prints goes to stderr, so the stream stays clean). A worker that dies
(segfault, out-of-memory kill) or hangs costs only the item it had started: the parent records that
item as "crash" (with how the process ended and the last lines of its stderr) or "timeout" (the
worker is killed), then starts a fresh worker for the items after it.

Events are pickled: items and results are any picklable data (records, fuzz outcomes with their
bodies); the parent and every environment's interpreter run the same rnnbench source.

No worker outlives its parent, however the parent ends, and nothing a worker started outlives the
worker (rnnbench.processes.descendants):

- each worker leads a session (and process group) of its own, so whatever it starts (inductor's
  compile workers, jax's helpers) is in its group, and the parent ends a worker by killing the
  whole group; a terminal's Ctrl-C reaches the parent only, which then ends its workers;
- each worker is a child subreaper: what leaves its group (a daemon's setsid) stays in its tree,
  which the parent stops and kills before the group, and the worker itself before it exits;
  after a worker died by itself, whatever still carries its token is killed (the guard does the
  same when the parent dies);
- on Linux the worker arms PR_SET_PDEATHSIG = SIGKILL as its first act, before it reads work or
  imports a framework (then checks that its parent is still the one that started it, which
  closes the race with a parent that died first; the guard below covers that window too);
- a guard process per worker (`/bin/sh`, its own session, deaf to INT/TERM/HUP) holds the read
  end of a pipe only the parent writes to: when the parent ends, however (SIGKILL included), the
  pipe closes and the guard kills the worker's group: the worker's descendants too;
- in the worker, `serve` runs a watchdog thread that kills its group when its parent changes or
  the protocol pipe closes (the portable layer, where there is no PDEATHSIG);
- the parent's own exits are exceptions that every `finally` sees (rnnbench.processes.parent).

A worker's stderr goes to a temporary file in the parent process's run directory
(rnnbench.processes.tmpdirs), of which the parent reads only the end: a bounded tail, however much the
worker wrote. Events travel on a pipe of their own (rnnbench.processes.protocol); a row's deadline runs
on the row's clock, and a result the worker wrote before it is never lost to a deadline the
parent noticed late (stopped by Ctrl-Z or SIGSTOP).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnbench.processes import descendants, protocol
from rnnbench.processes.descendants import PR_SET_PDEATHSIG, PRCTL
from rnnbench.processes.parent import HANDLED_SIGNALS, signals_deferred
from rnnbench.processes.tmpdirs import run_tmpdir
from rnnbench.status import Status

WORKER_START_GRACE_S = 120.0  # importing torch / jax / torch_xla on a loaded 2-core machine can take a minute
STDERR_TAIL_LINES = 20
STDERR_TAIL_BYTES = 16384  # the most of a worker's stderr the parent reads (its last lines within this)
EXIT_WAIT_S = 10.0  # after its pipe closed, how long a worker may take to exit before its group is killed
PARENT_VAR = "RNNBENCH_PARENT_PID"  # the worker's expected parent, for its watchdog
WATCH_INTERVAL_S = 0.25

# The guard: waits for EOF on stdin (the parent gone, or done with the worker), then kills the
# worker's process group and every process carrying the worker's token ($2: what left the group).
# Signals a terminal or a CI runner sends to a process group do not stop it.
GUARD_SCRIPT = (
    'trap "" INT TERM HUP; read _ ; kill -KILL "-$1" 2>/dev/null; '
    'for f in $(grep -lsxzF "$2" /proc/[0-9]*/environ 2>/dev/null); do '
    'p=${f#/proc/}; kill -KILL "${p%/environ}" 2>/dev/null; done; exit 0'
)


def exit_description(returncode: int | None) -> str:
    """How a worker ended, for the record: a signal by name (SIGKILL with the usual culprit)."""
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        hint = " (e.g. the kernel's out-of-memory killer)" if sig == signal.SIGKILL else ""
        return f"worker killed by signal {-returncode} ({sig.name}){hint}"
    return f"worker exited with code {returncode}"


# ---------------------------------------------------------------------------------------------
# Starting and ending a worker


MEMORY_VAR = "RNNBENCH_MEMORY_LIMIT_GB"  # the worker's address-space limit, set by the worker itself
DEATH_SIGNAL_VAR = "RNNBENCH_PARENT_DEATH_SIGNAL"  # "1": arm PR_SET_PDEATHSIG (run_isolated asks for it)


def _arm_worker() -> None:
    """The worker's first act (serve), before it reads work or imports a framework: unblock the
    signals the parent held back while starting it, apply the memory limit, and on Linux arm
    PR_SET_PDEATHSIG = SIGKILL, then check that the parent (named in PARENT_VAR) is still ours:
    if it died between our start and the arming, exit. Done here rather than in a preexec_fn,
    which would run Python in a forked copy of a possibly multithreaded parent (jax, torch
    thread pools). PR_SET_PDEATHSIG fires when the *thread* that started us exits: run_isolated
    starts workers from the thread that calls it, which waits for them. The worker also becomes
    the subreaper of what it starts (rnnbench.processes.descendants)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
    descendants.become_subreaper()
    limit_gb = os.environ.get(MEMORY_VAR)
    if limit_gb:
        limit = int(float(limit_gb) * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if PRCTL is not None and os.environ.get(DEATH_SIGNAL_VAR) == "1":
        PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    expected = os.environ.get(PARENT_VAR)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(70)


@dataclass
class _Worker:
    proc: subprocess.Popen
    guard: subprocess.Popen | None
    guard_pipe: int | None  # the write end; closing it tells the guard to kill the group
    token: str  # in the worker's environment, inherited by whatever it starts (descendants.TOKEN_VAR)


def _start_worker(command: Sequence[str], env: Mapping[str, str], err_file, memory_limit_gb: float | None) -> _Worker:
    limit = {MEMORY_VAR: repr(float(memory_limit_gb))} if memory_limit_gb else {}
    token = secrets.token_hex(16)
    proc = subprocess.Popen(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err_file,
        env={**env, PARENT_VAR: str(os.getpid()), DEATH_SIGNAL_VAR: "1", descendants.TOKEN_VAR: token, **limit},
        start_new_session=True,
    )
    guard = guard_pipe = None
    read_end, write_end = os.pipe()  # both close-on-exec: only the guard gets the read end, as stdin
    try:
        guard = subprocess.Popen(
            ["/bin/sh", "-c", GUARD_SCRIPT, "rnnbench-guard", str(proc.pid), f"{descendants.TOKEN_VAR}={token}"],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
        guard_pipe = write_end
    except OSError:  # no /bin/sh: PDEATHSIG and the worker's watchdog remain
        os.close(write_end)
    finally:
        os.close(read_end)
    return _Worker(proc, guard, guard_pipe, token)


def _exit_status(proc: subprocess.Popen, timeout_s: float) -> int | None:
    """The worker's return code once it has exited (None if it is still running after timeout_s),
    without reaping it where the platform allows (waitid WNOWAIT): an unreaped worker keeps its pid,
    so its process-group id cannot be reused before the group is killed."""
    if not hasattr(os, "waitid") or not hasattr(os, "WNOWAIT"):
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # already reaped
            return proc.returncode
        if info is not None and info.si_pid:
            return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _end_worker(worker: _Worker) -> None:
    """Kill the worker's process group and whatever else it started, release the guard and reap
    both. A live worker's group is stopped first, then its tree (what left the group stays in it:
    the worker is their subreaper) is stopped and killed; once the worker is reaped, whatever still
    carries its token (orphans of a worker that died by itself). Safe on a worker that exited."""
    with signals_deferred():
        proc = worker.proc
        try:
            if proc.returncode is None:  # not reaped: its pid still names its group
                if _exit_status(proc, 0.0) is None:  # alive: its tree holds everything it started
                    os.killpg(proc.pid, signal.SIGSTOP)
                    descendants.end_tree(proc.pid)
                os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if worker.guard_pipe is not None:
            os.close(worker.guard_pipe)  # the guard kills the group again (harmless) and exits
            worker.guard_pipe = None
        if worker.guard is not None:  # before the worker is reaped: the group id is still the worker's
            try:
                worker.guard.wait(5.0)
            except subprocess.TimeoutExpired:
                worker.guard.kill()
                worker.guard.wait()
        proc.wait()
        descendants.end_carrying(worker.token)


# ---------------------------------------------------------------------------------------------
# The parent's side


def _tail(path: Path) -> str:
    """The last STDERR_TAIL_LINES lines of the file within its last STDERR_TAIL_BYTES: memory
    bounded however much the worker wrote (a line cut by that bound starts with "...")."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - STDERR_TAIL_BYTES))
            data = f.read(STDERR_TAIL_BYTES)
    except OSError:
        return ""
    lines = data.decode(errors="replace").splitlines()
    if size > STDERR_TAIL_BYTES and lines:
        lines[0] = "..." + lines[0]
    return "\n".join(lines[-STDERR_TAIL_LINES:])


_cancel = threading.local()  # .event: set by the thread's owner to stop this thread's run_isolated


@contextlib.contextmanager
def cancellable(event: threading.Event):
    """Within the block, run_isolated in this thread ends its worker and raises
    protocol.Cancelled once `event` is set (between wait slices, never inside a callback): how a
    pool stops the units its threads run (rnnbench.processes.local_pool)."""
    _cancel.event = event
    try:
        yield
    finally:
        _cancel.event = None


def cancel_requested() -> bool:
    event = getattr(_cancel, "event", None)
    return event is not None and event.is_set()


def run_isolated(
    command: Sequence[str],
    items: Sequence[Any],
    timeout_s: float,
    *,
    on_result: Callable[[int, Any], None],
    on_failure: Callable[[int, str, str], None],
    on_start: Callable[[int], None] = lambda index: None,
    context: Callable[[], Any] = lambda: None,
    env: Mapping[str, str] | None = None,
    memory_limit_gb: float | None = None,
) -> None:
    """Process every item in workers, in order. on_start(i) when the worker begins item i,
    on_result(i, result) when it returns, on_failure(i, status, report) when the worker crashed or
    hung on it (status "crash" / "timeout"). context() is sent to each new worker with its items
    (e.g. state the previous worker left, such as what the fuzzer has shrunk already).

    Returns only when no worker it started is left (their descendants included), also when a
    callback raises or the parent is interrupted. Workers are started from the calling thread,
    which waits for them: their death signal (PR_SET_PDEATHSIG, tied to that thread) fires only
    when the parent goes."""
    env = dict(os.environ if env is None else env)
    next_index = 0
    while next_index < len(items):
        if cancel_requested():
            raise protocol.Cancelled
        next_index = _one_worker(
            command,
            items,
            next_index,
            timeout_s=timeout_s,
            on_result=on_result,
            on_failure=on_failure,
            on_start=on_start,
            context=context(),
            env=env,
            memory_limit_gb=memory_limit_gb,
        )


DRAIN_S = 1.0  # an ended worker's pipe holds only complete writes and closes at once; a bound all the same


def _keep_written_results(events: protocol.Events, first: int, on_result: Callable[[int, Any], None]) -> None:
    """Results a worker wrote before the parent was interrupted, still in the pipe because the parent
    had not read them yet (a loaded machine): delivered, so an interruption loses no finished item."""
    deadline = time.monotonic() + DRAIN_S
    with signals_deferred():
        while True:
            try:
                event = events.next(deadline)
            except protocol.Expired:
                return
            if event is None:
                return
            if event[0] == "result":
                on_result(first + event[1], event[2])


def _one_worker(
    command, items, first, *, timeout_s, on_result, on_failure, on_start, context, env, memory_limit_gb
) -> int:
    """One worker over items[first:]; returns the index the next worker starts at. A row's deadline
    is its start (the worker's stamp) plus timeout_s; before its first row, a worker also has
    WORKER_START_GRACE_S to start."""
    fd, err_name = tempfile.mkstemp(prefix="worker-", suffix=".stderr", dir=run_tmpdir())
    err_path = Path(err_name)
    worker = events = None
    try:
        with signals_deferred(), os.fdopen(fd, "w") as err_file:  # no interruption between start and `worker =`
            worker = _start_worker(command, env, err_file, memory_limit_gb)
        proc = worker.proc
        try:
            pickle.dump((context, list(items[first:])), proc.stdin)
            proc.stdin.close()
        except BrokenPipeError:  # died before reading its work: judged below like any early death
            pass
        events = protocol.Events(proc.stdout.fileno())
        started: int | None = None
        done = first
        deadline = time.monotonic() + timeout_s + WORKER_START_GRACE_S
        while True:
            try:
                event = events.next(deadline, cancel_requested)
            except protocol.Expired:
                _end_worker(worker)
                failed = done if started is None else started
                wait = timeout_s if started is not None else timeout_s + WORKER_START_GRACE_S
                on_failure(
                    failed,
                    Status.TIMEOUT,
                    f"no result within {wait:g} s; worker killed\n--- last stderr lines ---\n{_tail(err_path)}",
                )
                return failed + 1
            if event is None:  # the pipe closed: finished, or died
                returncode = _exit_status(proc, EXIT_WAIT_S)
                _end_worker(worker)
                if done == len(items):
                    return done
                failed = done if started is None else started
                on_failure(
                    failed,
                    Status.CRASH,
                    f"{exit_description(returncode if returncode is not None else proc.returncode)}\n"
                    f"--- last stderr lines ---\n{_tail(err_path)}",
                )
                return failed + 1
            kind, index = event[0], first + event[1]
            if kind == "start":  # ("start", i, the worker's time.monotonic() when it began item i)
                started = index
                deadline = event[2] + timeout_s
                on_start(index)
            else:  # ("result", i, value): read from the pipe, it is delivered whole before a signal lands
                with signals_deferred():
                    on_result(index, event[2])
                done, started = index + 1, None
                deadline = time.monotonic() + timeout_s + WORKER_START_GRACE_S
    except (KeyboardInterrupt, BrokenPipeError):  # the parent is leaving (rnnbench.processes.parent)
        if worker is not None and events is not None:
            _end_worker(worker)  # nothing more is written: what the pipe holds is all there is
            _keep_written_results(events, first, on_result)
        raise
    finally:
        if worker is not None:  # a callback raised or the parent is leaving: no orphans
            _end_worker(worker)
        err_path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# The worker's side


def serve(handle: Callable[[Any, Any], Any], setup: Callable[[Any, list], None] = lambda context, items: None) -> int:
    """The worker's side: read (context, items) from stdin, call setup(context, items) once, then
    handle(context, item) for each item, announcing it first. An exception from handle ends the
    worker (the parent records the item as a crash, with the traceback in its stderr tail):
    handlers turn the failures they expect into results themselves."""
    _arm_worker()
    stream = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # framework chatter on stdout would corrupt the protocol
    _watch_parent(stream.fileno())
    context, items = pickle.load(sys.stdin.buffer)
    setup(context, items)
    for i, item in enumerate(items):
        protocol.send(stream, ("start", i, time.monotonic()))
        try:
            result = handle(context, item)
        except Exception:
            traceback.print_exc()
            return 1
        protocol.send(stream, ("result", i, result))
    descendants.end_tree(os.getpid())  # what the rows started, daemons included: not past this worker
    return 0


def _die_with_group() -> None:
    """End this worker and, when it leads its own group (started by run_isolated), everything it started."""
    with contextlib.suppress(OSError):
        descendants.end_tree(os.getpid())
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _watch_parent(protocol_fd: int) -> None:
    """A daemon thread that ends the worker (and its group) when its parent is gone: the parent pid
    changed (the worker was re-parented) or the protocol pipe lost its reader."""
    expected = os.environ.get(PARENT_VAR)
    parent = int(expected) if expected and expected.isdigit() else os.getppid()
    if os.getppid() != parent:
        _die_with_group()
    poller = select.poll()
    poller.register(protocol_fd, 0)  # no events asked for: only POLLERR / POLLHUP (reader gone) come back

    def watch() -> None:
        while True:
            ready = poller.poll(WATCH_INTERVAL_S * 1000)
            if any(mask & (select.POLLERR | select.POLLHUP) for _, mask in ready) or os.getppid() != parent:
                _die_with_group()
            if any(mask & select.POLLNVAL for _, mask in ready):  # the worker closed its protocol: it is ending
                return

    threading.Thread(target=watch, daemon=True, name="rnnbench-parent-watch").start()
