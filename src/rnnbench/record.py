"""Result records: one JSON object per (model, driver, sizes, dtype, device) row, appended to a
JSON Lines file as each row completes, so an interrupted run keeps what it finished."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any, Iterable

SCHEMA = 1

FAILING = ("grad_mismatch", "missing_grad", "forward_mismatch", "compile_error", "error", "crash", "timeout")
"""Statuses that fail a run. "ok", "unavailable" (the driver cannot run here, with a reason) and
"skipped" (a sweep row not run or stopped because its time budget was spent, with the reason) do not;
nor does "known_issue:<id>" (a failure the known-issues registry expects: still reported, never timed),
while "known_issue_fixed:<id>" (a registered bug that no longer reproduces) does: see is_failing."""


def is_failing(status: str) -> bool:
    """True when a row with this status fails the run (the CLI's exit code 1)."""
    return status in FAILING or status.startswith("known_issue_fixed:")


def machine() -> dict[str, Any]:
    """Identity of the machine, so results from several machines can be merged and told apart."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def environment(threads: int, versions: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "threads": threads,
        "versions": versions,
        "settings": settings,
        "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")},
    }


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one record as one line, flushed and fsynced (a killed run loses at most this line)."""
    line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def repair_truncated(path: Path) -> bool:
    """Drop an incomplete last line (a run killed mid-write) so appending continues valid JSON
    Lines. Returns True when a line was dropped. Rewrites atomically (temp file + rename)."""
    text = Path(path).read_text()
    if not text or text.endswith("\n"):
        return False
    keep = text[: text.rfind("\n") + 1]
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(keep)
    os.replace(tmp, path)
    return True


class CorruptRecords(ValueError):
    """A results file with a line that is not a record."""


def load(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Read records; a truncated last line (a run killed mid-write) is skipped with a warning,
    any other malformed line is an error naming the file and line."""
    records = []
    for path in paths:
        lines = Path(path).read_text().splitlines()
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines):
                    print(f"rnnbench: warning: {path}:{i}: truncated last line skipped", file=sys.stderr)
                    continue
                raise CorruptRecords(f"{path}:{i}: not a JSON record") from None
            if not isinstance(rec, dict) or "status" not in rec or "model" not in rec:
                raise CorruptRecords(f"{path}:{i}: not an rnnbench record")
            records.append(rec)
    return records
