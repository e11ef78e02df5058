"""Progress of a run: a redrawn bar on a terminal, plain lines otherwise (CI logs)."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

from rnnbench.status import Status


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Call start(job) when a row begins and done(record) when it ends."""

    def __init__(self, total: int, stream: Optional[TextIO] = None, tty: Optional[bool] = None):
        """stream: default the current sys.stdout (looked up now, not when this module was imported)."""
        self.total = total
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.done_rows = 0
        self.begin = time.perf_counter()
        self.current = ""
        self.unavailable = 0

    def _bar(self) -> str:
        elapsed = time.perf_counter() - self.begin
        width = 24
        filled = width * self.done_rows // max(self.total, 1)
        eta = elapsed / self.done_rows * (self.total - self.done_rows) if self.done_rows else float("nan")
        eta_s = _clock(eta) if eta == eta else "?"
        bar = f"[{'#' * filled}{'.' * (width - filled)}] {self.done_rows}/{self.total}"
        return f"{bar}  {self.current}  elapsed {_clock(elapsed)}  eta {eta_s}"

    def start(self, job: Any) -> None:
        self.current = f"{job.driver} {job.model} {job.dtype}"
        if self.tty:
            self.stream.write("\r\033[K" + self._bar())
            self.stream.flush()

    def done(self, rec: dict) -> None:
        self.done_rows += 1
        if rec["status"] == Status.UNAVAILABLE:  # counted; the final summary gives one line per reason
            self.unavailable += 1
            if self.tty:
                self.stream.write("\r\033[K" + self._bar())
                self.stream.flush()
            return
        err = rec.get("max_rel_error")
        line = (
            f"[{self.done_rows}/{self.total}] {rec['model']:<18} {rec['driver']:<20} "
            f"{rec.get('env_label', rec.get('environment_name', '')):<13} {rec['dtype']:<8} {rec['status']}"
            + ("" if err is None else f"  max rel err {err:.1e}")
            + f"  ({_clock(time.perf_counter() - self.begin)})"
        )
        if self.tty:
            self.stream.write("\r\033[K" + line + "\n" + self._bar())
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
