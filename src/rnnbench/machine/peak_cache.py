"""The GEMM-peak cache file: read, verified, written (rnnbench.machine.roofline measures the CPU's
peak through it, rnnbench.machine.device_peak a GPU's).

One JSON file per kind of peak, {"entries": {key text: entry}}, an entry per key: its rates by
framework and shape (GFLOP/s), when and under what load they were measured. `cached_peak` measures
what the entry lacks, under the file's lock so that two runs never time GEMMs on the same hardware
at once, and writes the file aside and renames it over the old one (a reader sees one or the other,
whole).

An entry is evidence, never authority: it keeps a SHA-256 over its key and its content, and is used
only once the hash matches and every value is possible (verify_entry: rates finite, above 0 and
below MAX_PLAUSIBLE_GFLOPS; measured no later than now). Anything else (cut short, hand-edited, a
flipped bit, unparseable) is said in one line on stderr and measured again, and the entry replaced.
The hash is no signature: it catches damage and edits, not a writer who recomputes it
(docs/security.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnbench.machine.cpus import CONTENDED_CPUS

PEAK_MAX_AGE_DAYS = 30.0  # a cached peak older than this is measured again
# 1e7 GFLOP/s (10 PFLOP/s): several times any single processor's or accelerator's dense datasheet
# rate at the dtypes measured (bfloat16 tensor cores included), so a measured rate never reaches it
# and only damage or an edit does; a rate above it would make every row's fraction of the peak ~0.
MAX_PLAUSIBLE_GFLOPS = 1e7
# a measurement dated this far past the clock is damage (it would never age out); a little allows
# for a clock stepped back between runs
FUTURE_SKEW_S = 86400.0


def shape_name(shape: Sequence[int]) -> str:
    return "x".join(str(int(x)) for x in shape)


@dataclass
class Read:
    """The cache file as read: the entries that verify, by key text; why each other one does not;
    why the whole file could not be used ("" where it could, or is absent)."""

    entries: dict[str, Any] = field(default_factory=dict)
    damaged: dict[str, str] = field(default_factory=dict)
    unreadable: str = ""


def cached_peak(
    path: Path,
    key: Mapping[str, Any],
    shapes: Sequence[tuple[int, int, int]],
    measure: Callable[[list[tuple[int, int, int]]], dict[str, Any]],
    **fields: Any,
) -> dict[str, Any]:
    """The entry of `key` in the peak cache `path`, with rates of every one of `shapes`. Shapes
    already measured are not measured again; the others are measured (measure(shapes): a fresh
    process's measure_rates, with others_on_cpus where known and any identity of the hardware,
    which the entry keeps, as it keeps `fields`) and added. An entry older than PEAK_MAX_AGE_DAYS,
    or one that fails verification, is measured anew; rates of one shape keep their best (a disturbed
    measurement is only ever too slow); an entry whose measurements all had other work on its CPUs
    (others_on_cpus > CONTENDED_CPUS) is measured again, every shape, at each call until one
    measurement is calm. The file is locked while one process measures, so two runs never time
    GEMMs on the same hardware at once; a run never waits for another's measurement: while the lock
    is held elsewhere it takes the entry as cached (`without_waiting`)."""
    key_text = json.dumps(key, sort_keys=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return without_waiting(path, key_text)
        read = read_cache(path)
        damaged = read.unreadable or read.damaged.get(key_text, "")
        if damaged:
            print(
                f"rnnbench: GEMM peak cache entry {entry_id(key_text)} in {path} failed verification ({damaged}); "
                "measured again",
                file=sys.stderr,
                flush=True,
            )
        entries = read.entries  # entries that fail verification are left out of the file written
        entry = entries.get(key_text)
        if entry is None or time.time() - entry["measured_epoch"] > PEAK_MAX_AGE_DAYS * 86400:
            entry = {"key": dict(key), "by_framework": {}}  # none, damaged, or old: measured again
        done = set.intersection(*(set(r) for r in entry["by_framework"].values())) if entry["by_framework"] else set()
        missing = [s for s in shapes if shape_name(s) not in done]
        if (entry.get("others_on_cpus") or 0.0) > CONTENDED_CPUS:
            # measured while other work ran on these CPUs: every shape again, until a calm measurement
            missing = sorted({*missing, *(tuple(int(x) for x in name.split("x")) for name in done)})
        if missing:
            got = dict(measure(missing))
            for framework, rates in got.pop("by_framework").items():
                old = entry["by_framework"].setdefault(framework, {})
                for shape, rate in rates.items():
                    old[shape] = max(rate, old.get(shape, 0.0))
            others, calmest = got.pop("others_on_cpus", None), entry.get("others_on_cpus")
            if others is not None:  # the calmest measurement so far
                entry["others_on_cpus"] = others if calmest is None else min(others, calmest)
            entry.update({"errors": {}, **got, **fields})
            entry.pop("sha256", None)
            entry["measured_epoch"] = entry.get("measured_epoch") or time.time()
            entry["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(entry["measured_epoch"]))
            entries[key_text] = sealed(key_text, entry)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True))
            os.replace(tmp, path)
    return entry


def without_waiting(path: Path, key_text: str) -> dict[str, Any]:
    """The cached entry of `key_text` as it stands while another process measures (its shapes, its
    age and the load it was measured under as they are), once it verifies: a run waits on no other
    process's measurement. RuntimeError where there is none yet: that run's rows get no % of peak."""
    read = read_cache(path)
    entry = read.entries.get(key_text)
    if entry is None or not any(entry["by_framework"].values()):
        why = read.unreadable or read.damaged.get(key_text)
        cached = f"the one cached failed verification ({why})" if why else "none is cached yet"
        raise RuntimeError(f"another rnnbench process is measuring this machine's peak now, {cached}")
    return entry


def cached_entries(path: Path) -> dict[str, Any]:
    """The cache file's entries that verify, by key text; {} for a missing or unusable file."""
    return read_cache(path).entries


def read_cache(path: Path) -> Read:
    """The cache file, every entry verified (verify_entry)."""
    return read_verified(path, verify_entry)


def read_verified(path: Path, verify: Callable[[str, Any], str]) -> Read:
    """A cache file of {"entries": {key text: entry}}, each entry checked by `verify` (why it cannot
    be used, "" where it can): the one reading of every machine-facts cache (peaks, ceilings)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Read()
    except (OSError, UnicodeDecodeError) as exc:
        return Read(unreadable=f"unreadable: {type(exc).__name__}")
    try:
        cache = json.loads(text)
    except ValueError:
        return Read(unreadable="not JSON (cut short or damaged)")
    entries = cache.get("entries") if isinstance(cache, dict) else None
    if not isinstance(entries, dict):
        return Read(unreadable="no entries")
    read = Read()
    for key_text, entry in entries.items():
        why = verify(key_text, entry)
        if why:
            read.damaged[key_text] = why
        else:
            read.entries[key_text] = entry
    return read


def entry_id(key_text: str) -> str:
    """A short name of an entry's key, for a message: the key itself is a page of JSON."""
    return hashlib.sha256(key_text.encode()).hexdigest()[:16]


def content_hash(key_text: str, entry: Mapping[str, Any]) -> str:
    """SHA-256 over the key text and the entry without its hash, as canonical JSON (Python's JSON
    writes every float so that it reads back the same, so a read entry hashes as it was written)."""
    body = {k: v for k, v in entry.items() if k != "sha256"}
    return hashlib.sha256(json.dumps([key_text, body], sort_keys=True).encode()).hexdigest()


def sealed(key_text: str, entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` with its content hash (the last change before it is written)."""
    entry["sha256"] = content_hash(key_text, entry)
    return entry


def verify_entry(key_text: str, entry: Any) -> str:
    """Why the entry of `key_text` cannot be used, in a few words; "" where it can: the shape
    peak_summary reads, its content hash, its key, every rate finite, above 0 and below
    MAX_PLAUSIBLE_GFLOPS, others_on_cpus finite and not negative, measured_epoch no later than now."""
    if not _valid_entry(entry):
        return "not an entry of the expected shape"
    if entry.get("sha256") != content_hash(key_text, entry):
        return "no content hash" if "sha256" not in entry else "content hash mismatch"
    if json.dumps(entry.get("key"), sort_keys=True) != key_text:
        return "kept under another key"
    for framework, rates in entry["by_framework"].items():
        for shape, rate in rates.items():
            if not (math.isfinite(rate) and 0 < rate < MAX_PLAUSIBLE_GFLOPS):
                return f"implausible rate {rate!r} GFLOP/s for {framework} {shape}"
    others = entry.get("others_on_cpus")
    if others is not None and not (math.isfinite(others) and others >= 0):
        return f"implausible others_on_cpus {others!r}"
    if not (math.isfinite(entry["measured_epoch"]) and entry["measured_epoch"] <= time.time() + FUTURE_SKEW_S):
        return f"implausible measured_epoch {entry['measured_epoch']!r}"
    return ""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _valid_entry(entry: Any) -> bool:
    """Whether a cached entry has the shape peak_for reads: by_framework {framework: {"mxkxn":
    GFLOP/s > 0}} with shape names of three integers, a numeric measured_epoch, others_on_cpus a
    number or absent/null, errors a dict or absent, cpus a list of integers or absent."""
    if not isinstance(entry, dict) or not isinstance(entry.get("by_framework"), dict):
        return False
    for rates in entry["by_framework"].values():
        if not isinstance(rates, dict) or not all(
            isinstance(shape, str) and re.fullmatch(r"\d+x\d+x\d+", shape) and _number(rate) and rate > 0
            for shape, rate in rates.items()
        ):
            return False
    if not _number(entry.get("measured_epoch")) or not (
        entry.get("others_on_cpus") is None or _number(entry["others_on_cpus"])
    ):
        return False
    if not isinstance(entry.get("errors", {}), dict) or not isinstance(entry.get("measured", ""), str):
        return False
    cpus = entry.get("cpus", [])
    return isinstance(cpus, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in cpus)
