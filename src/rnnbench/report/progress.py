"""Progress of a run: a redrawn bar on a terminal, plain lines otherwise (CI logs)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rnnbench.report.escape import terminal
from rnnbench.status import Status


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Call start(job) when a row begins and done(record) when it ends."""

    def __init__(self, total: int, stream: TextIO | None = None, tty: bool | None = None, unavailable: int = 0):
        """stream: default the current sys.stdout (looked up now, not when this module was imported).
        unavailable: how many of the rows are known to be unavailable before any runs (the runner
        decides those first): the plain log says so on its first line."""
        self.total = total
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.done_rows = 0
        self.begin = time.perf_counter()
        self.current = ""
        self.unavailable = 0
        self.unannounced = 0  # unavailable rows the plain log has not mentioned yet
        self.preannounced = unavailable  # ... and those its first line mentioned
        if unavailable and not self.tty:
            self.stream.write(
                f"[0/{total}] {unavailable} of the {total} rows are unavailable here (not run; listed by "
                f"reason at the end), {total - unavailable} to run\n"
            )
            self.stream.flush()

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

    def _announce(self) -> None:
        """In the plain log, one line for the unavailable rows not yet mentioned (those the runner
        decides before any row runs were counted by the first line): the numbering never jumps."""
        if self.unannounced and not self.tty:
            self.stream.write(
                f"[{self.done_rows}/{self.total}] {self.unannounced} row(s) unavailable here "
                "(not run; listed by reason at the end)\n"
            )
            self.stream.flush()
        self.unannounced = 0

    def done(self, rec: dict) -> None:
        if rec["status"] != Status.UNAVAILABLE:
            self._announce()  # the unavailable rows before this one, numbered before it
        self.done_rows += 1
        if rec["status"] == Status.UNAVAILABLE:  # counted; the final summary gives one line per reason
            self.unavailable += 1
            if self.preannounced:
                self.preannounced -= 1
            else:
                self.unannounced += 1
            if self.tty:
                self.stream.write("\r\033[K" + self._bar())
                self.stream.flush()
            return
        err = rec.get("max_rel_error")
        line = terminal(
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
        self._announce()
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
