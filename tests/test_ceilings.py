"""A row's binding ceiling: the machine's ceilings (memory bandwidth per level, the frameworks'
dispatch floors) are cached like the GEMM peak (verified before use, measured again when damaged,
old, or measured under load), each ceiling binds where its bound is the largest, the dispatches a
known step makes are the ones a hand count finds, and the chart of every row against every ceiling
is drawn and read back."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest

import _fake_gpu as fake
from rnnbench.machine import bandwidth, binding, ceiling_cache, ceilings

CEILINGS = {
    "bandwidth_gbs": {"L1": 100.0, "L2": 50.0, "L3": 10.0, "DRAM": 2.0},
    "levels": {"L1": 48 * 2**10, "L2": 2 * 2**20, "L3": 32 * 2**20},
    "dispatch_us": {"torch_eager": 2.0, "torch_compiled": 20.0, "jax_jit": 5.0},
}


def _row(*, flops: float, per_step: int, moved: int, dispatch: dict[str, int], ms: float, **extra) -> dict:
    """A timed ok record with the counts that binding reads (GEMM peak 100 GFLOP/s)."""
    return {
        "status": "ok",
        "model": "rnn",
        "driver": "torch_loop",
        "dtype": "float32",
        "fwd_bwd": {"median_ms": ms},
        "flops": {"fwd_bwd": flops},
        "gemm_peak": {"gflops": 100.0},
        "counts": {"bytes": {"per_step": per_step, "fwd_bwd": moved}, "dispatch": {"fwd_bwd": dispatch}},
        "ceilings": CEILINGS,
        **extra,
    }


def test_each_ceiling_binds_where_its_bound_is_the_largest() -> None:
    """Constructed counts: 1e9 FLOPs at 100 GFLOP/s is 10 ms; 1e8 bytes from L2 (50 GB/s) is 2 ms, from
    DRAM (2 GB/s) 50 ms; 31000 eager ops at 2 µs is 62 ms."""
    gemm = binding.binding(_row(flops=1e9, per_step=10**4, moved=10**8, dispatch={"torch_eager": 10}, ms=20.0))
    assert gemm["fwd_bwd"]["ceiling"] == "gemm" and gemm["fwd_bwd"]["fraction"] == pytest.approx(0.5)
    assert gemm["fwd_bwd"]["label"] == "50 % of GEMM peak"

    l2 = binding.binding(_row(flops=1e8, per_step=10**6, moved=10**8, dispatch={"torch_eager": 10}, ms=2.7027))
    assert (l2["fwd_bwd"]["ceiling"], l2["fwd_bwd"]["level"]) == ("bandwidth", "L2")
    assert l2["fwd_bwd"]["bound_ms"] == pytest.approx(2.0) and l2["fwd_bwd"]["label"] == "74 % of L2 bandwidth"

    dram = binding.binding(_row(flops=1e8, per_step=10**8, moved=10**8, dispatch={"torch_eager": 10}, ms=100.0))
    assert (dram["fwd_bwd"]["level"], dram["fwd_bwd"]["bound_ms"]) == ("DRAM", pytest.approx(50.0))

    ops = {"torch_eager": 30_998, "torch_compiled": 2}  # 61.996 ms + 0.04 ms
    dispatch = binding.binding(_row(flops=1e8, per_step=10**4, moved=10**6, dispatch=ops, ms=200.0))
    assert dispatch["fwd_bwd"]["ceiling"] == "dispatch" and dispatch["fwd_bwd"]["ops"] == 31_000
    assert dispatch["fwd_bwd"]["label"] == "dispatch bound: 31k ops at 2 µs (31 %)"
    assert set(dispatch["fwd_bwd"]["bounds_ms"]) == {"gemm", "bandwidth", "dispatch"}


def test_a_row_without_counts_or_a_floor_is_bound_by_what_it_has() -> None:
    """A dispatch kind without a measured floor prices nothing; a row with no counts is bound by the
    GEMM peak alone; an unfinished row has no binding."""
    rec = _row(flops=1e9, per_step=10**4, moved=10**4, dispatch={"jax_eager": 10**6}, ms=20.0)
    assert set(binding.bounds(rec)) == {"gemm", "bandwidth"}
    assert binding.binding({**rec, "counts": {}, "ceilings": {}})["fwd_bwd"]["ceiling"] == "gemm"
    assert binding.binding({**rec, "status": "wrong_gradient"}) is None
    levels = CEILINGS["levels"]
    assert [binding.level_of(n, levels, CEILINGS["bandwidth_gbs"]) for n in (1, 10**5, 10**7, 10**9)] == [
        "L1",
        "L2",
        "L3",
        "DRAM",
    ]
    assert binding.level_of(10**9, {}, {"HBM": 3000.0}) == "HBM"


def _measure(rates: dict[str, float], floor: float, others: float = 0.0):
    calls = []

    def measure() -> dict:
        calls.append(1)
        return {
            "bandwidth_gbs": {lvl: {"1": r, "all": 2 * r} for lvl, r in rates.items()},
            "dispatch_us": {"torch_eager": floor},
            "levels": {"L1": 49152},
            "buffers": {"L1": 24576, "DRAM": 2**28},
            "errors": {},
            "others_on_cpus": others,
        }

    return measure, calls


def test_the_ceilings_cache_is_verified_before_use(tmp_path: Path, capsys) -> None:
    """Measured once, then read; a hand-edited value (hash mismatch), an implausible one under a
    recomputed hash, or a file cut short is said on stderr and measured again."""
    path, key = tmp_path / "ceilings.json", {"hostname": "h", "threads": 1}
    measure, calls = _measure({"L1": 90.0, "DRAM": 3.0}, 2.5)
    first = ceiling_cache.cached_ceilings(path, key, measure)
    again = ceiling_cache.cached_ceilings(path, key, measure)
    assert len(calls) == 1 and again == first and first["bandwidth_gbs"]["L1"] == {"1": 90.0, "all": 180.0}

    key_text = json.dumps(key, sort_keys=True)
    cache = json.loads(path.read_text())
    cache["entries"][key_text]["bandwidth_gbs"]["L1"]["1"] = 9000.0  # edited: the hash no longer matches
    path.write_text(json.dumps(cache))
    ceiling_cache.cached_ceilings(path, key, measure)
    assert len(calls) == 2 and "content hash mismatch" in capsys.readouterr().err

    cache = json.loads(path.read_text())
    entry = cache["entries"][key_text]
    entry["dispatch_us"]["torch_eager"] = -1.0  # impossible, hash recomputed: still refused
    cache["entries"][key_text] = ceiling_cache.sealed(key_text, entry)
    path.write_text(json.dumps(cache))
    ceiling_cache.cached_ceilings(path, key, measure)
    assert len(calls) == 3 and "implausible dispatch floor" in capsys.readouterr().err

    path.write_text(path.read_text()[:50])  # cut short
    assert ceiling_cache.cached_ceilings(path, key, measure)["dispatch_us"] == {"torch_eager": 2.5}
    assert len(calls) == 4 and "not JSON" in capsys.readouterr().err


def test_ceilings_measured_under_load_are_measured_again_keeping_the_best(tmp_path: Path, monkeypatch) -> None:
    """A contended entry is measured again once RETRY_S has passed (not before), keeping the highest
    bandwidth and the lowest floor; an entry past its age is measured afresh."""
    path, key = tmp_path / "ceilings.json", {"hostname": "h"}
    busy, calls = _measure({"L1": 50.0}, 4.0, others=1.5)
    ceiling_cache.cached_ceilings(path, key, busy)
    ceiling_cache.cached_ceilings(path, key, busy)
    assert len(calls) == 1  # within RETRY_S: read as it is
    now = time.time()
    monkeypatch.setattr(ceiling_cache.time, "time", lambda: now + ceiling_cache.RETRY_S + 1)
    calm, calm_calls = _measure({"L1": 40.0}, 3.0, others=0.0)
    entry = ceiling_cache.cached_ceilings(path, key, calm)
    assert len(calm_calls) == 1
    assert entry["bandwidth_gbs"]["L1"]["1"] == 50.0 and entry["dispatch_us"]["torch_eager"] == 3.0
    assert entry["others_on_cpus"] == 0.0
    monkeypatch.setattr(ceiling_cache.time, "time", lambda: now + 31 * 86400)
    entry = ceiling_cache.cached_ceilings(path, key, calm)
    assert len(calm_calls) == 2 and entry["bandwidth_gbs"]["L1"]["1"] == 40.0  # old: measured afresh


def test_the_dispatches_of_a_known_step_are_its_hand_count() -> None:
    """torch: tanh(x @ w).sum() and its backward for w: forward mm, tanh, sum (3); backward the seed's
    ones_like, SumBackward's expand, TanhBackward's tanh_backward, MmBackward's t and mm, the
    accumulation's detach (6): 9 outer aten ops, none compiled. jax: the same forward as lax ops is 3
    eager equations, and under jit one jit'd call."""
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    from jax import lax

    from rnnbench.drivers.jax._dispatch import dispatch_count as jax_count
    from rnnbench.drivers.torch._dispatch import dispatch_count as torch_count

    x, w = torch.ones(4, 3), torch.ones(3, 5, requires_grad=True)

    def step():
        w.grad = None
        loss = torch.tanh(torch.mm(x, w)).sum()
        loss.backward()
        return loss

    assert torch_count(step, lambda result: None) == {"torch_eager": 9, "torch_compiled": 0}
    a, b = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    forward = lambda a, b: lax.reduce_sum(lax.tanh(lax.dot(a, b)), (0, 1))  # noqa: E731
    assert jax_count(lambda: forward(a, b), lambda result: None) == {"jax_jit": 0, "jax_eager": 3}
    jitted = jax.jit(forward)
    assert jax_count(lambda: jitted(a, b), lambda result: None) == {"jax_jit": 1, "jax_eager": 0}


def test_cache_levels_and_buffers_come_from_the_machine(tmp_path: Path, monkeypatch) -> None:
    """sysfs' data and unified caches (instruction caches left out), each level's buffer within it and
    past the level below; the read kernel measured on small buffers gives a rate per level and thread."""
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "64K"), (2, "Unified", "2048K")]):
        d = tmp_path / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (d / name).write_text(f"{value}\n")
    levels = bandwidth.cache_levels(0, root=tmp_path)
    assert levels == {"L1": 48 * 2**10, "L2": 2 * 2**20}
    buffers = bandwidth.level_buffers(levels, available=2**34)
    assert buffers["L1"] < levels["L1"] < buffers["L2"] < levels["L2"] < buffers["DRAM"]
    monkeypatch.setattr(bandwidth, "READ_PER_CALL", 2**22)
    monkeypatch.setattr(bandwidth, "DRAM_MIN", 2**23)
    monkeypatch.setattr(bandwidth, "level_buffers", lambda levels: {"L1": 2**14, "DRAM": 2**23})
    got = bandwidth.measure_levels([sorted(bandwidth.os.sched_getaffinity(0))[0]], levels)
    assert set(got["bandwidth_gbs"]) == {"L1", "DRAM"}
    assert all(0 < r < ceiling_cache.MAX_GBS for rates in got["bandwidth_gbs"].values() for r in rates.values())


def test_a_gpu_s_memory_bandwidth_through_the_framework_layer(monkeypatch) -> None:
    """The device path: the framework layer's copy (Framework.device.stream) on the fake device,
    which computes on the CPU: HBM's rate is bytes moved / the fastest copy."""
    pytest.importorskip("torch")
    from rnnbench.drivers.torch import _framework as _torch

    fake.patch_torch(monkeypatch)
    copy = lambda nbytes, device: _torch.cuda_stream(nbytes, "cpu")  # noqa: E731
    fw = dataclasses.replace(fake.FAKE_TORCH, device=dataclasses.replace(fake.FAKE_TORCH.device, stream=copy))
    got = bandwidth.measure_device([fw], "cuda", nbytes=2**23)
    assert got["errors"] == {} and got["bandwidth_gbs"]["HBM"]["1"] > 0 and got["buffers"] == {"HBM": 2**22}


def test_the_annotator_gives_a_timed_row_its_ceilings_and_binding() -> None:
    """Ceilings runs the GEMM peak's annotator, then adds the measured ceilings and the binding to
    timed ok rows only; a failed measurement leaves the GEMM bound alone."""

    class Peak:
        def __call__(self, rec: dict) -> dict:
            return {**rec, "gemm_peak": {"gflops": 100.0}}

    row = _row(flops=1e8, per_step=10**4, moved=10**6, dispatch={"torch_eager": 30_000}, ms=200.0)
    del row["ceilings"], row["gemm_peak"]
    annotate = ceilings.Ceilings(Peak(), "cpu", 1, measure_ceilings=lambda device, threads: CEILINGS)  # type: ignore[arg-type]
    rec = annotate(dict(row))
    assert rec["ceilings"] == CEILINGS and rec["binding"]["fwd_bwd"]["ceiling"] == "dispatch"
    assert "binding" not in annotate({**row, "status": "wrong_gradient"})

    def fails(device: str, threads: int) -> dict:
        raise RuntimeError("no")

    warned: list[str] = []
    broken = ceilings.Ceilings(Peak(), "cpu", 1, measure_ceilings=fails)  # type: ignore[arg-type]
    broken.ceilings(warned.append)
    assert broken(dict(row))["binding"]["fwd_bwd"]["ceiling"] == "gemm" and "no memory or dispatch" in warned[0]


def test_the_chart_of_every_row_against_every_ceiling_is_drawn_and_read_back(tmp_path: Path) -> None:
    """Two rows, float32 and bfloat16: their points are FLOP/byte and GFLOP/s from their own
    records, the dispatch ceiling above each, and the PNG holds a drawn figure."""
    pytest.importorskip("matplotlib")
    from PIL import Image

    from rnnbench.report.charts.ceilings import ceilings_chart, points

    rows = []
    for dtype, ms in (("float32", 20.0), ("bfloat16", 10.0)):
        rec = _row(flops=1e9, per_step=10**4, moved=10**8, dispatch={"torch_eager": 1000}, ms=ms, dtype=dtype)
        rec |= {"sizes": {"T": 8}, "machine": {"hostname": "box"}, "gemm_peak": {"gflops": 100.0 * (1 + (ms < 20))}}
        rec["binding"] = binding.binding(rec)
        rows.append(rec)
    ((panel, got),) = points(rows).items()
    assert sorted((p.dtype, p.intensity, round(p.gflops), round(p.dispatch_gflops)) for p in got) == [
        ("bfloat16", 10.0, 100, 500),
        ("float32", 10.0, 50, 500),
    ]
    path = ceilings_chart(rows, tmp_path)
    image = np.asarray(Image.open(path).convert("L"))
    assert path.name == "ceilings.png" and image.shape[0] > 300 and image.min() < 100 < image.max()
