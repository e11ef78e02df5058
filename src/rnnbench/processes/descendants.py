"""Everything a worker started, found and ended, also what left its process group.

A worker's process group holds what it starts (inductor's compile workers, jax's helpers), and
killing the group ends them. A process that starts its own session (a daemon: fork, setsid, fork
again) leaves the group, and its parent's exit re-parents it to init. Two nets catch those:

- the worker is a child subreaper (Linux PR_SET_CHILD_SUBREAPER): an orphan among its descendants
  is re-parented to the worker, not to init, so while the worker lives every process it started
  is in its tree, and `end_tree` ends the tree (stopped first, so nothing forks while it is read);
- every worker carries a token in its environment (TOKEN_VAR), which whatever it starts inherits:
  after a worker died by itself (a segfault, an out-of-memory kill: its orphans went to init the
  moment it died), `end_carrying` ends every process that still carries the token.

Only where /proc exists (Linux); elsewhere both find nothing and the process group stays the net.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

TOKEN_VAR = "RNNBENCH_WORKER_TOKEN"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
MAX_ROUNDS = 50  # stop-and-look rounds: a tree that still grows after this many is killed as found


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    for name in (None, "libc.so.6"):  # None: the symbols already loaded, libc's among them
        try:
            prctl = ctypes.CDLL(name, use_errno=True).prctl
        except (OSError, AttributeError):
            continue
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        prctl.restype = ctypes.c_int
        return prctl
    return None


PRCTL = _load_prctl()


# `python -c DIES_WITH_PARENT PARENT_PID COMMAND...`: arm PR_SET_PDEATHSIG = SIGKILL (kept across exec),
# leave if the parent is already gone, become COMMAND. No rnnbench import (it serves an older commit's
# rnnbench too) and no preexec_fn (Python in a forked copy of a possibly multithreaded parent).
DIES_WITH_PARENT = (
    f"import ctypes, os, signal, sys; ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, signal.SIGKILL, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(70)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def dies_with_me(command: Sequence[str]) -> list[str]:
    """`command` started so that the kernel SIGKILLs it when this process (the thread starting it)
    dies, a SIGKILL included (Linux; elsewhere `command` as it is)."""
    if PRCTL is None:
        return list(command)
    return [sys.executable, "-I", "-S", "-c", DIES_WITH_PARENT, str(os.getpid()), *command]


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); whether it is now."""
    return PRCTL is not None and PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _pids() -> list[int]:
    """Every pid /proc shows ([] without /proc)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every process /proc shows ({} without /proc)."""
    out: dict[int, int] = {}
    for pid in _pids():
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state ppid ...
        if len(fields) > 1:
            out[pid] = int(fields[1])
    return out


def tree(root: int) -> set[int]:
    """The pids of root's descendants (not root itself)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child != root:
                found.add(child)
                todo.append(child)
    return found


def carrying(token: str) -> set[int]:
    """The pids of the processes whose environment holds TOKEN_VAR=token (this one never)."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found: set[int] = set()
    for pid in _pids():
        if pid != os.getpid():
            try:
                if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    found.add(pid)
            except OSError:  # gone, or another user's
                continue
    return found


def _send(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_then_kill(find: Callable[[], set[int]]) -> set[int]:
    """Stop what find() returns, look again until nothing new appears (a stopped process cannot
    fork; a fork under way when the stop arrives is restarted after it), then SIGKILL them all."""
    stopped: set[int] = set()
    for _ in range(MAX_ROUNDS):
        new = find() - stopped
        if not new:
            break
        _send(new, signal.SIGSTOP)
        stopped |= new
    _send(stopped, signal.SIGKILL)
    return stopped


def end_tree(root: int) -> set[int]:
    """SIGKILL every descendant of root (root itself is left as it is); the pids killed."""
    return _stop_then_kill(lambda: tree(root))


def end_carrying(token: str) -> set[int]:
    """SIGKILL every process that carries the worker token `token`; the pids killed."""
    return _stop_then_kill(lambda: carrying(token))
