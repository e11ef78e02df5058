"""The GPU's GEMM peak, measured as the CPU's is (a fresh process; rnnbench.machine.peak_cache: the
cache, verified on read, and its lock) and cached per device, and the record annotator that gives every CUDA row
its accelerator identity and its fraction of that peak.

The peak is the best rate of any framework present (Framework.device.gemm: float32 with TF32 off,
as the rows run; bfloat16 on the tensor cores) over the square sizes of roofline.PEAK_SQUARE and
accelerator.GPU_SQUARES and the rows' own GEMM shapes, measured in a fresh process (`python -m
rnnbench.machine.device_peak REQUEST`), so the parent holds no GPU context while rows run. Cached in
cache_root()/gpu_peak.json under hostname, device, the visible-devices setting, dtype and
framework versions. roofline_for chooses between this annotator and the CPU's, for every caller."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnbench import registry
from rnnbench.machine import accelerator, environments
from rnnbench.machine.caches import cache_root
from rnnbench.machine.peak_cache import cached_entries, cached_peak
from rnnbench.machine.roofline import (
    PEAK_SQUARE,
    PeaksByDtype,
    Roofline,
    gemm_shapes,
    in_worker,
    measure_rates,
    peak_key,
    peak_summary,
    serve,
    with_roofline,
)


def device_shapes(sizes: Iterable[Mapping[str, int]] = ()) -> list[tuple[int, int, int]]:
    """roofline.gemm_shapes(sizes) and the large squares a GPU needs to reach its rate."""
    return sorted(set(gemm_shapes(sizes)) | {(n, n, n) for n in accelerator.GPU_SQUARES})


def _frameworks(frameworks: Iterable[Any] | None = None) -> list[Any]:
    """The frameworks whose GEMMs are measured: each distinct device GEMM once (flax's is jax's)."""
    out, seen = [], set()
    for fw in frameworks if frameworks is not None else registry.frameworks().values():
        if id(fw.device.gemm) not in seen:
            seen.add(id(fw.device.gemm))
            out.append(fw)
    return out


def measure(
    dtype: str, device: str, shapes: Sequence[Sequence[int]], frameworks: Iterable[Any] | None = None
) -> dict[str, Any]:
    """In this process: roofline.measure_rates of each framework's device GEMM, and the device's
    identity as the frameworks that can run on it report it (under "accelerator")."""
    fws = _frameworks(frameworks)
    why = {fw.name: fw.available() or fw.device_missing(device) for fw in fws}
    gemms = [
        (fw.name, lambda name=fw.name: why[name], lambda m, k, n, gemm=fw.device.gemm: gemm(dtype, m, k, n, device))
        for fw in fws
    ]
    out = measure_rates(gemms, shapes, f"no {dtype} GEMM on {device}")
    out["accelerator"] = accelerator.identity([fw for fw in fws if not why[fw.name]], device)
    return out


def cache_path() -> Path:
    return cache_root() / "gpu_peak.json"


def peak_for(
    dtype: str,
    device: str,
    *,
    sizes: Iterable[Mapping[str, int]] = (),
    python: str | None = None,
    timeout_s: float = 900.0,
) -> dict[str, Any]:
    """The device's GEMM peak at `dtype` (the record's `gemm_peak`), cached (see the module)."""

    def measured(shapes: list[tuple[int, int, int]]) -> dict[str, Any]:
        request = {"dtype": dtype, "device": device, "shapes": shapes}
        return measure_in_worker(request, python or environments.get("main").python, timeout_s)

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    key = peak_key(hostname=socket.gethostname(), device=device, dtype=dtype, visible_devices=visible)
    entry = cached_peak(cache_path(), key, device_shapes(sizes), measured)
    return summary(entry, dtype, device, str(cache_path()))


def summary(entry: Mapping[str, Any], dtype: str, device: str, cache: str = "") -> dict[str, Any]:
    """The record's gemm_peak from a measured entry (roofline.peak_summary), with the accelerator's label."""
    identity = {"dtype": dtype, "device": device, "accelerator": accelerator.label(entry.get("accelerator") or {})}
    squares = (*PEAK_SQUARE, *accelerator.GPU_SQUARES)
    return peak_summary(entry, squares, "GPU GEMM", identity=identity, cache=cache, method=accelerator.PEAK_METHOD)


def measure_in_worker(request: dict[str, Any], python: str, timeout_s: float) -> dict[str, Any]:
    """measure() in a fresh `python` process; jax there allocates as it needs, not 75 % up front."""
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    return in_worker(
        "rnnbench.machine.device_peak", request, python=python, timeout_s=timeout_s, env=env, what="GPU GEMM"
    )


@dataclass
class DeviceRoofline(PeaksByDtype):
    """A record annotator (Runner's `annotate`) for CUDA runs: every record on a non-CPU device gets
    machine.accelerator (records the parent writes itself, a timeout's or an unavailable row's,
    take it from the peak measurement's process) and, for a timed dtype, the GPU's GEMM peak and
    the row's fraction of it (roofline.with_roofline)."""

    device: str
    sizes: dict[str, list[dict[str, int]]]  # dtype -> the sizes of its timed rows (their GEMM shapes)
    peaks: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)
    identity: dict[str, Any] | None = None
    measure_peak: Callable[..., dict[str, Any]] = peak_for  # tests measure through a fake device layer
    what = "GPU GEMM"

    def measured(self, dtype: str) -> dict[str, Any]:
        return self.measure_peak(dtype, self.device, sizes=self.sizes.get(dtype, []))

    def accelerator(self) -> dict[str, Any]:
        if self.identity is None:
            self.identity = _cached_identity(self.device)
        if self.identity is None:
            request = {"dtype": "float32", "device": self.device, "shapes": []}
            try:
                self.identity = measure_in_worker(request, environments.get("main").python, 300.0)["accelerator"]
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                self.identity = {"error": f"the device's identity could not be read: {exc}"[:300]}
        return self.identity

    def __call__(self, rec: dict[str, Any]) -> dict[str, Any]:
        if rec.get("device", "cpu") == "cpu":
            return rec
        machine = rec.setdefault("machine", {})
        if not machine.get("accelerator") and self.accelerator():
            machine["accelerator"] = self.accelerator()
        if rec.get("dtype") not in self.sizes:
            return rec
        return with_roofline(rec, self.peak(rec["dtype"]))


def roofline_for(device: str, threads: int, sizes: dict[str, list[dict[str, int]]]) -> PeaksByDtype:
    """The record annotator (Runner's `annotate`) for rows on `device`, every caller's one choice:
    the CPU's GEMM peak at `threads` CPUs (roofline.Roofline) on "cpu", else the accelerator's
    (DeviceRoofline). sizes: dtype -> the sizes of its timed rows (their GEMM shapes)."""
    return Roofline(threads, sizes) if device == "cpu" else DeviceRoofline(device, sizes)


def _cached_identity(device: str) -> dict[str, Any] | None:
    """The identity the newest cached peak of `device` on this host recorded, if any."""
    found = [
        e
        for e in cached_entries(cache_path()).values()
        if isinstance(e, dict)
        and "accelerator" in e
        and e.get("key", {}).get("hostname") == socket.gethostname()
        and e.get("key", {}).get("device") == device
        and e.get("key", {}).get("visible_devices") == os.environ.get("CUDA_VISIBLE_DEVICES")
    ]
    return max(found, key=lambda e: e.get("measured_epoch", 0))["accelerator"] if found else None


if __name__ == "__main__":  # `python -m rnnbench.machine.device_peak REQUEST_JSON`: GEMM rates + identity as JSON
    serve(lambda r: measure(r["dtype"], r["device"], [tuple(s) for s in r["shapes"]]), "rnnbench.machine.device_peak")
