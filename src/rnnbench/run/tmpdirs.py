"""One temporary directory per rnnbench process (workers' stderr, cold compile caches):
`$TMPDIR/rnnbench-run-<pid>-<start time>-*` (`run_tmpdir`), removed when the process ends normally
or by an exception (signals included: rnnbench.run.parent.handle_signals); the directory of a
process that was SIGKILLed is removed by the next rnnbench process that makes its own."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

TMP_PREFIX = "rnnbench-run-"
_run_dir: Path | None = None
_run_dir_owner: int | None = None
_run_dir_lock = threading.Lock()


def _start_time(pid: int) -> str:
    """A process's start time (clock ticks since boot, Linux), to tell a reused pid from its first
    owner; "0" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
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


def remove_stale_tmpdirs(root: str | None = None) -> list[Path]:
    """Remove the run directories under `root` (default: the temp dir) whose process is gone
    (a run that was SIGKILLed could not remove its own). Returns what was removed."""
    root_path = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root_path.glob(TMP_PREFIX + "*"))
    except OSError:
        return removed
    for entry in entries:
        parts = entry.name[len(TMP_PREFIX) :].split("-")
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
