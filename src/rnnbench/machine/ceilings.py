"""The machine's ceilings besides the GEMM peak, measured as the peak is: memory bandwidth per level
(rnnbench.machine.bandwidth: L1, L2, L3, DRAM on the CPU; HBM on a GPU) and each framework's dispatch
floor (rnnbench.machine.dispatch_floor), in a fresh process (`python -m rnnbench.machine.ceilings
REQUEST`) pinned to the rows' CPUs with their thread settings, cached in cache_root()/ceilings.json
(rnnbench.machine.ceiling_cache: verified on read) under hostname, CPU model, CPUs, device, threads
and framework versions.

`Ceilings` is the record annotator every timed run uses: it runs the GEMM peak's annotator
(device_peak.roofline_for), then gives each timed ok row the ceilings it was held against
(`ceilings`) and its binding ceiling (`binding`, rnnbench.machine.binding).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnbench import record, registry
from rnnbench.machine import bandwidth, binding, environments
from rnnbench.machine.caches import cache_root
from rnnbench.machine.ceiling_cache import cached_ceilings
from rnnbench.machine.cpus import MIN_OTHERS_WALL_S, allowed_cpus, choose_cpus, cpu_clock, pin_process
from rnnbench.machine.dispatch_floor import FLOOR_METHOD, measure_floors
from rnnbench.machine.roofline import PeaksByDtype, in_worker, peak_key, serve

ORDER = (*bandwidth.LEVELS, "HBM")


def cache_path() -> Path:
    """$XDG_CACHE_HOME/rnnbench/ceilings.json (default ~/.cache/rnnbench/ceilings.json)."""
    return cache_root() / "ceilings.json"


def measure(request: dict[str, Any]) -> dict[str, Any]:
    """In this process (the measuring one): the ceilings of request["device"], pinned to
    request["cpus"] (the rows' CPUs) before any framework is imported; the bandwidth's threads pin
    themselves to request["cpus_all"]. others_on_cpus: other work on the machine meanwhile, in CPUs."""
    pin_process(request["cpus"])
    before = cpu_clock()
    device = request["device"]
    if device == "cpu":
        out = bandwidth.measure_levels(request["cpus_all"])
        out["errors"] = {}
    else:
        out = bandwidth.measure_device(list(registry.frameworks().values()), device)
    floors = measure_floors(device)
    out["dispatch_us"] = floors["dispatch_us"]
    out["errors"] = {**out.get("errors", {}), **floors["errors"]}
    after = cpu_clock()
    wall = after.wall_s - before.wall_s
    if before.machine_busy_s is not None and after.machine_busy_s is not None and wall >= MIN_OTHERS_WALL_S:
        others = (after.machine_busy_s - before.machine_busy_s) - (after.cpu_s - before.cpu_s)
        out["others_on_cpus"] = max(0.0, others) / wall
    return out


def ceilings_for(device: str, threads: int, *, python: str | None = None, timeout_s: float = 900.0) -> dict[str, Any]:
    """The record's `ceilings` for rows on `device` at `threads` (measured once, then cached)."""
    cpus = choose_cpus(threads)
    cpus_all = [*cpus, *(c for c in choose_cpus(len(allowed_cpus())) if c not in cpus)]
    request = {"device": device, "threads": threads, "cpus": cpus, "cpus_all": cpus_all}
    machine = record.machine()
    key = peak_key(
        hostname=machine["hostname"] if device == "cpu" else socket.gethostname(),
        cpu=machine["cpu"],
        affinity_size=len(cpus_all),
        device=device,
        threads=threads,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )

    def measured() -> dict[str, Any]:
        env = environments.thread_env(threads) if device == "cpu" else {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        python_ = python or environments.get("main").python
        return in_worker(
            "rnnbench.machine.ceilings", request, python=python_, timeout_s=timeout_s, env=env, what="ceilings"
        )

    return summary(cached_ceilings(cache_path(), key, measured), threads=threads, cache=str(cache_path()))


def summary(entry: dict[str, Any], *, threads: int, cache: str = "") -> dict[str, Any]:
    """The record's `ceilings` from a cache entry: the bandwidth of each level at the rows' threads
    ("1", or "all": one thread per CPU given), the levels' and buffers' bytes, the dispatch floors,
    when and under what load they were measured, and how."""
    column = "1" if threads == 1 else "all"
    rates = entry["bandwidth_gbs"]
    return {
        "bandwidth_gbs": {  # smallest level first (the cache file keeps its keys sorted by name)
            lvl: round(rates[lvl].get(column, rates[lvl].get("1", 0.0)), 3)
            for lvl in sorted(rates, key=lambda lvl: ORDER.index(lvl) if lvl in ORDER else len(ORDER))
        },
        "threads": column,
        "levels": dict(entry["levels"]),
        "buffers": dict(entry["buffers"]),
        "dispatch_us": {k: round(v, 3) for k, v in entry["dispatch_us"].items()},
        "measured": entry.get("measured"),
        "others_on_cpus": entry.get("others_on_cpus"),
        "errors": entry.get("errors", {}),
        "cache": cache,
        "method": {
            "bandwidth": bandwidth.BANDWIDTH_METHOD,
            "device": bandwidth.DEVICE_METHOD,
            "dispatch": FLOOR_METHOD,
        },
    }


@dataclass
class Ceilings:
    """A record annotator (Runner's `annotate`): the GEMM peak's annotator (`roofline`), then, for a
    timed ok row, the machine's ceilings (measured on first need; a failure warns once and leaves
    the rows with the GEMM bound alone) and its binding ceiling."""

    roofline: PeaksByDtype
    device: str
    threads: int
    measure_ceilings: Callable[..., dict[str, Any]] = ceilings_for  # tests measure through a fake
    value: dict[str, Any] | None = None
    tried: bool = False

    def ceilings(self, warn: Callable[[str], None] = lambda message: None) -> dict[str, Any] | None:
        if not self.tried:
            self.tried = True
            try:
                self.value = self.measure_ceilings(self.device, self.threads)
            except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
                warn(f"rnnbench: no memory or dispatch ceilings ({exc}); rows are bound by the GEMM peak alone")
        return self.value

    def measure(self, warn: Callable[[str], None]) -> None:
        """Measure (or read) every ceiling now, in the parent, so failures are said there."""
        self.roofline.measure(warn)
        self.ceilings(warn)

    def __call__(self, rec: dict[str, Any]) -> dict[str, Any]:
        rec = self.roofline(rec)
        if rec.get("status") != "ok" or not rec.get(binding.QUANTITY):
            return rec
        found = self.ceilings()
        if found:
            rec["ceilings"] = found
        bound = binding.binding(rec)
        if bound:
            rec["binding"] = bound
        return rec


if __name__ == "__main__":  # `python -m rnnbench.machine.ceilings REQUEST_JSON`: the ceilings as JSON
    serve(measure, "rnnbench.machine.ceilings")
