"""The one interface every driver provides, and helpers to move canonical data in and out.

A driver turns (model, case, dtype, device) into a `Prepared`: callables that compute the loss and
canonical gradients (for checking) and the forward / forward+backward work (for timing). Driver
modules import their framework lazily, inside `prepare`, so listing drivers never imports torch,
jax or torch_xla.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from rnnbench.model import Case, Model
from rnnbench.modes import HVP, VJP

Grads = dict[str, np.ndarray | None]


@dataclass(frozen=True)
class Prepared:
    """loss_and_grads() -> (loss, {input name: gradient or None}), float64 numpy, canonical layout.
    forward() / forward_backward(): the timed work; they return device results that `block`
    waits on (asynchronous frameworks would otherwise be timed while still tracing/dispatching).
    settings: framework settings this run depends on, recorded with the result.
    hvp(v) -> {input name: (H v)[name]}: optional second order, the Hessian of the loss w.r.t. the
    compared inputs times a direction v (same names and shapes as the gradients); None where the
    driver has no second-order path (e.g. torch.compile has no double backward).
    saved_for_backward() -> bytes of the distinct buffers, other than the inputs, that the training
    step's forward keeps for its backward (activations; rnnbench.rows.memory), or None where the
    framework gives no such count.
    modes: {mode: callable} for the first-order modes other than vjp (rnnbench.modes): the same
    (loss, gradients) by another road (forward mode, functional transforms); a mode absent here is
    one the driver cannot run (Driver.mode_missing says why). per_example's call returns (each
    example's loss (B,), {name: each example's gradient of its own loss, (B, *shape in one
    example's case)}) instead (rnnbench.batch's layout).
    computed_dtype() -> the dtype name ("float32", "float64", ...) the last loss_and_grads' loss came
    back in: a step that promotes (a float64 constant, a numpy float64 scalar under jax's x64) computes
    wider than the row's dtype, and says so here; None where the driver cannot tell.
    cost_analysis() -> the compiler's cost of the compiled forward+backward program (XLA's HLO cost
    analysis: flops, bytes accessed, ...), or None where the framework compiles no such program
    (rnnbench.rows.profile)."""

    loss_and_grads: Callable[[], tuple[float, Grads]]
    forward: Callable[[], Any]
    forward_backward: Callable[[], Any]
    block: Callable[[Any], None]
    settings: Mapping[str, Any] = field(default_factory=dict)
    hvp: Callable[[Mapping[str, np.ndarray]], Grads] | None = None
    memory_analysis: Callable[[], dict[str, Any]] | None = None  # the compiled step's own figures (jax)
    saved_for_backward: Callable[[], int] | None = None  # bytes the step keeps for backward (run.memory)
    computed_dtype: Callable[[], str | None] | None = None
    cost_analysis: Callable[[], dict[str, float]] | None = None
    # the first-order modes besides vjp (rnnbench.modes), each with loss_and_grads' contract
    modes: Mapping[str, Callable[[], tuple[float, Grads]]] = field(default_factory=dict)
    # the timed programs of the roads besides vjp's forward_backward (rnnbench.modes.ROADS), by road name
    roads: Mapping[str, RoadProgram] = field(default_factory=dict)


@dataclass(frozen=True)
class RoadProgram:
    """One timed program for derivatives by one road (rnnbench.modes.ROADS): run() -> the framework's
    result, which Prepared.block waits on (the timed call); read(result) -> its values as float64 numpy,
    for the check before it is timed: {"jvp": (1,)} for a JVP along TANGENT_SEED's tangent, {name: (B,
    *shape in one example)} for per-example gradients (rnnbench.batch's layout)."""

    run: Callable[[], Any]
    read: Callable[[Any], dict[str, np.ndarray]]


TANGENT_SEED = 1234  # the seeded tangent a timed JVP runs along (seeded_tangent)


def seeded_tangent(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """The direction a timed JVP runs along: a standard normal entry for every entry of every compared
    input (shapes: {name: shape}), float64, the same in every framework: each input's entries drawn
    from its own stream (seeded by its name), so the order of `shapes` does not matter."""
    return {
        name: np.random.default_rng([TANGENT_SEED, zlib.crc32(name.encode())]).standard_normal(shape)
        for name, shape in shapes.items()
    }


@dataclass(frozen=True)
class Batch:
    """What a driver's per_example mode (rnnbench.modes) needs besides its loss function: the model
    and case (where each example sits: rnnbench.batch.layout), and the consts dict its loss function
    reads at each call (the framework's arrays of case.consts), which the mode fills with one
    example's slices while it evaluates that example's loss."""

    model: Model
    case: Case
    consts: dict[str, Any]


@dataclass(frozen=True)
class DeviceQueries:
    """What a framework reports about an accelerator it runs on (rnnbench.machine.accelerator reads
    these; the defaults report nothing, as on a CPU).

    identity(device): the device as the framework sees it (name, memory, versions), plain data.
    reset_peak(device): start the allocator's peak count afresh (before a timed step).
    read_peak(device, prepared): the device memory figures since reset_peak, with what they mean,
        or None where the framework keeps none.
    gemm(dtype, m, k, n, device): a callable computing one (m, k) @ (k, n) product on `device` to
        completion, at the precision the rows use, or None where it has no such dtype.
    stream(nbytes, device): a callable copying one buffer of nbytes / 2 bytes into another on
        `device`, to completion (nbytes moved: read and written): what the device memory's bandwidth
        is measured with (rnnbench.machine.bandwidth); None where it has none."""

    identity: Callable[[str], dict[str, Any]] = lambda device: {}
    reset_peak: Callable[[str], None] = lambda device: None
    read_peak: Callable[[str, Any], dict[str, Any] | None] = lambda device, prepared: None
    gemm: Callable[[str, int, int, int, str], Callable[[], Any] | None] = lambda dtype, m, k, n, device: None
    stream: Callable[[int, str], Callable[[], Any]] | None = None


@dataclass(frozen=True)
class ReproScript:
    """The framework's parts of a standalone repro script (rnnbench.fuzz.repro): the packages it
    needs besides numpy, its head (imports, float64 on, an `ops` namespace) and its body (computes
    `got` and `reference` from the names the script defines before it). edge_ops: lines that add
    the ops the fuzzer's edge grammar uses (where, maximum, minimum, abs, sqrt, log, stop_gradient)
    and `ops.name` to that namespace (scripts of smooth bodies do without them)."""

    needs: str
    head: str
    run: str
    edge_ops: str = ""


@dataclass(frozen=True)
class Framework:
    """Everything about one framework that is not a way of writing the loop: whether it is
    installed, its versions, dtypes and devices, threads, and its compile caches. The framework
    layer (the `_<framework>.py` modules beside this one) holds one per framework; nothing outside
    it tests a framework's name.

    name: recorded in every row ("torch", "jax", "flax", "torch_xla").
    module: the importable module that makes it available (checked without importing it).
    packages: whose versions rows record.
    family: the vendor layers a report compares a driver with ("torch" rows against torch.nn,
        "jax" rows against flax cells).
    slow_compile: its compiled drivers take seconds per new program (torch inductor), so callers
        that compile thousands of small programs (the fuzzer) leave them out unless named.
    thread_env(n): environment variables that fix its thread pools, set before it is imported.
    set_threads(n): the same, in a process that has imported it. Both come on top of the CPU
        affinity every worker is pinned to before any framework is imported (n CPUs:
        rnnbench.rows.worker.setup), which is what holds pools that size themselves from the
        machine (XLA's) to n cores.
    threads_in_use(): thread counts as it reports them (recorded with each row).
    device_missing(device): None, or why `device` is not usable by it here.
    cold_cache_env(root): environment variables that switch its on-disk compile caches off (cache
        directories under `root`), for cold first-call times.
    warm_cache_env(root): environment variables that keep its on-disk compile caches under `root`,
        across runs (`rnnbench run`: a repeated run's first calls reuse earlier compiles).
    cache_variables: the environment variables that decide its on-disk compile caches (each row
        records their values: a first call may have been served by a cache).
    keep_compiles(root): a context manager under which the calling process keeps its compiles on
        disk under `root` and reads them back, and after which its settings are as they were: what
        warm_cache_env gives `rnnbench run`'s workers, for a check in the user's own process
        (check_recurrence). A no-op where the framework keeps its compiles by default (inductor).
    keep_settings(): a context manager after which every process-wide setting its drivers change
        (flags, default dtype, thread counts) is as it was on entry, however the block ends: a check
        in the user's own process (check_recurrence) leaves the caller's framework as it found it.
    compiles_kept(): a context manager under which a compile keeps the code every earlier compile
        of this process made, where the framework otherwise starts each from a clean state (torch:
        dynamo's reset, see _torch_compile.compiled): for a caller that keeps several compiled functions
        alive at once (rnnbench.rows.pair.PairPlan.fresh_compiles False) and starts a clean state
        itself between groups of them (reset_compiles). No-ops where compiles share no state.
    gemm(a, b, dtype): a callable computing a @ b (float64 numpy operands, cast to `dtype`) to
        completion in it, or None where it has no such dtype: what the machine's GEMM peak is
        measured with (rnnbench.machine.roofline). None: it takes no part in the peak.
    cpu_time_clock: its single-threaded work runs on the calling thread and its waits block, so
        process CPU time times a row and does not grow while other jobs hold the core; False where
        its runtime computes on threads of its own whose waits spin (XLA): wall time then. Read by
        the asv benchmarks' clock choice.
    repro: the head (imports, the `ops` namespace) and body of the standalone script a fuzzed
        failure is exported as (rnnbench.fuzz.repro), or None where it has none.
    device: what it reports about an accelerator (DeviceQueries).
    op_profile(fn, block, calls): its profiler's table of `calls` blocked calls of fn, as {op name:
        self time in ms per call} (torch.profiler's key_averages), or None where it has no op-level
        profiler (rnnbench.rows.profile: where a row's time went).
    collect_after_failure: its next graph execution takes in every tensor still alive (torch_xla's
        sync), so the tensors of a trace that raised, kept alive by the exception's frames, must be
        released before the process goes on: the frames are cleared and the cyclic garbage
        collected (placeholders without data reached the next execution: a segfault, docs/bugs.md).
    modes_missing: {mode: why} for the first-order modes (rnnbench.modes) none of its drivers can run.
    refuses(exc): the exception a mode other than vjp raised is the framework declining that
        composition (an op with no forward-mode formula, a transform it does not trace), not a
        failure of it: the row is unavailable with the framework's own words (rows.pair).
    dispatch_count(fn, block): {floor name: dispatches of that kind one blocked call of fn makes},
        counted (torch: the profiler's outer aten ops and compiled programs; jax: the top-level
        equations of its jaxpr), or None where it has no count (rnnbench.rows.counts).
    dispatch_floors(device): {floor name: µs per dispatch of that kind}, measured on a trivial op
        (rnnbench.machine.dispatch_floor); the names dispatch_count uses. None: no floor.
    layers: the layers a compiled driver's program passes through, each a complete way to run it,
        from the least transformed to the one its rows run (torch: torch.compile's backends eager,
        aot_eager, inductor; jax: without jit, with jit): where a wrong gradient first appears
        (rnnbench.rows.layers). Empty where the framework has no such layers.
    at_layer(name): a context manager under which its compiled drivers prepare and run at that
        layer (one of `layers`); the last layer is what they do outside it.
    """

    name: str
    module: str
    packages: tuple[str, ...]
    family: str
    slow_compile: bool = False
    thread_env: Callable[[int], dict[str, str]] = lambda threads: {}
    set_threads: Callable[[int], None] = lambda threads: None
    threads_in_use: Callable[[], dict[str, int]] = lambda: {}
    device_missing: Callable[[str], str | None] = lambda device: None
    cold_cache_env: Callable[[str], dict[str, str]] = lambda root: {}
    warm_cache_env: Callable[[str], dict[str, str]] = lambda root: {}
    cache_variables: tuple[str, ...] = ()
    keep_compiles: Callable[[str], AbstractContextManager[Any]] = lambda root: nullcontext()
    keep_settings: Callable[[], AbstractContextManager[Any]] = lambda: nullcontext()
    compiles_kept: Callable[[], AbstractContextManager[Any]] = nullcontext
    reset_compiles: Callable[[], None] = lambda: None
    gemm: Callable[[Any, Any, str], Callable[[], Any] | None] | None = None
    cpu_time_clock: bool = False
    repro: ReproScript | None = None
    device: DeviceQueries = DeviceQueries()
    collect_after_failure: bool = False
    op_profile: Callable[[Callable[[], Any], Callable[[Any], None], int], dict[str, float]] | None = None
    modes_missing: Mapping[str, str] = field(default_factory=dict)
    refuses: Callable[[BaseException], bool] = lambda exc: False
    dispatch_count: Callable[[Callable[[], Any], Callable[[Any], None]], dict[str, int]] | None = None
    dispatch_floors: Callable[[str], dict[str, float]] | None = None
    layers: tuple[str, ...] = ()
    at_layer: Callable[[str], AbstractContextManager[Any]] = lambda name: nullcontext()

    def available(self) -> str | None:
        """None, or the reason the framework cannot be used in this Python environment."""
        import importlib.util

        try:
            found = importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"python package '{self.module}' is not installed in this environment"

    def versions(self) -> dict[str, str]:
        from importlib.metadata import PackageNotFoundError, version

        out = {}
        for p in self.packages:
            try:
                out[p] = version(p)
            except PackageNotFoundError:
                out[p] = "missing"
        return out

    def label(self) -> str:
        """How tables name what a row ran on: the framework's main package and its version,
        e.g. "torch 2.13.0", "jax 0.10.2" (local build tags such as +cpu dropped)."""
        package = self.packages[0]
        return f"{package} {self.versions()[package].split('+')[0]}"

    def import_module(self) -> None:
        """Import it (so a row's memory baseline includes the framework's own footprint)."""
        import importlib

        importlib.import_module(self.module)


@dataclass(frozen=True)
class Driver:
    """One configuration of one mechanism: a row of its mechanism module's DRIVERS table.

    name: unique id (records, the registry of known issues and asv history are keyed by it).
    framework: the Framework it runs on. summary: one line for `rnnbench list`.
    prepare(model, case, dtype, device) -> Prepared.
    supports(model) -> None or the reason this driver cannot express the model.
    environments: the Python environments that run it ("main"; "xla" = torch 2.9.0 + torch_xla): a
        driver listed in several gives one row per environment (rnnbench.machine.environments).
    compiled: True when the first call compiles.
    anchor: a vendor layer (torch.nn.LSTM, flax cells) rather than the model's own step.
    suite: "core", "bugs" for a driver that exists for a bug class of docs/bugs.md, or "gpu" for a
        configuration that exists on a GPU only (CUDA graphs).
    autocast: the autocast dtype the driver runs the loss under (parameters stay float32), or None.
    second_order: its Prepared provides hvp (double backward / forward-over-reverse), checked by
        rnnbench.check.verdicts.second_order; compiled torch drivers have no double backward.
    unavailable: a fixed reason it cannot run anywhere (a test double), else None.
    repro: "loop" or "scan": the shape of the standalone script the fuzzer's repro export writes for
        it (the framework part is Framework.repro); None: no script (the report says so).
    try_dtype(dtype, device): for a dtype outside `dtypes`, None or why it fails, found by running
        it once (cached by the driver's module): a vendor layer's support depends on the device.
        Only a worker tries (why_not(trying=True)); the parent leaves such rows to it.
    modes_missing: {mode: why} for the differentiation modes (rnnbench.modes) this configuration cannot
        run beyond its framework's (mode_missing).
    shared_loss_program: a check of several loss forms (check_recurrence) may judge its linear forms with one
        compiled program, the weighted loss at each form's own weights (rnnbench.losses.at_own_weights), where each
        form's own program would compile again: set only where no registered bug of the driver depends on the layout
        of the seed its backward starts from."""

    name: str
    framework: Framework
    summary: str
    prepare: Callable[[Model, Case, str, str], Prepared]
    supports: Callable[[Model], str | None] = lambda model: None
    environments: tuple[str, ...] = ("main",)
    compiled: bool = False
    anchor: bool = False
    dtypes: tuple[str, ...] = ("float64", "float32")
    devices: tuple[str, ...] = ("cpu", "cuda")
    suite: str = "core"
    autocast: str | None = None
    second_order: bool = False
    unavailable: str | None = None
    try_dtype: Callable[[str, str], str | None] | None = None
    repro: str | None = None
    modes_missing: Mapping[str, str] = field(default_factory=dict)
    shared_loss_program: bool = False

    def available(self) -> str | None:
        return self.unavailable or self.framework.available()

    def mode_missing(self, mode: str) -> str | None:
        """None, or why this driver cannot run differentiation mode `mode` (rnnbench.modes): its own
        modes_missing, then its framework's; hvp where it has no second-order path."""
        if mode == VJP:
            return None
        if mode == HVP:
            return None if self.second_order else f"{self.name} has no second-order path"
        return self.modes_missing.get(mode) or self.framework.modes_missing.get(mode)

    @property
    def slow_to_compile(self) -> bool:
        """Its first call of each new program compiles for seconds (torch inductor's C++ kernels):
        callers that check many programs or answer a user at once leave it out unless named."""
        return self.compiled and self.framework.slow_compile

    def versions(self) -> dict[str, str]:
        return self.framework.versions()

    def why_not(self, model: Model, dtype: str, device: str, trying: bool = False) -> str | None:
        """None, or why this driver cannot run `model` at `dtype` on `device` in this process
        (framework installed, dtype, device, the model's shape of computation, device visible).
        trying: a dtype outside `dtypes` is tried (try_dtype) rather than left undecided."""
        reason = self.available()
        if reason is None and dtype not in self.dtypes and self.try_dtype is None:
            reason = f"dtype {dtype} not supported by {self.name}"
        if reason is None and device not in self.devices:
            reason = f"device {device} not supported by {self.name}"
        if reason is None:
            reason = self.supports(model)
        if reason is None:
            reason = self.framework.device_missing(device)
        if reason is None and dtype not in self.dtypes and trying:
            reason = self.try_dtype(dtype, device)  # type: ignore[misc]
        return reason


def derivatives(prepared: Prepared, mode: str) -> Callable[[], tuple[float, Grads]]:
    """The call that gives (loss, canonical gradients) by first-order `mode` (rnnbench.modes): vjp is
    loss_and_grads; another mode's call raises KeyError where the prepared driver does not offer it
    (Driver.mode_missing says why before a row gets here)."""
    return prepared.loss_and_grads if mode == VJP else prepared.modes[mode]


def flat_inputs(model: Model, case: Case) -> dict[str, np.ndarray]:
    """Every input by canonical name: params, "carry0.<leaf>", and "xs" when present."""
    flat = dict(case.params)
    flat.update({f"carry0.{n}": c for n, c in zip(model.carry_names, case.carry0)})
    if case.xs is not None:
        flat["xs"] = case.xs
    return flat


def unflatten(model: Model, case: Case, flat: Mapping[str, Any]) -> tuple[dict[str, Any], tuple, Any]:
    """(params, carry0, xs) from a dict keyed like flat_inputs (any framework's arrays)."""
    params = {k: flat[k] for k in case.params}
    carry0 = tuple(flat[f"carry0.{n}"] for n in model.carry_names)
    return params, carry0, flat.get("xs")


def configured(
    name: str, framework: Framework, summary: str, *, prepare: Callable, config: Any, **fields: Any
) -> Driver:
    """A row of a mechanism's DRIVERS: its prepare(config, model, case, dtype, device) bound to one
    configuration (`fields`: the Driver's other fields)."""
    return Driver(name=name, framework=framework, summary=summary, prepare=partial(prepare, config), **fields)


def anchor(name: str, framework: Framework, summary: str, *, prepare: Callable, layer: Any, **fields: Any) -> Driver:
    """A row of a vendor-layer mechanism (an anchor): `layer` bound to its prepare, run only on the
    model family it computes (layer.kind, a Model.kind)."""

    def supports(model: Model) -> str | None:
        return None if model.kind == layer.kind else f"vendor layer computes {layer.kind} only"

    return configured(name, framework, summary, prepare=prepare, config=layer, supports=supports, anchor=True, **fields)


def supports_only(models: tuple[str, ...]) -> Callable[[Model], str | None]:
    """supports() for a configuration variant that exists for one known issue: run on a few models."""

    def supports(model: Model) -> str | None:
        return None if model.name in models else f"configuration variant, run on {', '.join(models)} only"

    return supports
