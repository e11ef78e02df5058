"""What each selection means, as data: the suites of `rnnbench run --suite`, the curated selection
(asv's `Curated`, the default of `rnnbench compare --commits`), asv's full matrix, the mechanisms
of the idiomatic study, the bug classes of `rnnbench versions` and the charts' baseline. Outside
drivers/ this is the one module that names drivers (tests/test_architecture.py): a new driver
configuration is one row of its mechanism's DRIVERS table, and joins a selection here only if
someone adds it.

It imports nothing from rnnbench: asv loads this file from the checkout its benchmarks are in, not
from the installed package, so that its parameter lists are the same at every commit it measures
(docs/measuring.md#asv)."""

from __future__ import annotations

from dataclasses import dataclass

# One axis of a selection: names, a Model.suite / Driver.suite value ("core", "bugs"), or "all".
Selection = tuple[str, ...] | str


@dataclass(frozen=True)
class Suite:
    """What `rnnbench run --suite NAME` selects on each axis that --models / --drivers /
    --environments leave open, and the run settings it defaults (flags and config files override).

    environments: names, or "default" (the environments.toml entries marked default), for the
        suite's own drivers: drivers named with --drivers run in every default environment of theirs.
    sizes: size sets, each row run at each (--sizes replaces them); (): each model's defaults.
    dtypes, device, timeout, compile_budget: run settings it defaults; () / None: the run's own.
    staged: planned by rnnbench.run.gpu_suite: CUDA only, in stages of one (sizes, dtype, model),
        cheapest first, each stage's drivers in the order listed."""

    name: str
    summary: str  # one line of `rnnbench run --help`
    models: Selection
    drivers: Selection
    environments: tuple[str, ...] | str = "default"
    sizes: tuple[dict[str, int], ...] = ()
    dtypes: tuple[str, ...] = ()
    device: str | None = None
    timeout: float | None = None
    compile_budget: float | None = None
    staged: bool = False

    def defaults(self) -> dict[str, object]:
        """The run settings (RUN_DEFAULTS' keys) this suite gives a default."""
        given = {
            "device": self.device,
            "dtypes": ",".join(self.dtypes) or None,
            "timeout": self.timeout,
            "compile_budget": self.compile_budget,
        }
        return {key: value for key, value in given.items() if value is not None}


@dataclass(frozen=True)
class Mechanism:
    """One mechanism of the curated set, by the driver that runs it. idiom: the idiomatic study's
    baseline family written with the same construct (a ratio against it is the driver's own cost);
    unrolled: its program is the T steps unrolled, so its first call grows with T."""

    driver: str
    idiom: str
    unrolled: bool = False


@dataclass(frozen=True)
class VendorLayers:
    """A framework's own class for each model (a vendor layer, a flax cell): one driver per model.
    family: its name as a baseline family of the idiomatic study."""

    family: str
    drivers: dict[str, str]  # model -> driver


@dataclass(frozen=True)
class Benchmarks:
    """asv's parameters (benchmarks/bench_recurrence.py). asv runs a benchmark by its index in the
    lists it discovered at one commit, so they only grow: append a name, never rename or reorder
    one; a name an older rnnbench lacks is n/a there. A new driver is measured by `rnnbench run` and
    pytest-benchmark from the registry, and by asv once its name is appended here.

    sizes: preset name -> overrides of each model's defaults (keys a model does not use are ignored).
    curated: model -> its drivers in `Curated`; many_rounds: those timed in more processes."""

    models: tuple[str, ...]
    drivers: tuple[str, ...]
    sizes: dict[str, dict[str, int]]
    curated: dict[str, tuple[str, ...]]
    many_rounds: tuple[str, ...]


@dataclass(frozen=True)
class BugClass:
    """A class of docs/bugs.md without (or beyond) a registered issue: models x drivers that
    `rnnbench versions` runs in every environment of the version matrix."""

    id: str
    title: str
    models: tuple[str, ...]
    drivers: tuple[str, ...] | None = None  # None: every core driver (not a vendor layer) that runs the models
    dtype: str = "float64"
    order: int = 1


# quick is the comparison at a glance: one model per family (Elman, LSTM, a stacked recurrence,
# Taylor, Newton) on every core driver in the main environment, small enough to run by default
# (its measured cost: docs/cli.md, "Suites").
QUICK = Suite(
    "quick",
    "rnn, lstm, lstm2, taylor_exp, newton_sqrt on every core driver, main environment",
    models=("rnn", "lstm", "lstm2", "taylor_exp", "newton_sqrt"),
    drivers="core",
    environments=("main",),
)
CORE = Suite(
    "core", "every core model on every core driver, also in the torch 2.9.0 / torch_xla environment", "core", "core"
)
BUGS = Suite(
    "bugs", "the docs/bugs.md case models (variants, loop bodies, mixed precision) on every driver", "bugs", "all"
)
ALL = Suite("all", "every model on every driver", "all", "all")
# realistic: sizes people train at (docs/cli.md#the-realistic-suite), one driver per mechanism (no
# unrolled loops: their compile grows with T) and the vendor layers.
REALISTIC = Suite(
    "realistic",
    "rnn, lstm, lstm2 at T=128,512 x I=H=256,512, B=32: one driver per mechanism and the vendor layers",
    models=("rnn", "lstm", "lstm2"),
    drivers=(
        "torch_loop",
        "torch_scan_compiled",
        "jax_lax_scan",
        "flax_scan",
        "torch_nn_rnn",
        "torch_nn_lstm",
        "flax_simple_cell",
        "flax_lstm_cell",
    ),
    environments=("main",),
    sizes=tuple({"T": t, "B": 32, "I": h, "H": h} for t in (128, 512) for h in (256, 512)),
)
# gpu: the recurrent models at real sizes on one CUDA GPU, planned so that one call of a few minutes
# leaves a useful table even with every compile cold (rnnbench.run.gpu_suite: the stages and why).
GPU = Suite(
    "gpu",
    "LSTM, RNN, stacked LSTM at real sizes, float32 and bfloat16, on --device cuda (docs/gpu.md)",
    models=("lstm", "rnn", "lstm2"),  # the LSTM, the design card's headline, first in each (sizes, dtype)
    # cheapest first: vendor layers, jax scans, eager loop, unrolled jit loop, inductor (scan, then
    # the unrolled loop), each inductor row beside its CUDA-graph configuration
    drivers=(
        "torch_nn_lstm",
        "torch_nn_rnn",
        "jax_lax_scan",
        "flax_scan",
        "torch_loop",
        "jax_loop",
        "torch_scan_compiled",
        "torch_scan_compiled_cudagraphs",
        "torch_loop_compiled",
        "torch_loop_compiled_cudagraphs",
    ),
    environments=("main",),
    sizes=tuple({"T": t, "B": 64, "I": 256, "H": h} for t in (256, 1024) for h in (512, 1024)),
    dtypes=("float32", "bfloat16"),
    device="cuda",
    # A row longer than this (two compiles, jax's forward compiled apart, plus checking and timing)
    # is killed and recorded as a timeout.
    timeout=240.0,
    # A first call past this is a timeout record with its elapsed time (rnnbench.run.compile_budget):
    # sized from the cold first calls measured on an H100 (docs/gpu.md), inductor's scan finishes
    # within it, and an unrolled compiled loop, whose compile grows with T, is stopped at it.
    compile_budget=90.0,
    staged=True,
)
SUITES = {suite.name: suite for suite in (QUICK, CORE, BUGS, ALL, REALISTIC, GPU)}

# The mechanisms of the curated set and of the idiomatic study: the main environment's loop and scan drivers.
MECHANISMS = (
    Mechanism("torch_loop", "unbind loop"),
    Mechanism("torch_loop_compiled", "unbind loop compiled", unrolled=True),
    Mechanism("torch_scan", "scan, hand-written"),
    Mechanism("torch_scan_compiled", "scan, hand-written, compiled"),
    Mechanism("jax_loop", "jit loop", unrolled=True),
    Mechanism("jax_lax_scan", "lax.scan"),
    Mechanism("flax_scan", "flax nn.RNN cell"),
)
# torch.nn.RNN / LSTM and flax's SimpleCell / OptimizedLSTMCell: the model's own class, so a
# different driver per model.
VENDOR_LAYERS = (
    VendorLayers("torch.nn", {"rnn": "torch_nn_rnn", "lstm": "torch_nn_lstm"}),
    VendorLayers("flax nn.RNN cell", {"rnn": "flax_simple_cell", "lstm": "flax_lstm_cell"}),
)
# The curated selection: each mechanism once, and the vendor layers, on rnn and lstm at their
# default sizes in the main environment.
CURATED = Suite(
    "curated",
    "each mechanism once and the vendor layers, on rnn and lstm at their default sizes",
    models=("rnn", "lstm"),
    drivers=tuple(m.driver for m in MECHANISMS) + tuple(v.drivers[m] for v in VENDOR_LAYERS for m in ("rnn", "lstm")),
    environments=("main",),
)

ASV = Benchmarks(
    models=("rnn", "lstm", "decay", "taylor_expm", "newton_schulz"),
    # Every driver name at the time the list was written, then each appended: one that cannot run in
    # the interpreter asv uses (torch_xla drivers in the main environment, jax drivers in the
    # torch_xla one) is n/a there, with its reason.
    drivers=(
        "flax_lstm_cell",
        "flax_scan",
        "flax_simple_cell",
        "jax_lax_scan",
        "jax_loop",
        "jax_loop_buffer",
        "torch_autocast_loop",
        "torch_autocast_loop_compiled",
        "torch_loop",
        "torch_loop_compiled",
        "torch_loop_index_put",
        "torch_loop_index_put_compiled",
        "torch_loop_setitem",
        "torch_loop_setitem_compiled",
        "torch_nn_lstm",
        "torch_nn_rnn",
        "torch_scan",
        "torch_scan_compiled",
        "torch_scan_compiled_clone_y_only",
        "torch_scan_compiled_default_config",
        "torch_xla_loop",
        "torch_xla_scan",
        "torch_xla_scan_cached",
        "torch_xla_scan_closure",
        "torch_loop_compiled_cudagraphs",
        "torch_scan_compiled_cudagraphs",
    ),
    sizes={"small": {}, "medium": {"T": 64, "B": 16, "I": 64, "H": 128, "n": 32}},
    curated={
        model: tuple(m.driver for m in MECHANISMS) + tuple(v.drivers[model] for v in VENDOR_LAYERS)
        for model in CURATED.models
    },
    # Eager torch scan re-traces its body on every call: its time differs from process to process
    # by more than the 10 % a rerun must agree within (measured: docs/measuring.md#asv).
    many_rounds=("torch_scan",),
)

BUG_CLASSES = (
    # The four bodies whose d body/d acc depends on x (the class's trigger; loop_add and loop_add_sq,
    # its controls, run in every test run).
    BugClass(
        "s4-accumulator-jacobian",
        "§4 gradients (and second order) wrong when d body/d acc depends on x",
        ("loop_mul", "loop_div", "loop_sin_mul", "loop_acc_plus_acc_mul"),
        order=2,
    ),
    BugClass(
        "s5-sliced-assignment-buffer",
        "§5 gradients lost through sliced assignment into a preallocated buffer",
        ("decay", "rnn"),
        (
            "torch_loop_setitem",
            "torch_loop_setitem_compiled",
            "torch_loop_index_put",
            "torch_loop_index_put_compiled",
            "jax_loop_buffer",
        ),
    ),
)

CHART_BASELINE = "torch_loop"  # the plain Python loop every speed-up chart is relative to
