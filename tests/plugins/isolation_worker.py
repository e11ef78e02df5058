"""A worker for tests/test_isolation.py: each item names what the worker does with it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from pathlib import Path

DAEMON_DIR_VAR = "ISOLATION_DAEMON_DIR"  # where a daemon started by an item writes daemon-<pid>


def _daemonize() -> None:
    """Start a daemon the classic way (fork, setsid, fork again, stdio on /dev/null): it leaves the
    worker's process group and session, and its parent exits at once, so init (or a subreaper)
    adopts it. It writes daemon-<pid> in $ISOLATION_DAEMON_DIR, then sleeps."""
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, 1024)
            folder = Path(os.environ[DAEMON_DIR_VAR])
            (folder / f".daemon-{os.getpid()}").write_text("")
            (folder / f".daemon-{os.getpid()}").rename(folder / f"daemon-{os.getpid()}")
            time.sleep(3600)
        os._exit(0)
    os.waitpid(first, 0)
    while not any(Path(os.environ[DAEMON_DIR_VAR]).glob("daemon-*")):
        time.sleep(0.01)


def handle(context, item):
    if item.startswith("daemonize"):
        _daemonize()
        item = item.removeprefix("daemonize").removeprefix("_then_") or "daemonized"
    if item.startswith("sleep_"):
        time.sleep(float(item.removeprefix("sleep_")))
    if item.startswith("big_"):  # a result larger than a pipe holds: written while the parent reads it
        time.sleep(float(item.removeprefix("big_")))
        return (item, b"x" * 2**26, os.getpid())
    if item == "stderr_flood":
        line = "x" * 1023 + "\n"
        for _ in range(32 * 1024):  # 32 MiB
            sys.stderr.write(line)
        sys.stderr.write("the last line\n")
        raise ValueError("after the flood")
    if item == "segfault":
        ctypes.string_at(0)
    if item == "hang":
        time.sleep(3600)
    if item == "flag_then_hang":  # says it reached this item (so every earlier result is written), hangs
        Path(os.environ["ISOLATION_FLAG"]).write_text("")
        time.sleep(3600)
    if item == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if item == "raise":
        raise ValueError("handler bug")
    if item == "allocate_2gb":
        bytearray(2 * 2**30)  # MemoryError under the worker's address-space limit
    print("framework chatter on stdout must not break the protocol")
    return (item, context, os.getpid())


if __name__ == "__main__":
    from rnnbench.processes.isolation import serve

    sys.exit(serve(handle))
