"""The roofline's peak is a ceiling: the best GEMM among the frameworks present, at the rows' dtype
and threads, measured in a process pinned like the rows (the rows' own GEMM shapes included) and
cached per machine. Every `run` row that was timed gets GFLOP/s and its fraction of that peak, and
no ok row exceeds it (a property of the peak measurement, not a speed claim)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rnnbench import results_file
from rnnbench.machine import peak_cache, roofline


def rnnbench(*args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, **env},
    )


def test_no_timed_run_row_exceeds_the_peak(tmp_path: Path) -> None:
    """A small run at sizes where torch.nn.LSTM and XLA reach a large part of a core's GEMM rate
    (nn.LSTM once showed 116 % of a torch.matmul-only peak), with a fresh cache: the peak is measured."""
    pytest.importorskip("jax")
    out = tmp_path / "r.jsonl"
    proc = rnnbench(
        "run",
        "--models",
        "lstm,rnn",
        "--drivers",
        "torch_nn_lstm,torch_nn_rnn,jax_lax_scan,flax_lstm_cell,torch_loop",
        "--environments",
        "main",
        "--sizes",
        "T=16,B=32,I=128,H=256",
        "--threads",
        "1",
        "--budget",
        "0.2",
        "--out",
        str(out),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = results_file.load([out])
    ok = [r for r in records if r["status"] == "ok"]
    assert len(ok) >= 6, [(r["driver"], r["status"]) for r in records]
    for r in ok:
        peak = r["gemm_peak"]
        assert peak["dtype"] == "float32" and peak["threads"] == 1 and peak["framework"] in roofline.peak_frameworks()
        assert peak["cpus"] == r["cpu"]["affinity"]  # measured on the rows' own CPUs
        for quantity in ("fwd_bwd", "fwd"):
            roof = r["roofline"][quantity]
            assert 0 < roof["fraction_of_peak"] <= 1.0, (r["driver"], r["model"], quantity, roof, peak["gflops"])
    # the rows' own recurrent GEMM (B x H @ H x 4H) was among the shapes measured
    cache = json.loads((tmp_path / "cache" / "rnnbench" / "gemm_peak.json").read_text())
    (entry,) = cache["entries"].values()
    assert "32x256x1024" in entry["by_framework"]["torch"] and entry["measured"]
    assert "% peak" in proc.stdout


def _fake_measurement(calls: list, others: list | None = None) -> object:
    def measure(request: dict, python: str, timeout_s: float) -> dict:
        request = json.loads(json.dumps(request))  # as the worker gets it
        calls.append(request)
        rates = {"x".join(map(str, s)): 10.0 + s[0] / 1000 + len(calls) for s in request["shapes"]}
        return {
            "by_framework": {"torch": rates, "numpy": {k: v / 2 for k, v in rates.items()}},
            "errors": {},
            "others_on_cpus": others.pop(0) if others else 0.0,
        }

    return measure


def test_the_peak_is_cached_per_machine_and_measures_only_new_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(roofline, "_measure_in_worker", _fake_measurement(calls))
    first = roofline.peak_for("float32", 1, sizes=[{"T": 4, "B": 2, "I": 3, "H": 5}], cpus=[0])
    assert len(calls) == 1 and [2, 5, 20] in calls[0]["shapes"] and [2048, 2048, 2048] in calls[0]["shapes"]
    assert (
        first["framework"] == "torch"
        and first["shape"] == "2048x2048x2048"
        and first["gflops"] == pytest.approx(13.048)
    )
    again = roofline.peak_for("float32", 1, sizes=[{"T": 4, "B": 2, "I": 3, "H": 5}], cpus=[0])
    assert len(calls) == 1 and again["gflops"] == first["gflops"]  # nothing new: nothing measured
    roofline.peak_for("float32", 1, sizes=[{"B": 7, "H": 5}], cpus=[0])
    assert len(calls) == 2 and sorted(map(tuple, calls[1]["shapes"])) == [(7, 5, 5), (7, 5, 20)]
    roofline.peak_for("float64", 1, sizes=[], cpus=[0])  # another dtype: its own entry
    assert len(calls) == 3
    # stale: an entry older than PEAK_MAX_AGE_DAYS is measured again, every shape (resealed: only its age is off)
    path = roofline.peak_cache_path()
    cache = json.loads(path.read_text())
    for key_text, entry in cache["entries"].items():
        entry["measured_epoch"] -= (peak_cache.PEAK_MAX_AGE_DAYS + 1) * 86400
        peak_cache.sealed(key_text, entry)
    path.write_text(json.dumps(cache))
    roofline.peak_for("float32", 1, sizes=[{"B": 7, "H": 5}], cpus=[0])
    assert len(calls) == 4 and len(calls[3]["shapes"]) == len(roofline.PEAK_SQUARE) + 2


def test_with_roofline() -> None:
    peak = {"gflops": 100.0, "threads": 1, "dtype": "float32"}
    ok = {
        "status": "ok",
        "flops": {"fwd": 1e6, "fwd_bwd": 3e6},
        "fwd": {"median_ms": 0.1},
        "fwd_bwd": {"median_ms": 0.1},
    }
    roofline.with_roofline(ok, peak)
    assert ok["gemm_peak"] == peak
    assert ok["roofline"]["fwd"]["gflops"] == pytest.approx(10.0)
    assert ok["roofline"]["fwd_bwd"]["fraction_of_peak"] == pytest.approx(0.3)
    failed = roofline.with_roofline({"status": "grad_mismatch", "flops": {"fwd": 1e6}}, peak)
    assert "roofline" not in failed
    assert roofline.with_roofline({"status": "ok"}, None) == {"status": "ok"}


def test_gemm_shapes_include_the_rows_own() -> None:
    shapes = roofline.gemm_shapes([{"T": 16, "B": 4, "I": 8, "H": 16}, {"K": 5, "n": 12}])
    assert {(4, 16, 64), (4, 16, 16), (4, 8, 64), (64, 8, 64), (12, 12, 12), (2048, 2048, 2048)} <= set(shapes)


def test_a_peak_measured_under_contention_is_measured_again_until_calm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(roofline, "_measure_in_worker", _fake_measurement(calls, others=[0.6, 0.05]))
    sizes = [{"B": 2, "H": 3}]
    first = roofline.peak_for("float32", 2, sizes=sizes, cpus=[0, 1])
    assert first["others_on_cpus"] == 0.6
    second = roofline.peak_for("float32", 2, sizes=sizes, cpus=[0, 1])  # contended before: every shape again
    assert len(calls) == 2 and len(calls[1]["shapes"]) == len(calls[0]["shapes"])
    assert second["gflops"] > first["gflops"] and second["others_on_cpus"] == 0.05  # the best rate is kept
    roofline.peak_for("float32", 2, sizes=sizes, cpus=[0, 1])  # calm now: nothing measured
    assert len(calls) == 2


def test_a_run_never_waits_on_another_process_measuring_the_peak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(roofline, "_measure_in_worker", _fake_measurement(calls))
    path = roofline.peak_cache_path()
    path.parent.mkdir(parents=True)
    holder = subprocess.Popen(  # another process holds the lock, as while it measures
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(60)",
            str(path) + ".lock",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match="measuring"):  # nothing cached yet: no peak, and no wait
            roofline.peak_for("float32", 1, sizes=[], cpus=[0])
        assert calls == []
        holder.kill()
        holder.wait()
        measured = roofline.peak_for("float32", 1, sizes=[{"B": 2, "H": 3}], cpus=[0])
        holder = subprocess.Popen(holder.args, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        started = time.perf_counter()
        # the cached entry as it stands, its shapes and the load it was measured under included
        cached = roofline.peak_for("float32", 1, sizes=[{"B": 9, "H": 9}], cpus=[0])
        assert len(calls) == 1 and cached == measured and time.perf_counter() - started < 5
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1"])
def test_one_chooser_gives_each_device_its_peak(device: str) -> None:
    """device_peak.roofline_for is the one choice between the CPU's GEMM peak and an accelerator's,
    and no module outside rnnbench.machine builds either annotator itself."""
    from rnnbench.machine import device_peak

    sizes = {"float32": [{"T": 4, "B": 2, "I": 3, "H": 5}]}
    chosen = device_peak.roofline_for(device, 3, sizes)
    if device == "cpu":
        assert type(chosen) is roofline.Roofline and (chosen.threads, chosen.sizes) == (3, sizes)
    else:
        assert type(chosen) is device_peak.DeviceRoofline and (chosen.device, chosen.sizes) == (device, sizes)
    src = Path(roofline.__file__).parents[1]
    built = [
        f"{path.relative_to(src)}:{n}"
        for path in sorted(src.rglob("*.py"))
        if path.parent.name != "machine"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "Roofline(" in line
    ]
    assert not built, built
