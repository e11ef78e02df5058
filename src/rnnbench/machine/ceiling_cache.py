"""The ceilings' cache file: read, verified, written (rnnbench.machine.ceilings measures through it),
by the rules of the GEMM peak's (rnnbench.machine.peak_cache, whose hash and limits it shares).

One JSON file, {"entries": {key text: entry}}; an entry holds the bandwidth of each memory level
(GB/s, by threads "1" and "all"), each framework's dispatch floor (µs), the cache levels' and
buffers' bytes, when and under what load they were measured. It is evidence, never authority: used
only once its SHA-256 over key and content matches and every value is possible (verify_entry);
anything else is said in one line on stderr and measured again. An entry older than
PEAK_MAX_AGE_DAYS is measured again; one measured while other work ran on its CPUs
(others_on_cpus > CONTENDED_CPUS) is measured again at most once per RETRY_S, keeping each value's
best (the highest bandwidth, the lowest floor: a disturbed measurement is only ever worse). The file
is locked while one process measures; a run never waits for another's measurement."""

from __future__ import annotations

import fcntl
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rnnbench.machine.cpus import CONTENDED_CPUS
from rnnbench.machine.peak_cache import (
    FUTURE_SKEW_S,
    PEAK_MAX_AGE_DAYS,
    Read,
    content_hash,
    entry_id,
    read_verified,
    sealed,
)

RETRY_S = 3600.0  # a contended entry is measured again at most this often: a busy machine is not re-timed every run
MAX_GBS = 1e6  # 1 PB/s: past any cache's or HBM's bandwidth; a value above it is damage
FLOOR_US = (1e-3, 1e7)  # a dispatch floor outside (1 ns, 10 s) is damage


def cached_ceilings(path: Path, key: Mapping[str, Any], measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The verified entry of `key` in `path`, measured (measure(): the measuring process's answer:
    bandwidth_gbs, dispatch_us, levels, buffers, errors, others_on_cpus) where there is none, it is
    old or damaged, or it was measured under contention over RETRY_S ago (module docstring)."""
    key_text = json.dumps(key, sort_keys=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _without_waiting(path, key_text)
        read = read_cache(path)
        damaged = read.unreadable or read.damaged.get(key_text, "")
        if damaged:
            print(
                f"rnnbench: ceilings cache entry {entry_id(key_text)} in {path} failed verification ({damaged}); "
                "measured again",
                file=sys.stderr,
                flush=True,
            )
        entries = read.entries
        entry = entries.get(key_text)
        now = time.time()
        if entry is not None and now - entry["measured_epoch"] > PEAK_MAX_AGE_DAYS * 86400:
            entry = None
        contended = entry is not None and (entry.get("others_on_cpus") or 0.0) > CONTENDED_CPUS
        if entry is not None and not (contended and now - entry.get("tried_epoch", 0.0) > RETRY_S):
            return entry
        got = dict(measure())
        entry = _merged(entry, got, now)
        entries[key_text] = sealed(key_text, {**entry, "key": dict(key)})
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True))
        os.replace(tmp, path)
        return entries[key_text]


def _merged(old: dict[str, Any] | None, got: dict[str, Any], now: float) -> dict[str, Any]:
    """A new measurement `got` over the `old` entry: each bandwidth's highest, each floor's lowest,
    the calmest others_on_cpus; the first measurement's date."""
    entry = {k: v for k, v in (old or {}).items() if k != "sha256"}
    bandwidth = entry.setdefault("bandwidth_gbs", {})
    for level, rates in (got.get("bandwidth_gbs") or {}).items():
        for threads, rate in rates.items():
            kept = bandwidth.setdefault(level, {})
            kept[threads] = max(rate, kept.get(threads, 0.0))
    floors = entry.setdefault("dispatch_us", {})
    for name, us in (got.get("dispatch_us") or {}).items():
        floors[name] = min(us, floors.get(name, math.inf))
    for name in ("levels", "buffers"):
        entry[name] = got.get(name) or entry.get(name) or {}
    entry["errors"] = got.get("errors") or {}
    others, calmest = got.get("others_on_cpus"), entry.get("others_on_cpus")
    entry["others_on_cpus"] = others if calmest is None else (calmest if others is None else min(others, calmest))
    entry["measured_epoch"] = entry.get("measured_epoch") or now
    entry["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(entry["measured_epoch"]))
    entry["tried_epoch"] = now
    return entry


def _without_waiting(path: Path, key_text: str) -> dict[str, Any]:
    """The cached entry while another process measures; RuntimeError where none verifies."""
    read = read_cache(path)
    entry = read.entries.get(key_text)
    if entry is None:
        why = read.unreadable or read.damaged.get(key_text)
        cached = f"the one cached failed verification ({why})" if why else "none is cached yet"
        raise RuntimeError(f"another rnnbench process is measuring this machine's ceilings now, {cached}")
    return entry


def read_cache(path: Path) -> Read:
    """The cache file, every entry verified (verify_entry)."""
    return read_verified(path, verify_entry)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def verify_entry(key_text: str, entry: Any) -> str:
    """Why the entry of `key_text` cannot be used, in a few words; "" where it can: its shape, its
    content hash, its key, every bandwidth in (0, MAX_GBS) GB/s, every floor in FLOOR_US µs, every
    level and buffer a positive byte count, others_on_cpus not negative, measured no later than now."""
    if not isinstance(entry, dict):
        return "not an entry of the expected shape"
    bandwidth, floors = entry.get("bandwidth_gbs"), entry.get("dispatch_us")
    sizes = [entry.get("levels"), entry.get("buffers")]
    if not (isinstance(bandwidth, dict) and isinstance(floors, dict) and all(isinstance(s, dict) for s in sizes)):
        return "not an entry of the expected shape"
    if not all(_number(entry.get(k)) for k in ("measured_epoch", "tried_epoch")):
        return "not an entry of the expected shape"
    if entry.get("sha256") != content_hash(key_text, entry):
        return "no content hash" if "sha256" not in entry else "content hash mismatch"
    if json.dumps(entry.get("key"), sort_keys=True) != key_text:
        return "kept under another key"
    for level, rates in bandwidth.items():
        if not isinstance(rates, dict) or not all(_number(r) and 0 < r < MAX_GBS for r in rates.values()):
            return f"implausible bandwidth {rates!r} GB/s for {level}"
    for name, us in floors.items():
        if not (_number(us) and FLOOR_US[0] < us < FLOOR_US[1]):
            return f"implausible dispatch floor {us!r} µs for {name}"
    for size in sizes:
        if not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in size.values()):
            return f"implausible byte count in {size!r}"
    others = entry.get("others_on_cpus")
    if others is not None and not (_number(others) and others >= 0):
        return f"implausible others_on_cpus {others!r}"
    if entry["measured_epoch"] > time.time() + FUTURE_SKEW_S:
        return f"implausible measured_epoch {entry['measured_epoch']!r}"
    return ""
