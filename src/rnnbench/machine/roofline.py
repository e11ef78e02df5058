"""Roofline: a machine's best GEMM rate, and each timed row's GFLOP/s as a fraction of it.

One measurement for every device (`cached_peak`): the rates of each framework present over square
sizes and the rows' own GEMM shapes (`measure_rates`), taken in a fresh process (`in_worker`, which
`serve` answers), cached in a file under cache_root() per key (rnnbench.machine.peak_cache: verified
on every read, under the file's lock so that two runs never time GEMMs on the same hardware at
once). This module measures the CPU (`peak_for`: the best GEMM among the frameworks' `gemm` and
numpy's at a dtype and thread count, in a process pinned like the rows);
rnnbench.machine.device_peak measures a GPU the same way. `with_roofline` turns a model's analytic
FLOP count and a median time into GFLOP/s and a fraction of the peak, for every timed row of `run`
and `sweep`; `Roofline` and device_peak.DeviceRoofline annotate records with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rnnbench import record, registry
from rnnbench.machine import environments
from rnnbench.machine.caches import cache_root
from rnnbench.machine.cpus import MIN_OTHERS_WALL_S, choose_cpus, cpu_clock, pin_process
from rnnbench.machine.peak_cache import cached_peak, shape_name
from rnnbench.processes import descendants

PEAK_SQUARE = (256, 512, 1024, 2048)  # square GEMMs always measured
PEAK_METHOD = (
    "best GEMM among torch.matmul, jax.jit(jnp.matmul), numpy @ present, at the row's dtype, in a process "
    "pinned to as many CPUs as the rows' threads: square n = 256..2048 and the rows' own GEMM shapes, "
    "2mkn / fastest call (2 warm-ups, then at least 10 calls and 0.3 s), max over shapes and frameworks"
)
# A GEMM of one shape: (m, k, n) -> a callable computing an (m, k) @ (k, n) product at the measured
# dtype to completion, or None where the library has no such dtype.
GemmOf = Callable[[int, int, int], Callable[[], Any] | None]
# Framework.gemm's signature: (a, b: float64 numpy (m, k) and (k, n), dtype) -> as GemmOf's callable.
Gemm = Callable[[Any, Any, str], Callable[[], Any] | None]


def gemm_shapes(sizes: Iterable[Mapping[str, int]] = ()) -> list[tuple[int, int, int]]:
    """(m, k, n) shapes to measure: the squares of PEAK_SQUARE and, for each row's sizes, the GEMMs
    the recurrent models do: B x H @ H x 4H and B x H @ H x H (an LSTM's / Elman cell's recurrent
    matmul), B x I @ I x 4H and B x I @ I x H (its input projection per step), T*B x I @ I x 4H and
    T*B x I @ I x H (hoisted over the sequence), n x n @ n x n."""
    shapes = {(n, n, n) for n in PEAK_SQUARE}
    for s in sizes:
        B, H, I, T, n = (s.get(k) for k in ("B", "H", "I", "T", "n"))
        if B and H:
            shapes |= {(B, H, 4 * H), (B, H, H)}
            if I:
                shapes |= {(B, I, 4 * H), (B, I, H)}
                if T:
                    shapes |= {(T * B, I, 4 * H), (T * B, I, H)}
        if n:
            shapes.add((n, n, n))
    return sorted(shapes)


def best_gflops(
    fn: Callable[[], Any], flops: float, *, min_repeats: int = 10, budget_s: float = 0.3, max_repeats: int = 500
) -> float:
    """flops / the fastest of at least min_repeats calls (and budget_s seconds), after 2 warm-ups:
    on a shared machine the fastest call is the one least disturbed."""
    fn()
    fn()
    best, spent, calls = float("inf"), 0.0, 0
    while calls < max_repeats and (calls < min_repeats or spent < budget_s):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
    return flops / max(best, 1e-9) / 1e9


def measure_rates(
    gemms: Iterable[tuple[str, Callable[[], str | None], GemmOf]], shapes: Sequence[Sequence[int]], missing: str
) -> dict[str, Any]:
    """In this process: GFLOP/s of each (name, ready, gemm_of) on each (m, k, n) of `shapes`. ready()
    says why that GEMM cannot run here, or readies it (its threads) and returns None; `missing` is
    the error where gemm_of has no GEMM. Returns {"by_framework": {name: {"mxkxn": gflops}},
    "errors": {name: why it has no numbers}}: one library failing leaves the others' numbers."""
    out: dict[str, Any] = {"by_framework": {}, "errors": {}}
    for name, ready, gemm_of in gemms:
        try:
            why = ready()
            if why:
                out["errors"][name] = why
                continue
            rates = {}
            for m, k, n in shapes:
                fn = gemm_of(int(m), int(k), int(n))
                if fn is None:
                    raise TypeError(missing)
                rates[shape_name((m, k, n))] = best_gflops(fn, 2.0 * m * k * n)
            if rates:
                out["by_framework"][name] = rates
        except Exception as exc:  # one library failing leaves the others' numbers
            out["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def in_worker(
    module: str, request: Mapping[str, Any], *, python: str, timeout_s: float, env: Mapping[str, str], what: str
) -> dict[str, Any]:
    """`python -m <module> REQUEST_JSON` (its `serve`) with `env` added to this process's environment:
    the measurement's answer."""
    proc = subprocess.run(
        descendants.dies_with_me([python, "-m", module, json.dumps(request)]),  # not a busy orphan after a SIGKILL
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout_s,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{what} peak measurement failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def serve(measure: Callable[[dict[str, Any]], dict[str, Any]], module: str) -> None:
    """The measuring process's main (`python -m <module> REQUEST_JSON`): measure(request) as one JSON line."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: python -m {module} REQUEST_JSON")
    print(json.dumps(measure(json.loads(sys.argv[1]))))


def peak_summary(
    entry: Mapping[str, Any],
    squares: Iterable[int],
    what: str,
    *,
    identity: Mapping[str, Any],
    cache: Path | str,
    method: str,
) -> dict[str, Any]:
    """The record's gemm_peak from a measured entry: the best rate over frameworks and shapes (and
    where), what it was measured on (`identity`), the best rate per shape (the squares, and the
    shapes within half the best), per framework, and how it was measured."""
    best, by_size = (0.0, "", ""), {}
    for framework, rates in entry["by_framework"].items():
        for shape, rate in rates.items():
            by_size[shape] = max(rate, by_size.get(shape, 0.0))
            best = max(best, (rate, framework, shape))
    if best[0] <= 0:
        raise RuntimeError(f"{what} peak measurement found no framework: {entry.get('errors')}")
    names = {f"{n}x{n}x{n}" for n in squares}
    return {
        "gflops": best[0],
        "framework": best[1],
        "shape": best[2],
        **identity,
        "by_size": {s: round(r, 2) for s, r in sorted(by_size.items()) if s in names or r >= 0.5 * best[0]},
        "by_framework_best": {f: round(max(r.values()), 2) for f, r in entry["by_framework"].items() if r},
        "shapes_measured": len(by_size),
        "measured": entry.get("measured"),
        "errors": entry.get("errors", {}),
        "cache": cache,
        "method": method,
    }


# --- the CPU's peak ---------------------------------------------------------------------------------


def _random_pair(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((m, k)), rng.standard_normal((k, n))


def _numpy_gemm(a, b, dtype: str) -> Callable[[], Any] | None:
    if dtype not in ("float32", "float64"):
        return None  # numpy has no bfloat16
    a, b = a.astype(dtype), b.astype(dtype)
    return lambda: a @ b


def peak_gemms() -> list[tuple[str, str, Gemm, Callable[[int], None]]]:
    """(name recorded as gemm_peak.framework, module that must be importable, its GEMM, how to set
    its threads): every registered framework that has a `gemm`, then numpy."""
    out: list[tuple[str, str, Gemm, Callable[[int], None]]] = [
        (f.name, f.module, f.gemm, f.set_threads) for f in registry.frameworks().values() if f.gemm is not None
    ]
    return out + [("numpy", "numpy", _numpy_gemm, lambda threads: None)]


def peak_frameworks() -> tuple[str, ...]:
    """The names a gemm_peak.framework may have."""
    return tuple(name for name, _, _, _ in peak_gemms())


def measure_gemms(dtype: str, threads: int, shapes: Sequence[Sequence[int]]) -> dict[str, Any]:
    """In this process (pinned already): measure_rates of each library of peak_gemms() present, each
    with its threads set to `threads`."""

    def ready(module: str, set_threads: Callable[[int], None]) -> str | None:
        if importlib.util.find_spec(module) is None:
            return "not installed"
        set_threads(threads)
        return None

    gemms = [
        (name, lambda m=module, t=set_threads: ready(m, t), lambda m, k, n, g=gemm: g(*_random_pair(m, k, n), dtype))
        for name, module, gemm, set_threads in peak_gemms()
    ]
    return measure_rates(gemms, shapes, f"no {dtype} GEMM")


def peak_cache_path() -> Path:
    """$XDG_CACHE_HOME/rnnbench/gemm_peak.json (default ~/.cache/rnnbench/gemm_peak.json)."""
    return cache_root() / "gemm_peak.json"


def peak_packages() -> list[str]:
    """The packages whose versions decide the peak: those of the frameworks with a GEMM, and numpy."""

    return sorted({"numpy", *(p for f in registry.frameworks().values() if f.gemm is not None for p in f.packages)})


def peak_key(**where: Any) -> dict[str, Any]:
    """What a peak is cached under: where it was measured, and the versions of peak_packages()."""
    versions = dict(environments.package_versions("main"))
    return {**where, "versions": {p: versions.get(p, "missing") for p in peak_packages()}}


def peak_for(
    dtype: str,
    threads: int,
    *,
    sizes: Iterable[Mapping[str, int]] = (),
    cpus: Sequence[int] | None = None,
    python: str | None = None,
    timeout_s: float = 900.0,
) -> dict[str, Any]:
    """This machine's GEMM peak at `dtype` and `threads` (the record's `gemm_peak`): the best rate
    of any framework present on any shape of gemm_shapes(sizes), measured in a fresh process
    (`python`, default the main environment's) pinned to `cpus` (default choose_cpus(threads), the
    rows' CPUs) with the rows' thread settings; cached (cached_peak) under hostname, CPU model,
    affinity size, dtype, threads and framework versions."""
    cpus = list(cpus) if cpus is not None else choose_cpus(threads)
    request = {"dtype": dtype, "threads": threads, "cpus": cpus}

    def measure(shapes: list[tuple[int, int, int]]) -> dict[str, Any]:
        return _measure_in_worker({**request, "shapes": shapes}, python or environments.get("main").python, timeout_s)

    machine = record.machine()
    key = peak_key(
        hostname=machine["hostname"], cpu=machine["cpu"], affinity_size=len(cpus), dtype=dtype, threads=threads
    )
    entry = cached_peak(peak_cache_path(), key, gemm_shapes(sizes), measure, cpus=cpus)
    identity = {**request, "others_on_cpus": entry.get("others_on_cpus")}
    return peak_summary(entry, PEAK_SQUARE, "GEMM", identity=identity, cache=str(peak_cache_path()), method=PEAK_METHOD)


def _measure_in_worker(request: dict[str, Any], python: str, timeout_s: float) -> dict[str, Any]:
    """measure_gemms in a fresh `python` process with the rows' thread settings, pinned to
    request["cpus"] before it imports a framework (_peak_main)."""
    env = environments.thread_env(int(request["threads"]))
    return in_worker("rnnbench.machine.roofline", request, python=python, timeout_s=timeout_s, env=env, what="GEMM")


def _peak_main(request: dict[str, Any]) -> dict[str, Any]:
    pin_process(request["cpus"])  # before any framework is imported: its pools see these CPUs only
    before = cpu_clock()
    out = measure_gemms(request["dtype"], int(request["threads"]), [tuple(s) for s in request["shapes"]])
    after = cpu_clock()
    wall = after.wall_s - before.wall_s
    if before.cpus_busy_s is not None and after.cpus_busy_s is not None and wall >= MIN_OTHERS_WALL_S:
        # other work on these CPUs while the GEMMs were timed, in CPUs: peak_for measures again while it is high
        out["others_on_cpus"] = max(0.0, (after.cpus_busy_s - before.cpus_busy_s) - (after.cpu_s - before.cpu_s)) / wall
    return out


# --- records --------------------------------------------------------------------------------------


def roofline(flops: float, median_ms: float, peak_gflops: float) -> dict[str, float]:
    """Achieved GFLOP/s of `flops` done in `median_ms`, and its fraction of the GEMM peak."""
    gflops = flops / (median_ms * 1e-3) / 1e9
    return {"flops": flops, "gflops": gflops, "fraction_of_peak": gflops / peak_gflops}


def with_roofline(rec: dict[str, Any], peak: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attach the GEMM peak (at the row's dtype) and, for an ok row whose model counts its FLOPs,
    GFLOP/s and the fraction of the peak for each timed quantity. Used by `run` and `sweep` alike."""
    if not peak:
        return rec
    rec["gemm_peak"] = dict(peak)
    flops = rec.get("flops")
    if rec.get("status") == "ok" and flops:
        rec["roofline"] = {
            q: roofline(flops[q], rec[q]["median_ms"], peak["gflops"])
            for q in ("fwd", "fwd_bwd")
            if rec.get(q) and flops.get(q)
        }
        # every road computes the derivative call's matmul FLOPs (forward M, then tangents or cotangents 2M:
        # docs/measuring.md#speed-by-road), so each road beside the row is held to fwd_bwd's count
        for road in (rec.get("roads") or {}).values():
            if isinstance(road, dict) and road.get("fwd_bwd") and flops.get("fwd_bwd"):
                road["roofline"] = roofline(flops["fwd_bwd"], road["fwd_bwd"]["median_ms"], peak["gflops"])
    return rec


class PeaksByDtype:
    """A record annotator's peaks: measured (self.measured) on first need, once per host and dtype;
    a failure warns once and leaves the rows without % of peak. measure() beforehand, in the parent,
    reports failures there."""

    sizes: dict[str, list[dict[str, int]]]  # dtype -> the sizes of its timed rows (their GEMM shapes)
    peaks: dict[tuple[str, str], dict[str, Any] | None]  # (hostname, dtype) -> gemm_peak
    what = "GEMM"

    def measured(self, dtype: str) -> dict[str, Any]:
        raise NotImplementedError

    def peak(self, dtype: str, warn: Callable[[str], None] = lambda message: None) -> dict[str, Any] | None:
        key = (socket.gethostname(), dtype)
        if key not in self.peaks:
            try:
                self.peaks[key] = self.measured(dtype)
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                warn(f"rnnbench: no {self.what} peak for {dtype} ({exc}); rows get no % of peak")
                self.peaks[key] = None
        return self.peaks[key]

    def measure(self, warn: Callable[[str], None]) -> None:
        for dtype in sorted(self.sizes):
            self.peak(dtype, warn)


@dataclass
class Roofline(PeaksByDtype):
    """A record annotator (Runner's `annotate`): with_roofline at the GEMM peak of the machine the
    record is annotated on, per dtype (peak_for, cached per machine): on a Ray node the peak is
    that node's, measured on the CPUs claimed there (choose_cpus), never the parent's."""

    threads: int
    sizes: dict[str, list[dict[str, int]]]
    peaks: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)

    def measured(self, dtype: str) -> dict[str, Any]:
        return peak_for(dtype, self.threads, sizes=self.sizes.get(dtype, []))

    def __call__(self, rec: dict[str, Any]) -> dict[str, Any]:
        if rec.get("device", "cpu") != "cpu" or rec.get("dtype") not in self.sizes:
            return rec
        return with_roofline(rec, self.peak(rec["dtype"]))


if __name__ == "__main__":  # `python -m rnnbench.machine.roofline REQUEST_JSON`: GEMM rates as JSON (peak_for)
    serve(_peak_main, "rnnbench.machine.roofline")
