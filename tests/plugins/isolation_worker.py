"""A worker for tests/test_isolation.py: each item names what the worker does with it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time


def handle(context, item):
    if item == "segfault":
        ctypes.string_at(0)
    if item == "hang":
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
    from rnnbench.run.isolation import serve

    sys.exit(serve(handle))
