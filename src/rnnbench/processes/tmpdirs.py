"""One temporary directory per rnnbench process (workers' stderr, cold compile caches):
`$TMPDIR/rnnbench-run-<pid>-<start time>-*` (`run_tmpdir`), removed when the process ends normally
or by an exception (signals included: rnnbench.processes.parent.handle_signals). Each directory is
claimed by an flock on its `.lock`, held for the process's life and dropped by the kernel however
it ends; the next rnnbench process that makes its own removes every directory whose lock it can
take (one of a SIGKILLed process). A lock, not a pid: a process in another PID namespace sharing
the temp dir (a container) sees our pid as dead, but not our lock as free. Each is an owned folder
(rnnbench.processes.owned, kind TMP_KIND): a cleaner removes only a directory that holds its marker."""

from __future__ import annotations

import atexit
import fcntl
import os
import tempfile
import threading
from pathlib import Path

from rnnbench.processes.owned import is_owned, make_owned, remove_owned

TMP_PREFIX = "rnnbench-run-"
LOCK_NAME = ".lock"
TMP_KIND = "tmp"  # the owned-folder kind of every directory made here (its marker: .rnnbench-tmp)
_run_dir: Path | None = None
_run_dir_owner: int | None = None
_run_dir_lock = threading.Lock()
_held: dict[Path, int] = {}  # this process's directories -> their lock's descriptor, open while it lives


def _start_time(pid: int) -> str:
    """A process's start time (clock ticks since boot, Linux), to tell a reused pid from its first
    owner in a directory's name; "0" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return "0"


def _claim(tag: str, root: str) -> Path:
    """A new directory `root/rnnbench-run-<pid>-<start time>-<tag>*`, holding its lock before it
    appears under that name (made hidden, locked, then renamed), so no cleaner sees it unlocked."""
    pid = os.getpid()
    hidden = Path(tempfile.mkdtemp(prefix=f".{TMP_PREFIX}{pid}-{_start_time(pid)}-{tag}", dir=root))
    make_owned(hidden, TMP_KIND, "a temporary directory")  # new and empty: adopted
    fd = os.open(hidden / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    final = hidden.with_name(hidden.name[1:])
    os.rename(hidden, final)
    _held[final] = fd
    return final


def remove_stale_tmpdirs(root: str | None = None) -> list[Path]:
    """Remove the run directories under `root` (default: the temp dir) whose lock is free (their
    process is gone, in whatever PID namespace it ran). Returns what was removed."""
    root_path = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root_path.glob(TMP_PREFIX + "*"))
    except OSError:
        return removed
    for entry in entries:
        if not is_owned(entry, TMP_KIND):  # a link, a file, or a folder rnnbench did not make: left alone
            continue
        try:
            fd = os.open(entry / LOCK_NAME, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:  # no lock file: not a directory this rnnbench claimed, left alone
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            remove_owned(entry, TMP_KIND, "a stale temporary directory", ignore_errors=True)  # under the lock
            removed.append(entry)
        except OSError:  # held: its process lives (this one's own included)
            pass
        finally:
            os.close(fd)
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
        _run_dir = _claim("", tempfile.gettempdir())
        if _run_dir_owner is None:
            atexit.register(remove_run_tmpdir)
        _run_dir_owner = os.getpid()
        return _run_dir


def short_tmpdir(tag: str, room: int) -> Path:
    """A directory of this process for a tool whose paths must stay short (unix sockets), created
    directly under the temp dir (or /tmp where that path is longer than `room`) and claimed like
    run_tmpdir's, so remove_stale_tmpdirs removes it once this process is gone, even after a
    SIGKILL; the caller removes it on every other exit."""
    root = tempfile.gettempdir()
    if len(os.path.join(root, f"{TMP_PREFIX}{os.getpid()}-{_start_time(os.getpid())}-{tag}-")) + 8 > room:
        root = "/tmp"
    return _claim(f"{tag}-", root)


def remove_run_tmpdir() -> None:
    """Remove this process's temporary directory (nothing if there is none)."""
    global _run_dir
    with _run_dir_lock:
        if _run_dir is not None and _run_dir_owner == os.getpid():
            if is_owned(_run_dir, TMP_KIND):  # at exit: a directory that lost its marker is left, not raised on
                remove_owned(_run_dir, TMP_KIND, "this process's temporary directory", ignore_errors=True)
            fd = _held.pop(_run_dir, None)
            if fd is not None:
                os.close(fd)
        _run_dir = None
