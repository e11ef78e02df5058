"""The GPU's GEMM peak, measured like the CPU one (rnnbench.run.roofline.peak_for) and cached per
device, and the record annotator that gives every CUDA row its accelerator identity and its
fraction of that peak.

The peak is the best rate of any framework present (Framework.device.gemm: float32 with TF32 off,
as the rows run; bfloat16 on the tensor cores) over the square sizes of timing.PEAK_SQUARE and
accelerator.GPU_SQUARES and the rows' own GEMM shapes, measured in a fresh process (`python -m
rnnbench.run.device_peak REQUEST`), so the parent holds no GPU context while rows run. Cached in
cache_root()/gpu_peak.json under hostname, device, the visible-devices setting, dtype and
framework versions; shapes already measured are not measured again; rates of one shape keep
their best (a disturbed measurement is only ever too slow); an entry older than
PEAK_MAX_AGE_DAYS is measured anew."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rnnbench.run import accelerator
from rnnbench.run.caches import cache_root
from rnnbench.run.roofline import (
    PEAK_MAX_AGE_DAYS,
    PEAK_SQUARE,
    best_gflops,
    best_rates,
    gemm_shapes,
    peak_packages,
    with_roofline,
)


def device_shapes(sizes: Iterable[Mapping[str, int]] = ()) -> list[tuple[int, int, int]]:
    """timing.gemm_shapes(sizes) and the large squares a GPU needs to reach its rate."""
    return sorted(set(gemm_shapes(sizes)) | {(n, n, n) for n in accelerator.GPU_SQUARES})


def _name(shape: Sequence[int]) -> str:
    return "x".join(str(int(x)) for x in shape)


def _frameworks(frameworks: Iterable[Any] | None = None) -> list[Any]:
    """The frameworks whose GEMMs are measured: each distinct device GEMM once (flax's is jax's)."""
    from rnnbench import registry

    out, seen = [], set()
    for fw in frameworks if frameworks is not None else registry.frameworks().values():
        if id(fw.device.gemm) not in seen:
            seen.add(id(fw.device.gemm))
            out.append(fw)
    return out


def measure(
    dtype: str, device: str, shapes: Sequence[Sequence[int]], frameworks: Iterable[Any] | None = None
) -> dict[str, Any]:
    """In this process: GFLOP/s of each framework's device GEMM on each shape, and the device's
    identity as those frameworks report it. Returns {"by_framework": {name: {"mxkxn": gflops}},
    "errors": {name: why it has no numbers}, "accelerator": {...}}."""
    out: dict[str, Any] = {"by_framework": {}, "errors": {}}
    usable = []
    for fw in _frameworks(frameworks):
        why = fw.available() or fw.device_missing(device)
        if why:
            out["errors"][fw.name] = why
            continue
        usable.append(fw)
        try:
            rates = {}
            for m, k, n in shapes:
                fn = fw.device.gemm(dtype, int(m), int(k), int(n), device)
                if fn is None:
                    raise TypeError(f"no {dtype} GEMM on {device}")
                rates[_name((m, k, n))] = best_gflops(fn, 2.0 * m * k * n)
            if rates:
                out["by_framework"][fw.name] = rates
        except Exception as exc:  # one framework failing leaves the others' numbers
            out["errors"][fw.name] = f"{type(exc).__name__}: {exc}"[:300]
    out["accelerator"] = accelerator.identity(usable, device)
    return out


def cache_path():
    return cache_root() / "gpu_peak.json"


def _key(dtype: str, device: str) -> dict[str, Any]:
    from rnnbench.run import environments

    versions = dict(environments.package_versions("main"))
    return {
        "hostname": socket.gethostname(),
        "device": device,
        "dtype": dtype,
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "versions": {p: versions.get(p, "missing") for p in peak_packages()},
    }


def peak_for(
    dtype: str,
    device: str,
    sizes: Iterable[Mapping[str, int]] = (),
    python: str | None = None,
    timeout_s: float = 900.0,
) -> dict[str, Any]:
    """The device's GEMM peak at `dtype` (the record's `gemm_peak`), cached (see the module)."""
    from rnnbench.run import environments

    key = _key(dtype, device)
    key_text = json.dumps(key, sort_keys=True)
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entries = json.loads(path.read_text()).get("entries", {})
        except (OSError, ValueError, AttributeError):
            entries = {}
        entry = entries.get(key_text) if isinstance(entries, dict) else None
        if not isinstance(entry, dict) or time.time() - entry.get("measured_epoch", 0) > PEAK_MAX_AGE_DAYS * 86400:
            entry = {"key": key, "by_framework": {}}
        done = set.intersection(*(set(r) for r in entry["by_framework"].values())) if entry["by_framework"] else set()
        missing = [s for s in device_shapes(sizes) if _name(s) not in done]
        if missing:
            got = measure_in_worker(
                {"dtype": dtype, "device": device, "shapes": missing},
                python or environments.get("main").python,
                timeout_s,
            )
            for framework, rates in got["by_framework"].items():
                old = entry["by_framework"].setdefault(framework, {})
                for shape, rate in rates.items():
                    old[shape] = max(rate, old.get(shape, 0.0))
            entry.update(errors=got.get("errors", {}), accelerator=got.get("accelerator", {}))
            entry["measured_epoch"] = entry.get("measured_epoch") or time.time()
            entry["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(entry["measured_epoch"]))
            entries = entries if isinstance(entries, dict) else {}
            entries[key_text] = entry
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True))
            os.replace(tmp, path)
    return summary(entry, dtype, device, str(path))


def summary(entry: Mapping[str, Any], dtype: str, device: str, cache: str = "") -> dict[str, Any]:
    """The record's gemm_peak from a measured entry (the best rate over frameworks and shapes)."""
    best, by_size = best_rates(entry, "GPU GEMM")
    squares = {f"{n}x{n}x{n}" for n in (*PEAK_SQUARE, *accelerator.GPU_SQUARES)}
    return {
        "gflops": best[0],
        "framework": best[1],
        "shape": best[2],
        "dtype": dtype,
        "device": device,
        "accelerator": accelerator.label(entry.get("accelerator") or {}),
        "by_size": {s: round(r, 2) for s, r in sorted(by_size.items()) if s in squares or r >= 0.5 * best[0]},
        "by_framework_best": {f: round(max(r.values()), 2) for f, r in entry["by_framework"].items() if r},
        "shapes_measured": len(by_size),
        "measured": entry.get("measured"),
        "errors": entry.get("errors", {}),
        "cache": cache,
        "method": accelerator.PEAK_METHOD,
    }


def measure_in_worker(request: dict[str, Any], python: str, timeout_s: float) -> dict[str, Any]:
    """measure() in a fresh `python` process; jax there allocates as it needs, not 75 % up front."""
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    proc = subprocess.run(
        [python, "-m", "rnnbench.run.device_peak", json.dumps(request)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"GPU GEMM peak measurement failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@dataclass
class DeviceRoofline:
    """A record annotator (Runner's `annotate`) for CUDA runs: every record on a non-CPU device gets
    machine.accelerator (records the parent writes itself, a timeout's or an unavailable row's,
    take it from the peak measurement's process) and, for a timed dtype, the GPU's GEMM peak and
    the row's fraction of it (timing.with_roofline)."""

    device: str
    sizes: dict[str, list[dict[str, int]]]  # dtype -> the sizes of its timed rows (their GEMM shapes)
    peaks: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    identity: dict[str, Any] | None = None
    measure_peak: Callable[..., dict[str, Any]] = peak_for  # tests measure through a fake device layer

    def peak(self, dtype: str, warn: Callable[[str], None] = lambda message: None) -> dict[str, Any] | None:
        if dtype not in self.peaks:
            try:
                self.peaks[dtype] = self.measure_peak(dtype, self.device, self.sizes.get(dtype, []))
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                warn(f"rnnbench: no GPU GEMM peak for {dtype} ({exc}); rows get no % of peak")
                self.peaks[dtype] = None
        return self.peaks[dtype]

    def accelerator(self) -> dict[str, Any]:
        if self.identity is None:
            entries = _cached_identity(self.device)
            try:
                self.identity = (
                    entries
                    if entries is not None
                    else measure_in_worker(
                        {"dtype": "float32", "device": self.device, "shapes": []}, _main_python(), 300.0
                    )["accelerator"]
                )
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                self.identity = {"error": f"the device's identity could not be read: {exc}"[:300]}
        return self.identity

    def measure(self, warn: Callable[[str], None]) -> None:
        for dtype in sorted(self.sizes):
            self.peak(dtype, warn)

    def __call__(self, rec: dict[str, Any]) -> dict[str, Any]:
        if rec.get("device", "cpu") == "cpu":
            return rec
        machine = rec.setdefault("machine", {})
        if not machine.get("accelerator") and self.accelerator():
            machine["accelerator"] = self.accelerator()
        if rec.get("dtype") not in self.sizes:
            return rec
        return with_roofline(rec, self.peak(rec["dtype"]))


def _main_python() -> str:
    from rnnbench.run import environments

    return environments.get("main").python


def _cached_identity(device: str) -> dict[str, Any] | None:
    """The identity the newest cached peak of `device` on this host recorded, if any."""
    try:
        entries = json.loads(cache_path().read_text()).get("entries", {})
    except (OSError, ValueError, AttributeError):
        return None
    found = [
        e
        for e in entries.values()
        if isinstance(e, dict)
        and "accelerator" in e
        and e.get("key", {}).get("hostname") == socket.gethostname()
        and e.get("key", {}).get("device") == device
        and e.get("key", {}).get("visible_devices") == os.environ.get("CUDA_VISIBLE_DEVICES")
    ]
    return max(found, key=lambda e: e.get("measured_epoch", 0))["accelerator"] if found else None


if __name__ == "__main__":  # `python -m rnnbench.run.device_peak REQUEST_JSON`: GEMM rates + identity as JSON
    if len(sys.argv) == 2:
        request = json.loads(sys.argv[1])
        print(json.dumps(measure(request["dtype"], request["device"], [tuple(s) for s in request["shapes"]])))
    else:
        sys.exit("usage: python -m rnnbench.run.device_peak REQUEST_JSON")
