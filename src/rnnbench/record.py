"""Result records: one JSON object per (model, driver, sizes, dtype, device) row, appended to a
JSON Lines file as each row completes, so an interrupted run keeps what it finished."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from rnnbench.errors import InputError

SCHEMA = 1



def identity(*, model: str, driver: str, framework: str, family: str, anchor: bool, environment: str, env_label: str,
             dtype: str, device: str, sizes: dict[str, int], seed: int, loss_form: str = "model") -> dict[str, Any]:
    """The identifying fields every record has, whatever happened to the row: the one constructor
    (rnnbench.run.row.Job.identity builds it for a job). env_label names what the row ran on by its
    framework's version ("torch 2.13.0", "jax 0.10.2") where known, else by its environment's name."""
    return {
        "schema": SCHEMA,
        "model": model,
        "driver": driver,
        "framework": framework,
        "framework_family": family,
        "environment_name": environment,
        "env_label": env_label,
        "anchor": anchor,
        "dtype": dtype,
        "device": device,
        "sizes": dict(sizes),
        "seed": seed,
        "loss_form": loss_form,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
    }


def row_key(rec: dict[str, Any]) -> tuple:
    """What makes two records the same row (used to resume: done rows are skipped)."""
    sizes = tuple(sorted((rec.get("sizes") or {}).items()))
    return (rec["model"], rec["driver"], rec.get("environment_name", "main"), rec["dtype"], rec.get("device", "cpu"),
            sizes, rec.get("seed", 0), rec.get("loss_form", "model"))


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


class CorruptRecords(InputError):
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
