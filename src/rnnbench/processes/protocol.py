"""The wire between the parent and a worker (rnnbench.processes.isolation): pickled events, each framed
by its length, on the worker's private stdout pipe.

The parent reads the pipe itself, in the thread that waits for the row, so it always knows what
the pipe holds: when a row's deadline has passed, an event the worker already wrote (a result
finished while the parent was stopped, Ctrl-Z or SIGSTOP) is read and wins over the deadline.
The deadline itself runs on the row's clock: from the worker's own stamp of the row's start
(CLOCK_MONOTONIC is one clock for every process of a machine), not from when the parent, perhaps
just woken, read that start.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from collections.abc import Callable
from typing import Any, BinaryIO

HEADER = struct.Struct("<Q")
SLICE_S = 0.25  # waits are cut into slices: an exception set in the waiting thread (Ray's cancel) lands within one
PARTIAL_GRACE_S = 10.0  # past the deadline, how long a half-read event may take to arrive whole


class Expired(Exception):
    """The deadline passed and the pipe holds no (partly written) event."""


class Cancelled(KeyboardInterrupt):
    """The waiting thread was asked to stop (rnnbench.processes.local_pool): raised between wait slices,
    never inside a callback, so a result already read is always delivered whole."""


def send(stream: BinaryIO, event: tuple) -> None:
    """The worker's side: write one event and flush it."""
    data = pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


class Events:
    """The parent's side of one worker's pipe (fd): next(deadline) returns its events in order."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = bytearray()
        self.eof = False

    def _frame(self) -> tuple | None:
        if len(self.buffer) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.buffer)
        if len(self.buffer) < HEADER.size + size:
            return None
        data = bytes(self.buffer[HEADER.size : HEADER.size + size])
        del self.buffer[: HEADER.size + size]
        try:
            return pickle.loads(data)
        except Exception:  # a torn or foreign write: the worker is judged by how it ended
            self.eof = True
            return None

    def _fill(self, timeout_s: float) -> bool:
        """Read what arrives within timeout_s; whether anything (or EOF) did."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 1 << 16)
        except OSError:
            chunk = b""
        if chunk:
            self.buffer += chunk
        else:
            self.eof = True
        return True

    def next(self, deadline: float, stop: Callable[[], bool] = lambda: False) -> Any | None:
        """The next event, None once the pipe closed (the worker finished or died), or Expired
        when time.monotonic() passed `deadline` and everything the pipe held has been read;
        Cancelled when stop() holds (looked at between wait slices) and no event is ready."""
        while True:
            event = self._frame()
            if event is not None:
                return event
            if self.eof:
                return None
            if stop():
                raise Cancelled
            late = time.monotonic() - deadline
            if late < 0:
                self._fill(min(SLICE_S, -late))
            elif self._fill(0.0):  # past the deadline: take what is already there first
                continue
            elif self.buffer and late < PARTIAL_GRACE_S:  # an event being written: the row finished
                self._fill(SLICE_S)
            else:
                raise Expired
