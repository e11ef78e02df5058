"""The CUDA paths, proven without a GPU through a fake device layer (tests/_fake_gpu.py): a CUDA
row's record carries the accelerator's identity, its device memory peak and a % of a measured GPU
peak; CUDA-graph rows exist with stable names; --suite gpu plans cheap rows first and refuses a
machine without a GPU; --compile-budget turns a long first call into a timeout record."""

from __future__ import annotations

import dataclasses
import time

import pytest

import _fake_gpu as fake
from rnnbench import record, registry, results_file
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.machine import accelerator, device_peak
from rnnbench.planning import gpu_suite
from rnnbench.report.labels import machine_of
from rnnbench.report.table import format_table
from rnnbench.rows.row import Job, run_row
from rnnbench.rows.timing import TimingConfig
from rnnbench.status import Status
from rnnbench.suites import GPU

CUDA_GRAPH_ROWS = ("torch_loop_compiled_cudagraphs", "torch_scan_compiled_cudagraphs")
QUICK = TimingConfig(warmup=1, min_repeats=3, max_repeats=5, budget_s=0.05)


def _register(monkeypatch, *drivers: Driver) -> None:
    table = {**registry.drivers(), **{d.name: d for d in drivers}}
    monkeypatch.setattr(registry, "drivers", lambda: table)


def test_a_cuda_row_record_says_what_ran_it(monkeypatch, tmp_path) -> None:
    """The acceptance test: a CUDA row built through the fake layer carries the accelerator's
    identity, the device memory peak of its timed steps (read after a reset), its % of a GPU peak
    measured by the framework layer's device GEMM (<= 100), and the GPU contention mark."""
    pytest.importorskip("torch")
    allocator = fake.patch_torch(monkeypatch)
    fake.patch_smi(monkeypatch, others=True)
    loop = fake.on_fake_device(registry.get_driver("torch_loop"))
    _register(monkeypatch, loop)
    job = Job(model="rnn", driver=loop.name, device="cuda", sizes={"T": 8, "B": 8, "I": 16, "H": 32}, timing=QUICK)
    rec = run_row(job)
    assert rec["status"] == Status.OK, rec.get("report")

    acc = rec["machine"]["accelerator"]
    assert (acc["name"], acc["uuid"], acc["compute_capability"]) == (fake.NAME, fake.UUID, "9.0")
    assert acc["driver_version"] == "580.159.04" and acc["cuda_runtime"] == "13.0" and acc["cudnn_version"] == 91300
    assert acc["total_memory_mb"] == fake.TOTAL // 2**20
    assert set(acc["reported_by"]) == {"nvidia-smi", "fake_cuda_torch"}

    assert allocator.resets >= 1  # reset before the timed steps, read after them
    assert rec["device_memory"]["peak_allocated_mb"] == fake.PEAK_ALLOCATED / 2**20
    assert "since the peak was reset before the timed steps" in rec["device_memory"]["meaning"]
    assert rec["memory"]["peak_rss_mb"] > 0  # host RSS stays as it is

    assert rec["gpu_contention"]["other_processes"] == [{"pid": fake.OTHER_PID, "used_mb": 500}]
    assert rec["gpu_contention"]["parent_used_mb"] == 500  # what the parent holds is said, not counted
    assert "gpu_shared" in rec["cpu"]["notes"] and "host_notes" in rec["cpu"]

    # the fake device computes on this CPU: squares whose GEMM rate is far above the small row's (its fraction
    # below 1 under load; 64 and 128 squares once measured a peak below the row's rate)
    shapes = [(256, 256, 256), (512, 512, 512)]

    def measured(dtype, device, sizes):
        return device_peak.summary(device_peak.measure(dtype, device, shapes, [fake.FAKE_TORCH]), dtype, device)

    roof = device_peak.DeviceRoofline("cuda", {"float32": [job.sizes]}, measure_peak=measured)
    rec = roof(rec)
    results_file.dumps(rec)  # plain JSON
    assert rec["gemm_peak"]["device"] == "cuda" and rec["gemm_peak"]["framework"] == "fake_cuda_torch"
    assert rec["gemm_peak"]["accelerator"] == f"{fake.NAME} 5e1f0a2b"
    for quantity in ("fwd", "fwd_bwd"):
        assert 0 < rec["roofline"][quantity]["fraction_of_peak"] <= 1.0, rec["roofline"]
    assert record.problem(rec) is None


def test_cuda_graph_rows_have_stable_names_and_say_why_not_on_a_cpu() -> None:
    drivers = registry.drivers()
    for name in CUDA_GRAPH_ROWS:
        d = drivers[name]
        assert d.compiled and d.devices == ("cuda",) and "reduce-overhead" in d.summary
        assert d.why_not(registry.get_model("lstm"), "float32", "cpu") == f"device cpu not supported by {name}"
    assert set(CUDA_GRAPH_ROWS) <= set(GPU.drivers)


def test_a_cuda_graph_row_compiles_in_reduce_overhead_mode(monkeypatch) -> None:
    """The CUDA-graph configuration's own path (mode, cudagraph steps) through the fake device; on
    CPU tensors inductor runs the program without graphs, so the gradients are still checked."""
    pytest.importorskip("torch")
    fake.patch_torch(monkeypatch)
    fake.patch_smi(monkeypatch, others=False)
    row = fake.on_fake_device(registry.get_driver("torch_loop_compiled_cudagraphs"))
    _register(monkeypatch, row)
    rec = run_row(Job(model="decay", driver=row.name, device="cuda", sizes={"T": 3}, time=False))
    assert rec["status"] == Status.OK, rec.get("report")
    assert rec["environment"]["settings"]["mode"] == "reduce-overhead"
    assert rec["machine"]["accelerator"]["name"] == fake.NAME
    assert "gpu_contention" not in rec  # untimed: no contention to judge


def test_jax_reports_its_device_kind_and_the_compiled_steps_memory(monkeypatch) -> None:
    pytest.importorskip("jax")
    from rnnbench.drivers.jax import _framework as _jax

    model = registry.get_model("rnn")
    case = model.make_case(model.sizes_with_defaults(), 0)
    prepared = registry.get_driver("jax_lax_scan").prepare(model, case, "float32", "cpu")
    monkeypatch.setattr(_jax, "device_for", lambda device: fake.FakeJaxDevice())
    ident = _jax.gpu_identity("cuda")
    assert ident["jax_device_kind"] == fake.FakeJaxDevice.device_kind and ident["compute_capability"] == "9.0"
    peak = _jax.read_gpu_peak("cuda", prepared)
    assert peak["peak_allocated_mb"] == 2 * fake.PEAK_ALLOCATED / 2**20
    assert peak["compiled"]["argument_size_in_bytes"] > 0  # XLA's own plan of the fwd+bwd program
    assert "not resettable" in peak["meaning"]


def test_two_gpus_are_two_machines() -> None:
    base = {"model": "lstm", "driver": "torch_nn_lstm", "dtype": "float32", "status": "ok", "device": "cuda"}
    one = {**base, "machine": {"hostname": "h", "accelerator": {"name": "A", "uuid": "GPU-11111111-x"}}}
    two = {**base, "machine": {"hostname": "h", "accelerator": {"name": "A", "uuid": "GPU-22222222-x"}}}
    cpu = {**base, "device": "cpu", "machine": {"hostname": "h"}}
    assert len({machine_of(r) for r in (one, two, cpu)}) == 3
    assert machine_of(one) == "h [A 11111111]" and machine_of(cpu) == "h"
    table = format_table([one, two])
    assert "h [A 11111111]" in table and "h [A 22222222]" in table


def test_a_gpu_row_is_contended_by_another_gpu_process_or_a_starved_launch_thread() -> None:
    calm = {
        "affinity": list(range(16)),
        "machine_cpus": 16,
        "threads": 16,
        "others_on_cpus": 0.3,
        "others_on_machine": 0.3,
        "load_start": [0.3, 0.3, 0.3],
        "load_end": [0.3, 0.3, 0.3],
        "notes": ["load", "contended"],
    }
    rec = accelerator.gpu_cpu_record(calm, shared=False)
    assert rec["notes"] == [] and rec["host_notes"] == ["load", "contended"]  # the H100 run's false alarm
    assert accelerator.gpu_cpu_record(calm, shared=True)["notes"] == ["gpu_shared"]
    assert "launch_starved" in accelerator.gpu_cpu_record({**calm, "others_on_cpus": 15.5}, shared=False)["notes"]
    busy = {**calm, "others_on_machine": 15.5}  # other work measured on the whole machine during the row
    assert "launch_starved" in accelerator.gpu_cpu_record(busy, shared=False)["notes"]
    assert "starved" not in accelerator.load_line(cores=16, load=0.3)
    assert "starved" in accelerator.load_line(cores=16, load=16.0)


def test_vendor_layer_dtypes_are_decided_by_trying_once(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    from rnnbench.drivers.torch import vendor as torch_vendor

    lstm, model = registry.get_driver("torch_nn_lstm"), registry.get_model("lstm")
    assert "bfloat16" not in lstm.dtypes and lstm.try_dtype is not None
    assert lstm.why_not(model, "bfloat16", "cpu") is None  # the parent leaves it to the worker
    torch_vendor.try_dtype.cache_clear()
    calls = []

    class Refusing(torch.nn.LSTM):
        def forward(self, *args):
            calls.append(1)
            raise RuntimeError("no bf16 kernel here")

    monkeypatch.setattr(torch.nn, "LSTM", Refusing)
    why = lstm.why_not(model, "bfloat16", "cpu", trying=True)
    assert why == "torch.nn.LSTM at bfloat16 on cpu failed when tried: RuntimeError: no bf16 kernel here"
    assert lstm.why_not(model, "bfloat16", "cpu", trying=True) == why and len(calls) == 1  # tried once
    torch_vendor.try_dtype.cache_clear()


def test_the_gpu_suite_runs_cheap_rows_first_at_every_size() -> None:
    jobs = [
        Job(model=m, driver=d, dtype=dt, device="cuda", sizes=dict(size), compile_budget_s=GPU.compile_budget)
        for dt in GPU.dtypes
        for m in GPU.models
        for size in GPU.sizes
        for d in GPU.drivers
    ]
    planned = gpu_suite.order(jobs)
    assert len(planned) == len(jobs) == len(GPU.dtypes) * len(GPU.models) * 4 * len(GPU.drivers)
    sizes = {(j.sizes["T"], j.sizes["B"], j.sizes["H"]) for j in planned}
    assert sizes == {(T, 64, H) for T in (256, 1024) for H in (512, 1024)}
    first = gpu_suite.stages(planned)[0]
    assert {(j.model, j.dtype, j.sizes["T"], j.sizes["H"]) for j in first} == {("lstm", "float32", 256, 512)}
    assert [j.driver for j in first] == list(GPU.drivers)  # vendor layers first, unrolled compiles last
    last = planned[-1]
    assert (last.sizes["T"], last.sizes["H"]) == (1024, 1024)
    assert planned == sorted(jobs, key=lambda j: (gpu_suite.stage_key(j), GPU.drivers.index(j.driver)))


def test_run_suite_gpu_without_a_gpu_exits_2_with_one_line(capsys) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from rnnbench.cli import main

    assert main(["run", "--suite", "gpu", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GPU here" in err[0], err
    assert main(["run", "--suite", "gpu", "--device", "cpu"]) == 2
    assert "use --device cuda" in capsys.readouterr().err


def test_a_first_call_past_the_compile_budget_is_a_timeout_record_with_its_elapsed_time(monkeypatch) -> None:
    slow = Driver(
        name="slow_first_call",
        framework=fake.FAKE_TORCH,
        summary="test: a compile that never ends",
        prepare=lambda model, case, dtype, device: Prepared(
            lambda: time.sleep(60), lambda: None, lambda: None, lambda r: None
        ),
    )
    _register(monkeypatch, slow)
    started = time.perf_counter()
    rec = run_row(Job(model="decay", driver=slow.name, compile_budget_s=0.5))
    assert time.perf_counter() - started < 30
    assert rec["status"] == Status.TIMEOUT and 0.5 <= rec["elapsed_s"] < 30
    assert "--compile-budget" in rec["report"] and rec["settings"]["compile_budget_s"] == 0.5
    assert record.problem(rec) is None
    assert (
        dataclasses.replace(Job(model="decay", driver=slow.name), compile_budget_s=None)
        .settings()
        .get("compile_budget_s")
        is None
    )


def test_run_suite_gpu_selects_its_rows_with_its_own_defaults(monkeypatch) -> None:
    from rnnbench.cli import options
    from rnnbench.cli.main import parser
    from rnnbench.planning import plan

    monkeypatch.setattr(gpu_suite, "check_jobs", lambda device, jobs: None)  # as on a GPU machine

    def planned(*flags):
        args = parser().parse_args(["run", "--suite", "gpu", *flags])
        s = options.settings(args)
        return s, plan.jobs(s)

    s, jobs = planned()
    assert (s.device, s.dtypes, s.timeout, s.compile_budget) == ("cuda", ("float32", "bfloat16"), 240.0, 90.0)
    first = jobs[0]
    assert (first.driver, first.model, first.dtype, first.sizes) == (
        "torch_nn_lstm",
        "lstm",
        "float32",
        {"T": 256, "B": 64, "I": 256, "H": 512},
    )
    assert {j.compile_budget_s for j in jobs} == {90.0} and {j.device for j in jobs} == {"cuda"}
    assert set(CUDA_GRAPH_ROWS) <= {j.driver for j in jobs}
    s, jobs = planned("--compile-budget", "30", "--timeout", "100", "--sizes", "T=64", "--dtypes", "float32")
    assert (s.timeout, {j.compile_budget_s for j in jobs}, {j.sizes["T"] for j in jobs}) == (100.0, {30.0}, {64})
