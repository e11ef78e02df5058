"""Memory bandwidth by level: how fast this machine streams a buffer that sits in L1, L2, L3 or DRAM
(the CPU, `measure_levels`), or in an accelerator's memory (`measure_device`): the bandwidth
ceilings a row's bytes are held against (rnnbench.machine.binding).

The levels and their sizes are the machine's own (sysfs: cache_levels); a level's buffer is sized to
sit in it and out of the level below (LEVEL_BUFFERS), and is read by one numpy call,
np.maximum.reduce over a (R, n) view that repeats the buffer R times with a zero outer stride: a
plain streaming read of n float32 per pass (a SIMD max, one load per element, nothing written), R
passes per call so that the call's own overhead is under 1 % of it (READ_PER_CALL bytes). The rate
is bytes read / the fastest of REPEATS calls, in GB/s (1e9 bytes). Measured on one CPU (one thread,
pinned by affinity) and on every CPU given (one thread each, pinned, each reading its own buffer;
the rate is their bytes / the slowest thread's time); numpy's reduction releases the GIL, so the
threads run at once.

Standard library and numpy only: the measuring process pins itself before importing anything else.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

LEVELS = ("L1", "L2", "L3", "DRAM")
READ_PER_CALL = 256 * 2**20  # bytes one timed call reads: its numpy overhead is noise against it
REPEATS = 5  # timed calls per buffer; the fastest is the rate (a disturbed call is only ever slower)
DRAM_MIN = 256 * 2**20  # the DRAM buffer is at least this, and twice the last cache level
DEVICE_BYTES = 2 * 2**30  # bytes one device copy moves (read + written): far past any device cache
BANDWIDTH_METHOD = (
    "read: np.maximum.reduce over a float32 buffer sized for the level, repeated by a zero-stride view "
    f"to {READ_PER_CALL >> 20} MiB per call; bytes read / fastest of {REPEATS} calls, GB/s; buffers: "
    "L1 and L2 half the level, L3 4x L2 (or half of L3 where smaller), DRAM twice the last cache (at least "
    f"{DRAM_MIN >> 20} MiB, at most 1/8 of available memory); one thread pinned to one CPU, and one "
    "pinned thread per CPU given (each its own buffer, DRAM's split among them; their bytes / the slowest "
    "one's time)"
)
DEVICE_METHOD = (
    f"device copy of {DEVICE_BYTES >> 31} GiB into another buffer (Framework.device.stream), to completion; "
    f"bytes read + written / fastest of {REPEATS} calls, GB/s"
)


def _size_bytes(text: str) -> int:
    """sysfs' "48K", "2048K", "480M" as bytes."""
    text = text.strip()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KkMmGg")) * scale


def cache_levels(cpu: int = 0, root: Path = Path("/sys/devices/system/cpu")) -> dict[str, int]:
    """{"L1": bytes, "L2": ..., "L3": ...}: the data (or unified) caches of logical CPU `cpu` as
    sysfs lists them ({} where it does not: no level measured but DRAM)."""
    out: dict[str, int] = {}
    for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            out[f"L{int((index / 'level').read_text())}"] = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
    return {level: out[level] for level in LEVELS if level in out}


def _available_bytes() -> int:
    """MemAvailable from /proc/meminfo (8 GiB where it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 8 * 2**30


def level_buffers(levels: Mapping[str, int], available: int | None = None) -> dict[str, int]:
    """{level: bytes of the buffer that stands for it} (BANDWIDTH_METHOD): a buffer larger than the
    level below and at most half its own level; DRAM twice the last cache."""
    out: dict[str, int] = {}
    if "L1" in levels:
        out["L1"] = levels["L1"] // 2
    if "L2" in levels:
        out["L2"] = levels["L2"] // 2
    if "L3" in levels:
        out["L3"] = min(levels["L3"] // 2, 4 * levels.get("L2", levels["L3"] // 8))
    last = max(levels.values(), default=0)
    cap = (available if available is not None else _available_bytes()) // 8
    out["DRAM"] = min(max(2 * last, DRAM_MIN), max(cap, DRAM_MIN // 4))
    return {k: v - v % 64 for k, v in out.items()}


def read_call(nbytes: int) -> Callable[[], Any]:
    """One call reading a buffer of `nbytes` float32 bytes over and over, READ_PER_CALL bytes in all
    (the module docstring's kernel)."""
    n = max(nbytes // 4, 16)
    buffer = np.ones(n, dtype=np.float32)
    passes = max(1, READ_PER_CALL // (n * 4))
    view = np.lib.stride_tricks.as_strided(buffer, shape=(passes, n), strides=(0, 4), writeable=False)
    return lambda: np.maximum.reduce(view, axis=None)


def bytes_per_call(nbytes: int) -> int:
    """What one read_call(nbytes) reads."""
    n = max(nbytes // 4, 16)
    return max(1, READ_PER_CALL // (n * 4)) * n * 4


def _fastest_s(call: Callable[[], Any], repeats: int = REPEATS) -> float:
    call()  # warm: the buffer paged in and in its level
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def threads_rate(nbytes: int, cpus: Sequence[int]) -> float:
    """GB/s of one pinned thread per CPU of `cpus`, each reading its own `nbytes` buffer at once:
    their bytes / the slowest thread's fastest call."""
    times: dict[int, float] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(cpus))

    def run(cpu: int) -> None:
        try:
            os.sched_setaffinity(0, {cpu})  # this thread only (Linux affinity is per thread)
            call = read_call(nbytes)
            start.wait()
            times[cpu] = _fastest_s(call)
        except BaseException as exc:  # said by the caller: a thread's failure is the measurement's
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=run, args=(cpu,)) for cpu in cpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"bandwidth thread failed: {errors[0]!r}")
    return len(cpus) * bytes_per_call(nbytes) / max(times.values()) / 1e9


def measure_levels(cpus: Sequence[int], levels: Mapping[str, int] | None = None) -> dict[str, Any]:
    """In this process: {"levels": {level: cache bytes}, "buffers": {level: buffer bytes},
    "bandwidth_gbs": {level: {"1": GB/s of one thread on cpus[0], "all": of one thread per CPU}}}."""
    levels = dict(levels) if levels is not None else cache_levels(cpus[0])
    buffers = level_buffers(levels)
    rates = {level: {"1": threads_rate(nbytes, cpus[:1])} for level, nbytes in buffers.items()}
    if len(cpus) > 1:
        for level, nbytes in buffers.items():
            # DRAM: the threads share its buffer's size (each a part), as the caches' buffers are each core's
            rates[level]["all"] = threads_rate(nbytes // len(cpus) if level == "DRAM" else nbytes, cpus)
    else:
        for level in rates:
            rates[level]["all"] = rates[level]["1"]
    return {"levels": levels, "buffers": buffers, "bandwidth_gbs": rates}


def measure_device(frameworks: Sequence[Any], device: str, nbytes: int = DEVICE_BYTES) -> dict[str, Any]:
    """In this process: {"bandwidth_gbs": {"HBM": {"all": GB/s}}} of the fastest device copy among the
    frameworks' Framework.device.stream on `device` (the device's memory: HBM on the GPUs rows run
    on), or {"errors": {...}} where none can copy there."""
    best, errors = 0.0, {}
    for fw in frameworks:
        if fw.device.stream is None:
            continue
        try:
            why = fw.available() or fw.device_missing(device)
            if why:
                errors[fw.name] = why
                continue
            best = max(best, nbytes / _fastest_s(fw.device.stream(nbytes, device)) / 1e9)
        except Exception as exc:  # one framework failing leaves the others' numbers
            errors[fw.name] = f"{type(exc).__name__}: {exc}"[:300]
    out: dict[str, Any] = {"errors": errors}
    if best > 0:
        out["bandwidth_gbs"] = {"HBM": {"1": best, "all": best}}
        out["buffers"] = {"HBM": nbytes // 2}
    return out
