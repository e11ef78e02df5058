"""Work in worker processes, written once: `rnnbench run` sends rows, `rnnbench fuzz` sends bodies.

The parent starts `command` (a Python interpreter running a module that calls `serve`), writes the
items to its stdin, and reads one event per item back on a private pipe (the worker's original
stdout; anything a framework prints goes to stderr, so the stream stays clean). A worker that dies
(segfault, out-of-memory kill) or hangs costs only the item it had started: the parent records that
item as "crash" (with how the process ended and the last lines of its stderr) or "timeout" (the
worker is killed), then starts a fresh worker for the items after it.

Events are pickled: items and results are any picklable data (records, fuzz outcomes with their
bodies); the parent and every environment's interpreter run the same rnnbench source.

No worker outlives its parent, however the parent ends:

- each worker leads a session (and process group) of its own, so whatever it starts (inductor's
  compile workers, jax's helpers) is in its group, and the parent ends a worker by killing the
  whole group; a terminal's Ctrl-C reaches the parent only, which then ends its workers;
- on Linux the worker arms PR_SET_PDEATHSIG = SIGKILL as its first act, before it reads work or
  imports a framework (then checks that its parent is still the one that started it, which
  closes the race with a parent that died first; the guard below covers that window too);
- a guard process per worker (`/bin/sh`, its own session, deaf to INT/TERM/HUP) holds the read
  end of a pipe only the parent writes to: when the parent ends, however (SIGKILL included), the
  pipe closes and the guard kills the worker's group: the worker's descendants too;
- in the worker, `serve` runs a watchdog thread that kills its group when its parent changes or
  the protocol pipe closes (the portable layer, where there is no PDEATHSIG);
- the parent's own exits are exceptions that every `finally` sees: `handle_signals` turns SIGINT,
  SIGTERM and SIGHUP into `Interrupted`, and `watch_stdout` a closed stdout pipe into
  BrokenPipeError, at once, even while the parent waits for a row.

Temporary files (workers' stderr, cold compile caches) live in one directory per parent process,
`$TMPDIR/rnnbench-run-<pid>-<start time>-*` (`run_tmpdir`), removed when the process ends
normally or by an exception (signals included); the directory of a process that was SIGKILLed is
removed by the next rnnbench process that makes its own.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import pickle
import queue
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from rnnbench.status import Status

WORKER_START_GRACE_S = 120.0  # importing torch / jax / torch_xla on a loaded 2-core machine can take a minute
STDERR_TAIL_LINES = 20
EXIT_WAIT_S = 10.0  # after its pipe closed, how long a worker may take to exit before its group is killed
PARENT_VAR = "RNNBENCH_PARENT_PID"  # the worker's expected parent, for its watchdog
WATCH_INTERVAL_S = 0.25

# The guard: waits for EOF on stdin (the parent gone, or done with the worker), then kills the
# worker's process group. Signals a terminal or a CI runner sends to a process group do not stop it.
GUARD_SCRIPT = 'trap "" INT TERM HUP; read _ ; kill -KILL "-$1" 2>/dev/null; exit 0'


def exit_description(returncode: Optional[int]) -> str:
    """How a worker ended, for the record: a signal by name (SIGKILL with the usual culprit)."""
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        hint = " (e.g. the kernel's out-of-memory killer)" if sig == signal.SIGKILL else ""
        return f"worker killed by signal {-returncode} ({sig.name}){hint}"
    return f"worker exited with code {returncode}"


# ---------------------------------------------------------------------------------------------
# Starting and ending a worker


def _load_prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    prctl = None
    for name in (None, "libc.so.6"):  # None: the symbols already loaded, libc's among them
        try:
            prctl = ctypes.CDLL(name, use_errno=True).prctl
            break
        except (OSError, AttributeError):
            continue
    if prctl is None:
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()
PR_SET_PDEATHSIG = 1


MEMORY_VAR = "RNNBENCH_MEMORY_LIMIT_GB"  # the worker's address-space limit, set by the worker itself
DEATH_SIGNAL_VAR = "RNNBENCH_PARENT_DEATH_SIGNAL"  # "1": arm PR_SET_PDEATHSIG (run_isolated asks for it)


def _arm_worker() -> None:
    """The worker's first act (serve), before it reads work or imports a framework: unblock the
    signals the parent held back while starting it, apply the memory limit, and on Linux arm
    PR_SET_PDEATHSIG = SIGKILL, then check that the parent (named in PARENT_VAR) is still ours:
    if it died between our start and the arming, exit. Done here rather than in a preexec_fn,
    which would run Python in a forked copy of a possibly multithreaded parent (jax, torch
    thread pools). PR_SET_PDEATHSIG fires when the *thread* that started us exits: run_isolated
    starts workers from the thread that calls it, which waits for them."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
    limit_gb = os.environ.get(MEMORY_VAR)
    if limit_gb:
        limit = int(float(limit_gb) * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if _PRCTL is not None and os.environ.get(DEATH_SIGNAL_VAR) == "1":
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    expected = os.environ.get(PARENT_VAR)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(70)


@dataclass
class _Worker:
    proc: subprocess.Popen
    guard: Optional[subprocess.Popen]
    guard_pipe: Optional[int]  # the write end; closing it tells the guard to kill the group


def _start_worker(command: Sequence[str], env: Mapping[str, str], err_file, memory_limit_gb: Optional[float]) -> _Worker:
    limit = {MEMORY_VAR: repr(float(memory_limit_gb))} if memory_limit_gb else {}
    proc = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_file,
                            env={**env, PARENT_VAR: str(os.getpid()), DEATH_SIGNAL_VAR: "1", **limit},
                            start_new_session=True)
    guard = guard_pipe = None
    read_end, write_end = os.pipe()  # both close-on-exec: only the guard gets the read end, as stdin
    try:
        guard = subprocess.Popen(["/bin/sh", "-c", GUARD_SCRIPT, "rnnbench-guard", str(proc.pid)], stdin=read_end,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(env),
                                 start_new_session=True)
        guard_pipe = write_end
    except OSError:  # no /bin/sh: PDEATHSIG and the worker's watchdog remain
        os.close(write_end)
    finally:
        os.close(read_end)
    return _Worker(proc, guard, guard_pipe)


def _exit_status(proc: subprocess.Popen, timeout_s: float) -> Optional[int]:
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
    """Kill the worker's process group (the worker and whatever it started), release the guard
    and reap both. Safe to call on a worker that already exited."""
    with _signals_deferred():
        proc = worker.proc
        try:
            if proc.returncode is None:  # not reaped: its pid still names its group
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


# ---------------------------------------------------------------------------------------------
# The parent's side


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
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
    (e.g. state the previous worker left, such as what the fuzzer has shrunk already).

    Returns only when no worker it started is left (their descendants included), also when a
    callback raises or the parent is interrupted. Workers are started from the calling thread,
    which waits for them: their death signal (PR_SET_PDEATHSIG, tied to that thread) fires only
    when the parent goes."""
    env = dict(os.environ if env is None else env)
    next_index = 0
    while next_index < len(items):
        next_index = _one_worker(command, items, next_index, timeout_s, on_result, on_failure, on_start,
                                 context(), env, memory_limit_gb)


def _next_event(events: "queue.Queue[Optional[tuple]]", timeout_s: float) -> Optional[tuple]:
    """events.get(timeout=timeout_s), waiting in slices: an exception set in this thread without a
    signal (a Ray task's cancellation raises KeyboardInterrupt so) lands within a slice, and the
    finally below ends the worker's group."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return events.get(timeout=max(0.0, min(WATCH_INTERVAL_S, deadline - time.monotonic())))
        except queue.Empty:
            if time.monotonic() >= deadline:
                raise


def _one_worker(command, items, first, timeout_s, on_result, on_failure, on_start, context, env, memory_limit_gb) -> int:
    """One worker over items[first:]; returns the index the next worker starts at."""
    fd, err_name = tempfile.mkstemp(prefix="worker-", suffix=".stderr", dir=run_tmpdir())
    err_path = Path(err_name)
    worker = None
    try:
        with _signals_deferred(), os.fdopen(fd, "w") as err_file:  # no interruption between start and `worker =`
            worker = _start_worker(command, env, err_file, memory_limit_gb)
        proc = worker.proc
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
            except (EOFError, pickle.UnpicklingError, OSError, ValueError):
                events.put(None)

        threading.Thread(target=reader, daemon=True, name="rnnbench-worker-reader").start()
        started: Optional[int] = None
        done = first
        while True:
            wait = timeout_s if started is not None else timeout_s + WORKER_START_GRACE_S
            try:
                event = _next_event(events, wait)
            except queue.Empty:
                _end_worker(worker)
                failed = done if started is None else started
                on_failure(failed, Status.TIMEOUT, f"no result within {wait:g} s; worker killed\n"
                                                   f"--- last stderr lines ---\n{_tail(err_path)}")
                return failed + 1
            if event is None:  # the pipe closed: finished, or died
                returncode = _exit_status(proc, EXIT_WAIT_S)
                _end_worker(worker)
                if done == len(items):
                    return done
                failed = done if started is None else started
                on_failure(failed, Status.CRASH, f"{exit_description(returncode if returncode is not None else proc.returncode)}\n"
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
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # framework chatter on stdout would corrupt the protocol
    _watch_parent(protocol.fileno())
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


def _die_with_group() -> None:
    """End this worker and, when it leads its own group (started by run_isolated), everything it started."""
    with contextlib.suppress(OSError):
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


# ---------------------------------------------------------------------------------------------
# One temporary directory per parent process


TMP_PREFIX = "rnnbench-run-"
_run_dir: Optional[Path] = None
_run_dir_owner: Optional[int] = None
_run_dir_lock = threading.Lock()


def _start_time(pid: int) -> str:
    """A process's start time (clock ticks since boot, Linux), to tell a reused pid from its first
    owner; "0" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return "0"


def _owner_alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return start == "0" or _start_time(pid) in (start, "0")


def remove_stale_tmpdirs(root: Optional[str] = None) -> list[Path]:
    """Remove the run directories under `root` (default: the temp dir) whose process is gone
    (a run that was SIGKILLed could not remove its own). Returns what was removed."""
    root_path = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root_path.glob(TMP_PREFIX + "*"))
    except OSError:
        return removed
    for entry in entries:
        parts = entry.name[len(TMP_PREFIX):].split("-")
        if len(parts) < 3 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        pid, start = int(parts[0]), parts[1]
        if pid == os.getpid() and start == _start_time(pid):
            continue
        if not _owner_alive(pid, start) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def run_tmpdir() -> Path:
    """This process's temporary directory, created on first use (stale ones of dead processes are
    removed then); removed by remove_run_tmpdir(), which `rnnbench` calls on every exit, and at
    interpreter exit for library use."""
    global _run_dir, _run_dir_owner
    with _run_dir_lock:
        if _run_dir is not None and _run_dir_owner == os.getpid() and _run_dir.is_dir():
            return _run_dir
        remove_stale_tmpdirs()
        pid = os.getpid()
        _run_dir = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{pid}-{_start_time(pid)}-"))
        if _run_dir_owner is None:
            atexit.register(remove_run_tmpdir)
        _run_dir_owner = pid
        return _run_dir


def short_tmpdir(tag: str, room: int) -> Path:
    """A directory of this process for a tool whose paths must stay short (unix sockets), created
    directly under the temp dir (or /tmp where that path is longer than `room`) and named like
    run_tmpdir's, so remove_stale_tmpdirs removes it once this process is gone, even after a
    SIGKILL; the caller removes it on every other exit."""
    pid = os.getpid()
    prefix = f"{TMP_PREFIX}{pid}-{_start_time(pid)}-{tag}-"
    root = tempfile.gettempdir()
    if len(os.path.join(root, prefix)) + 8 > room:
        root = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


def remove_run_tmpdir() -> None:
    """Remove this process's temporary directory (nothing if there is none)."""
    global _run_dir
    with _run_dir_lock:
        if _run_dir is not None and _run_dir_owner == os.getpid():
            shutil.rmtree(_run_dir, ignore_errors=True)
        _run_dir = None


# ---------------------------------------------------------------------------------------------
# The parent's exits: signals, a closed stdout, and what to tell the user


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP reached the parent: raised in its main thread so that every
    `finally` runs (workers' groups killed, temporary files removed; records written stay)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class _Results:
    path: Path
    resumable: bool


class _State:
    unwinding: Optional[int] = None  # the signal being handled; later ones are ignored
    stdout_closed = False
    results: Optional[_Results] = None
    stderr: Optional["_LineTracker"] = None


_state = _State()


def results_file(path: Path, resumable: bool) -> None:
    """Called by a command when it opens its results file: `resumable` when that command takes
    `--resume --out FILE` to continue it. An interruption then says how many records the file
    holds and, only if resumable and there are some, how to continue."""
    _state.results = _Results(Path(path), resumable)


def has_results_file() -> bool:
    return _state.results is not None


def _on_signal(signum: int, frame) -> None:
    if _state.unwinding is not None:  # already leaving: let the finally blocks finish
        return
    if _state.stdout_closed:  # watch_stdout's wake-up call
        _state.unwinding = signal.SIGPIPE
        raise BrokenPipeError(errno.EPIPE, "stdout was closed")
    _state.unwinding = signum
    raise Interrupted(signum)


def interruption() -> Optional[BaseException]:
    """The exception the signal being handled raised (Interrupted; BrokenPipeError for a closed
    stdout), or None: for callers of a library that swallows it and raises a plain
    KeyboardInterrupt instead (Ray's blocking calls do), so the exit code still names the signal."""
    if _state.unwinding is None:
        return None
    if _state.unwinding == signal.SIGPIPE:
        return BrokenPipeError(errno.EPIPE, "stdout was closed")
    return Interrupted(_state.unwinding)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back during a cleanup, so an exception raised by their handler
    cannot cut it short; they are delivered right after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block (main thread only): SIGINT, SIGTERM and SIGHUP raise Interrupted (a
    KeyboardInterrupt) once; signals the process was started ignoring (nohup) stay ignored. The
    previous handlers come back on leaving; the run's temporary directory is removed then."""
    _state.unwinding, _state.stdout_closed, _state.results, _state.stderr = None, False, None, None
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in HANDLED_SIGNALS:
        current = signal.getsignal(sig)
        if current is not signal.SIG_IGN:
            previous[sig] = current
            signal.signal(sig, _on_signal)
    try:
        yield
    finally:
        with _signals_deferred():
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            remove_run_tmpdir()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def stdout_closed(fd: int = 1) -> bool:
    """Whether stdout is a pipe whose reader is gone (or a write already failed with EPIPE)."""
    if _state.stdout_closed:
        return True
    if not _is_pipe(fd):
        return False
    poller = select.poll()
    poller.register(fd, 0)
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in poller.poll(0))


@contextlib.contextmanager
def watch_stdout(fd: int = 1) -> Iterator[None]:
    """Within the block: when stdout is a pipe and its reader goes away (`rnnbench run | head -1`),
    raise BrokenPipeError in the main thread at once, not at the next print (which may be a
    --timeout away while a worker computes). Needs handle_signals' SIGINT handler to wake it."""
    if not _is_pipe(fd) or signal.getsignal(signal.SIGINT) is not _on_signal:
        yield
        return
    wake_r, wake_w = os.pipe()
    main_ident = threading.main_thread().ident

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, 0)
        poller.register(wake_r, select.POLLIN)
        while True:
            for got, mask in poller.poll():
                if got == wake_r:
                    return
                if mask & select.POLLNVAL:
                    return
                if mask & (select.POLLERR | select.POLLHUP):
                    _state.stdout_closed = True
                    signal.pthread_kill(main_ident, signal.SIGINT)  # wakes a blocking wait; _on_signal raises
                    return

    thread = threading.Thread(target=watch, daemon=True, name="rnnbench-stdout-watch")
    thread.start()
    try:
        yield
    finally:
        os.write(wake_w, b"x")
        thread.join(1.0)
        os.close(wake_w)
        os.close(wake_r)


def silence_stdout() -> None:
    """After stdout's reader left: point fd 1 at /dev/null so nothing more (the interpreter's final
    flush included) fails or prints a traceback."""
    _state.stdout_closed = True
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class _LineTracker:
    """A text stream that remembers whether its output ends a line (a progress display writes
    "\r..." without a newline; the exit line must start a line of its own)."""

    def __init__(self, stream):
        self._stream = stream
        self.at_line_start = True

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        if text:
            self.at_line_start = text.endswith("\n")
        return n

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def track_stderr() -> Iterator[None]:
    """Within the block sys.stderr remembers whether its output ends a line; stderr_at_line_start()
    answers, also after the block."""
    tracker = _LineTracker(sys.stderr)
    _state.stderr = tracker
    sys.stderr = tracker
    try:
        yield
    finally:
        if sys.stderr is tracker:
            sys.stderr = tracker._stream


def stderr_at_line_start() -> bool:
    return _state.stderr is None or _state.stderr.at_line_start


def _records_in(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.endswith(b"\n") and line.strip())
    except OSError:
        return 0


def exit_line(what: str) -> str:
    """The one line said when a command is cut short: `what` happened, then what is kept and, for a
    command whose results file can be continued, how to continue (facts from results_file)."""
    results = _state.results
    if results is None:
        return f"rnnbench: {what}"
    n = _records_in(results.path)
    kept = f"{n} record{'s' if n != 1 else ''} kept in {results.path}" if n else f"no records written to {results.path}"
    how = f"; continue with --resume --out {results.path}" if results.resumable and n else ""
    return f"rnnbench: {what}; {kept}{how}"
