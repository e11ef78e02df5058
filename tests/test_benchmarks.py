"""pytest-benchmark: forward+backward of every driver on the RNN and LSTM, grouped by model.

The benchmarked callable is Prepared.loss_and_grads (forward + backward + canonical gradients
read back), and its *returned* value is judged against the float64 oracle with the one tolerance
policy: a wrong gradient fails the test whatever its speed. extra_info carries what a number needs
to be read later: the rnnbench version (with its commit), the row's framework versions, threads
(set, in use, and the thread environment), the machine (hostname, CPU, cores, platform), the
gradient error, tolerance, compile (first call) seconds and driver settings.

Normal runs pass --benchmark-disable (pyproject addopts): each callable runs once, so these stay
as cheap as a gradient test. Timed:
    .venv/bin/python -m pytest tests/test_benchmarks.py --benchmark-enable --benchmark-json=results/benchmark.json
RNNBENCH_BENCH_PROFILE=1 adds each row's profile (rnnbench.rows.profile) to its extra_info, taken after
the timed rounds: `rnnbench compare` then says where a slower row's time went (docs/ci.md).
--benchmark-histogram=PREFIX also writes one SVG per group (needs pygal and pygaljs,
requirements/dev.txt); test_histogram_and_extra_info runs one benchmark that way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _known_issue_marks import known_issue_marks
from conftest import SLOW, slow_pair
from rnnbench import registry
from rnnbench.modes import ROADS, VJP
from rnnbench.record import machine, rnnbench_version
from rnnbench.rows.checked import NotApplicable, prepare_checked, prepare_road, verify
from rnnbench.rows.profile import profile
from rnnbench.suites import GATE_ROADS

BENCH_MODELS = ("rnn", "lstm")


def bench_pairs() -> list:
    """Pairs the main environment runs, less those a registered upstream bug covers: they have no
    speed to measure (test_gradients holds them as strict xfails)."""
    pairs = []
    for m in BENCH_MODELS:
        model = registry.get_model(m)
        case = model.make_case(model.sizes_with_defaults(), 0)
        for d in registry.drivers().values():
            if (
                "main" in d.environments
                and "cpu" in d.devices
                and d.supports(model) is None
                and not known_issue_marks(d.name, model, case, "float32")
            ):
                tier = [SLOW] if slow_pair(model, d) else []  # the tier rule of the generated pairs
                pairs.append(pytest.param(m, d.name, marks=tier, id=f"{m}-{d.name}"))
    return pairs


@pytest.fixture
def one_torch_thread():
    """torch intra-op threads pinned to 1 for the benchmark (restored after): with as many threads
    as cores, a shared machine turns OpenMP barriers into waits of milliseconds. jax's thread pool
    is fixed at import (XLA_FLAGS); it is recorded as it is."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield 1
    torch.set_num_threads(before)


@pytest.mark.parametrize(("bench_model", "bench_driver"), bench_pairs())
def test_fwd_bwd(benchmark, one_torch_thread: int, bench_model: str, bench_driver: str) -> None:
    try:
        check, prepared = prepare_checked(bench_model, bench_driver)
    except NotApplicable as exc:
        pytest.skip(str(exc))
    benchmark.group = f"{bench_model} fwd+bwd (float32, default sizes)"
    model, driver = registry.get_model(bench_model), registry.get_driver(bench_driver)
    benchmark.extra_info.update(
        model=bench_model,
        driver=bench_driver,
        sizes=model.sizes_with_defaults(),
        dtype="float32",
        first_call_s=check.first_call_s,
        driver_settings={k: str(v) for k, v in prepared.settings.items()},
        rnnbench_version=rnnbench_version(),
        framework=driver.framework.name,
        framework_versions=driver.versions(),
        threads=one_torch_thread,
        threads_in_use=driver.framework.threads_in_use(),
        thread_env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")},
        torch_threads=_torch_threads(),
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        machine=machine(),
    )
    loss, grads = benchmark(prepared.loss_and_grads)
    judged = verify(bench_model, loss, grads, driver_name=bench_driver)
    benchmark.extra_info.update(
        max_rel_error=judged.max_rel_error,
        tolerance=judged.tolerance.max_rel_error,
        oracle=judged.oracle_kind,
        status=judged.status,
    )
    if os.environ.get("RNNBENCH_BENCH_PROFILE") == "1" and judged.status == "ok":
        # where the time went (docs/ci.md), in a pass of its own after the timed rounds
        benchmark.extra_info["profile"] = profile(prepared, driver.framework)
    assert judged.status == "ok", judged.report


def road_rows() -> list:
    """(model, driver, road) for every road besides vjp (rnnbench.modes.ROADS: test_fwd_bwd times vjp's)
    on the gate's rows (rnnbench.suites.GATE_ROADS: the quick suite's cheapest, so CI's benchmark gate
    grows by seconds; asv's Roads class times every road on its full matrix). A road the driver does not
    offer is a skip that says why, never left out."""
    return [
        pytest.param(m, d, road, id=f"{m}-{d}-{road}")
        for m in GATE_ROADS.models
        for d in GATE_ROADS.drivers
        for road in ROADS
        if road != VJP
    ]


@pytest.mark.parametrize(("bench_model", "bench_driver", "road"), road_rows())
def test_road(benchmark, one_torch_thread: int, bench_model: str, bench_driver: str, road: str) -> None:
    """A road's timed program, checked first as `rnnbench run --roads` checks it (the row of the mode that
    checks it, then the program against that row's values), timed like test_fwd_bwd's rows."""
    try:
        check, prepared, program, kept = prepare_road(bench_model, bench_driver, road)
    except NotApplicable as exc:
        pytest.skip(str(exc))
    driver = registry.get_driver(bench_driver)
    benchmark.group = f"{bench_model} {road} (float32, default sizes)"
    benchmark.extra_info.update(
        model=bench_model,
        driver=bench_driver,
        road=road,
        mode=ROADS[road].checked_by,
        sizes=registry.get_model(bench_model).sizes_with_defaults(),
        dtype="float32",
        first_call_s=check.first_call_s,
        rnnbench_version=rnnbench_version(),
        framework=driver.framework.name,
        framework_versions=driver.versions(),
        threads=one_torch_thread,
        threads_in_use=driver.framework.threads_in_use(),
        machine=machine(),
        max_rel_error=kept.get("max_rel_error", check.max_rel_error),
        status=check.status,
    )
    benchmark.pedantic(lambda: prepared.block(program()), rounds=ROAD_ROUNDS, iterations=1, warmup_rounds=2)
    assert check.status == "ok", check.report


ROAD_ROUNDS = 30  # the gate's samples of a road: its median's spread at ms-sized calls, within seconds a row


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


EXTRA_INFO_KEYS = {
    "rnnbench_version",
    "framework",
    "framework_versions",
    "threads",
    "threads_in_use",
    "thread_env",
    "machine",
    "max_rel_error",
    "status",
}


def test_histogram_and_extra_info(tmp_path: Path) -> None:
    """One benchmark timed for real (a child pytest): --benchmark-histogram writes an SVG (pygal
    and pygaljs are installed), and the JSON's extra_info names the versions, threads and machine."""
    pytest.importorskip("pygal", reason="pygal is in requirements/dev.txt: rebuild the environment")
    pytest.importorskip("pygaljs", reason="pygaljs is in requirements/dev.txt: rebuild the environment")
    case = "rnn-torch_loop"
    out_json, hist = tmp_path / "bench.json", tmp_path / "hist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_fwd_bwd[{case}]",
            "--benchmark-enable",
            "--benchmark-warmup=off",
            "--benchmark-min-rounds=3",
            "--benchmark-max-time=0.05",
            f"--benchmark-json={out_json}",
            f"--benchmark-histogram={hist}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).parent.parent,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    svgs = list(tmp_path.glob("hist*.svg"))
    assert svgs, f"no histogram SVG in {sorted(p.name for p in tmp_path.iterdir())}\n{proc.stdout[-2000:]}"
    assert all(p.read_text().lstrip().startswith(("<?xml", "<svg")) and "<svg" in p.read_text() for p in svgs)
    [bench] = json.loads(out_json.read_text())["benchmarks"]
    info = bench["extra_info"]
    assert EXTRA_INFO_KEYS <= set(info), sorted(EXTRA_INFO_KEYS - set(info))
    assert info["rnnbench_version"] == rnnbench_version() and info["framework_versions"]["torch"].startswith("2.")
    assert info["threads"] == 1 and info["machine"]["cores"] == os.cpu_count() and info["status"] == "ok"


# --- the asv suite's parameters (benchmarks/bench_recurrence.py) ---------------------------------

BENCH_FILE = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_recurrence.py"


@pytest.fixture
def bench_module():
    """benchmarks/bench_recurrence.py imported with the environment restored afterwards (it pins
    threads and turns compilation caches off for the asv process)."""
    import importlib.util

    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location("bench_recurrence_under_test", BENCH_FILE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_asv_parameters_are_the_checkouts_names(bench_module) -> None:
    """asv runs a benchmark by its index in the parameter list it discovered at one commit, so the
    lists must be the same at every commit: the names of src/rnnbench/suites.py in this checkout,
    read by path (that module imports nothing from rnnbench), never from the installed package."""
    import ast
    import dataclasses

    from rnnbench import suites

    source = ast.parse((BENCH_FILE.parents[1] / "src" / "rnnbench" / "suites.py").read_text())
    imported = [n for n in ast.walk(source) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(n, ast.ImportFrom) and n.module in ("__future__", "dataclasses") for n in imported)
    assert dataclasses.asdict(bench_module.SUITES.ASV) == dataclasses.asdict(suites.ASV)  # installed: this tree
    drivers, models, many = suites.ASV.drivers, suites.ASV.models, suites.ASV_MANY_ROUNDS
    curated = {model: suites.curated(model) for model in suites.CURATED.models}
    assert bench_module.CURATED == curated
    assert len(set(drivers)) == len(drivers) and set(drivers) <= set(registry.drivers())
    assert list(bench_module.Recurrence.params) == [list(models), list(drivers), ["small", "medium"]]
    assert list(bench_module.Curated.params) == [
        list(curated),
        list(dict.fromkeys(d for ds in curated.values() for d in ds if d not in many)),
    ]
    assert list(bench_module.CuratedManyRounds.params) == [list(curated), list(many)]
    # every road besides vjp's (Recurrence times that) is a benchmark of Roads: a new road fails here until
    # it is appended to suites.ASV_ROADS
    assert set(suites.ASV_ROADS) == set(ROADS) - {VJP} and len(set(suites.ASV_ROADS)) == len(suites.ASV_ROADS)
    assert list(bench_module.Roads.params) == [list(models), list(drivers), list(suites.ASV_ROADS)]
    assert set(many) <= {d for ds in curated.values() for d in ds} and bench_module.CuratedManyRounds.rounds > 2
    for model, names in curated.items():  # one driver per mechanism, each registered and runnable here
        assert len(names) == 9 and set(names) <= set(registry.drivers()), (model, names)


def test_a_name_this_rnnbench_lacks_is_not_applicable(bench_module) -> None:
    with pytest.raises(NotImplementedError, match="not registered"):
        bench_module.checked("rnn", "torch_loop_from_the_future", "small")
    with pytest.raises(NotImplementedError, match="not registered"):
        bench_module.checked("gru_from_the_future", "torch_loop", "small")
    with pytest.raises(NotImplementedError, match="not in the curated set"):
        bench_module.Curated().setup("rnn", "torch_nn_lstm")


def test_a_road_the_driver_cannot_run_is_not_applicable_with_its_reason(bench_module) -> None:
    with pytest.raises(NotImplementedError, match="func is torch's functional API"):
        bench_module.Roads().setup("rnn", "jax_lax_scan", "func")
    with pytest.raises(NotImplementedError, match="no batch axis"):
        bench_module.Roads().setup("taylor_expm", "torch_loop", "per_example_loop")


def test_a_road_benchmark_times_its_checked_program(bench_module) -> None:
    """asv's Roads setup checks the road as `run --roads` does, then its timed method runs the program."""
    bench = bench_module.Roads()
    bench.setup("rnn", "torch_loop", "per_example_loop")
    examples = registry.get_model("rnn").sizes_with_defaults()["B"]
    grads = bench.program()  # each compared input's per-example gradients, the examples first
    assert grads and all(g.shape[0] == examples for g in grads)
    bench.time_road("rnn", "torch_loop", "per_example_loop")


def test_the_gate_times_every_road_of_the_gate_rows() -> None:
    """test_road's rows are generated: every road besides vjp on each of GATE_ROADS' (model, driver) pairs,
    each pair one the main environment runs."""
    rows = {tuple(p.values) for p in road_rows()}
    want = {(m, d, r) for m in GATE_ROADS.models for d in GATE_ROADS.drivers for r in ROADS if r != VJP}
    assert rows == want and len(rows) == len(road_rows())
    for m in GATE_ROADS.models:
        for d in GATE_ROADS.drivers:
            assert (
                registry.get_driver(d).supports(registry.get_model(m)) is None
                and "main" in registry.get_driver(d).environments
            )


def test_rnnbench_installed_from_a_wheel_runs_a_checked_row(tmp_path: Path) -> None:
    """asv installs rnnbench as a wheel, with no checkout beside it (no pyproject.toml, no
    requirements/): preparing a checked row must not need the checkout (it once read
    pyproject.toml for the environments' hashes, and every asv benchmark failed)."""
    repo = Path(__file__).resolve().parents[1]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "wheel"),
            str(repo),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "wheel").glob("rnnbench-*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import rnnbench, json; from rnnbench.machine import environments; "
        "from rnnbench.rows.checked import prepare_checked; "
        "check, prepared = prepare_checked('rnn', 'torch_loop', sizes={'T': 3}); "
        "print(json.dumps([rnnbench.__file__, check.status, environments.current(), "
        "list(environments.rnnbench_dependencies())]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    where, status, env, deps = json.loads(proc.stdout.splitlines()[-1])
    assert where.startswith(str(tmp_path / "site")) and status == "ok" and env == "main"
    assert any(d.startswith("numpy") for d in deps)


# --- the suite's own cost: what a user waits for, gated by the same compare as any row ------------


def _readme_check():
    """The README's check_recurrence example on the two drivers of rnnbench.api's docstring (every
    driver would put minutes of compiles into each test run): four loss forms and H v each."""
    import numpy as np

    import rnnbench

    def step(ops, params, carry, x):
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(
        step,
        params={"w": np.array([0.5, -0.3])},
        carry0=(np.zeros(2),),
        xs=np.ones((6, 2)),
        drivers=["torch_loop", "jax_lax_scan"],
    )
    return "ok" if report.ok else str(report)


def _default_row():
    """One row of the default run (`rnnbench run`: lstm on torch_loop, float32, default sizes) as
    its worker conducts it, checking only: the oracle, prepare, first call and the judge."""
    from rnnbench.rows.row import Job, run_row

    return run_row(Job(model="lstm", driver="torch_loop", time=False))["status"]


def _fuzz_body():
    """One fuzz body (seed 0, the first) on torch_loop at float64 with H v: build (its oracles) and check."""
    from rnnbench.fuzz.campaign import Campaign
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.runner import run_driver

    campaign = Campaign(cases=1, seed=0, drivers=("torch_loop",))
    fc = build(campaign.body(0), dtype=campaign.dtype)
    if fc.ill_conditioned:
        return "ok"  # judged as the fuzzer judges it: no driver runs on an ill-conditioned body
    judged = run_driver(fc, registry.get_driver("torch_loop"), campaign.dtype, second_order=True)
    if judged.status == "ok" and judged.hvp_status in ("ok", None):
        return "ok"
    return f"{judged.status} {judged.hvp_status} {judged.report}"


SUITE_COST = {"check_recurrence_readme": _readme_check, "run_row_default": _default_row, "fuzz_body": _fuzz_body}


@pytest.mark.parametrize("what", sorted(SUITE_COST))
def test_suite_cost(benchmark, what: str) -> None:
    """Seconds of checking, as the user waits for them, as benchmarks that `rnnbench compare` gates
    like any row (.ci/run): a change that makes the suite itself slower is a slower row."""
    benchmark.group = "the suite's own cost (seconds of checking)"
    benchmark.extra_info.update(
        model="suite_cost",
        driver=what,
        sizes={},
        dtype="float64",
        rnnbench_version=rnnbench_version(),
        framework="rnnbench",
        framework_versions={"rnnbench": rnnbench_version()},
        threads=None,
        machine=machine(),
    )
    status = benchmark.pedantic(SUITE_COST[what], rounds=3, iterations=1)
    benchmark.extra_info["status"] = "ok" if status == "ok" else "error"
    assert status == "ok", status
