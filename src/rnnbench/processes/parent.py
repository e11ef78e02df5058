"""The parent process's exits, made exceptions that every `finally` sees: `handle_signals` turns
SIGINT, SIGTERM and SIGHUP into `Interrupted`, and `watch_stdout` a closed stdout pipe into
`StdoutClosed`, at once, even while the parent waits for a row (workers' groups are then killed,
temporary files removed, records written stay). Also what to tell the user: `exit_line`, from the
results file a command opened (`results_file`), on a line of its own (`track_stderr`)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rnnbench.processes.tmpdirs import remove_run_tmpdir


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP reached the parent: raised in its main thread so that every
    `finally` runs (workers' groups killed, temporary files removed; records written stay)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StdoutClosed(KeyboardInterrupt):
    """stdout's reader went away (watch_stdout), raised in the main thread wherever it is. Not an
    OSError, though a closed pipe is one: raised at any instruction, it would otherwise be taken
    by the nearest `except OSError` for that code's own error (a results file read: exit 2)."""

    def __init__(self) -> None:
        super().__init__("stdout was closed")


HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class _Results:
    path: Path
    resumable: bool


class _State:
    unwinding: int | None = None  # the signal being handled; later ones are ignored
    deferring = 0  # signals_deferred blocks entered and not left (main thread)
    pending: int | None = None  # a signal whose handler ran inside one: raised when the last is left
    stdout_closed = False
    results: _Results | None = None
    stderr: _LineTracker | None = None


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
    if _state.deferring:  # arrived just before the block, handled inside it: after it
        _state.pending = _state.pending or signum
        return
    if _state.stdout_closed:  # watch_stdout's wake-up call
        _state.unwinding = signal.SIGPIPE
        raise StdoutClosed()
    _state.unwinding = signum
    raise Interrupted(signum)


def interruption() -> BaseException | None:
    """The exception the signal being handled raised (Interrupted; StdoutClosed for a closed
    stdout), or None: for callers of a library that swallows it and raises a plain
    KeyboardInterrupt instead (Ray's blocking calls do), so the exit code still names the signal."""
    if _state.unwinding is None:
        return None
    if _state.unwinding == signal.SIGPIPE:
        return StdoutClosed()
    return Interrupted(_state.unwinding)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back during a cleanup (or while a finished result is written),
    so an exception raised by their handler cannot cut it short; they are delivered right after.
    The mask holds back signals that arrive within the block; one that arrived just before it has
    its Python handler run at the first instruction inside, so the handler itself waits
    (_state.pending) and the interruption is raised when the outermost block is left."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1
        try:
            if not _state.deferring and _state.pending is not None:  # the first signal wins
                signum, _state.pending = _state.pending, None
                _on_signal(signum, None)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block (main thread only): SIGINT, SIGTERM and SIGHUP raise Interrupted (a
    KeyboardInterrupt) once; signals the process was started ignoring (nohup) stay ignored. The
    previous handlers come back on leaving; the run's temporary directory is removed then."""
    _state.unwinding, _state.stdout_closed, _state.results, _state.stderr = None, False, None, None
    _state.deferring, _state.pending = 0, None
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
        with signals_deferred():
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
    raise StdoutClosed in the main thread at once, not at the next print (which may be a
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
