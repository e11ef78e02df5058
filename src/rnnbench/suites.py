"""What each selection means, as data: the suites of `rnnbench run --suite`, the curated selection
(asv's `Curated`, the default of `compare --commits`), asv's full matrix, the idiomatic study's
mechanisms, the bug classes of `rnnbench versions`, the charts' baseline and the remat pairs (REMAT).
Outside drivers/ this is the one module that names drivers (tests/test_architecture.py): a new driver configuration is a
row of its mechanism's DRIVERS table and joins a selection here only when someone adds it.

It imports nothing from rnnbench: asv loads this file by its path in the checkout, not from the
installed package, so its parameter lists are the same at every commit (docs/measuring.md#asv)."""

from __future__ import annotations

from dataclasses import dataclass

Selection = tuple[str, ...] | str  # names, a Model.suite / Driver.suite value ("core", "bugs"), or "all"


@dataclass(frozen=True)
class Suite:
    """What a suite selects on each axis that --models / --drivers / --environments leave open, and
    the run settings it defaults (flags and config files override them).

    environments: names, or "default" (the environments.toml entries marked default).
    sizes: size sets, each row run at each (--sizes replaces them); (): each model's defaults.
    staged: run by rnnbench.planning.gpu_suite: CUDA only, in stages of one (sizes, dtype, model),
        cheapest first, each stage's drivers in the order listed."""

    name: str
    summary: str  # its line in `rnnbench run --help`
    models: Selection
    drivers: Selection
    environments: tuple[str, ...] | str = "default"
    sizes: tuple[dict[str, int], ...] = ()
    dtypes: tuple[str, ...] = ()  # a default; (): the run's
    device: str | None = None  # defaults, like timeout and compile_budget; None: the run's
    timeout: float | None = None
    compile_budget: float | None = None
    staged: bool = False

    def defaults(self) -> dict[str, object]:
        """The run settings this suite gives a default (dtypes comma-separated, as the flag takes them)."""
        given = {"device": self.device, "dtypes": ",".join(self.dtypes), "timeout": self.timeout}
        given["compile_budget"] = self.compile_budget
        return {key: value for key, value in given.items() if value not in (None, "")}


@dataclass(frozen=True)
class Mechanism:
    """A mechanism of the curated set, by its driver. idiom: the idiomatic study's baseline family
    written with the same construct (a ratio against it is the driver's own cost); unrolled: its
    program is the T steps unrolled, so its first call grows with T."""

    driver: str
    idiom: str
    unrolled: bool = False


@dataclass(frozen=True)
class VendorLayers:
    """A framework's own class for each model (vendor layer, flax cell): a driver per model.
    family: its baseline family in the idiomatic study."""

    family: str
    drivers: dict[str, str]  # model -> driver


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


MECHANISMS = (  # the main environment's loop and scan drivers
    Mechanism("torch_loop", "unbind loop"),
    Mechanism("torch_loop_compiled", "unbind loop compiled", unrolled=True),
    Mechanism("torch_scan", "scan, hand-written"),
    Mechanism("torch_scan_compiled", "scan, hand-written, compiled"),
    Mechanism("jax_loop", "jit loop", unrolled=True),
    Mechanism("jax_lax_scan", "lax.scan"),
    Mechanism("flax_scan", "flax nn.RNN cell"),
)
VENDOR_LAYERS = (
    VendorLayers("torch.nn", {"rnn": "torch_nn_rnn", "lstm": "torch_nn_lstm"}),
    VendorLayers("flax nn.RNN cell", {"rnn": "flax_simple_cell", "lstm": "flax_lstm_cell"}),
)
VENDOR_DRIVERS = tuple(v.drivers[m] for v in VENDOR_LAYERS for m in ("rnn", "lstm"))


def curated(model: str) -> tuple[str, ...]:
    """The curated drivers of `model`: each mechanism once, then its vendor layers."""
    return tuple(m.driver for m in MECHANISMS) + tuple(v.drivers[model] for v in VENDOR_LAYERS)


# fmt: off
# The data below is laid out by hand, a row per line where a row fits.
SUITES = {s.name: s for s in (
    # quick is the comparison at a glance: one model per family (Elman, LSTM, stacked, Taylor, Newton),
    # small enough to run by default (its measured cost: docs/cli.md, "Suites").
    Suite("quick", "rnn, lstm, lstm2, taylor_exp, newton_sqrt on every core driver, main environment",
          models=("rnn", "lstm", "lstm2", "taylor_exp", "newton_sqrt"), drivers="core", environments=("main",)),
    Suite("core", "every core model on every core driver, also in the torch 2.9.0 / torch_xla environment",
          "core", "core"),
    Suite("bugs", "the docs/bugs.md case models (variants, loop bodies, mixed precision) on every driver",
          "bugs", "all"),
    Suite("all", "every model on every driver", "all", "all"),
    # sizes people train at (docs/cli.md#the-realistic-suite); no unrolled loop: its compile grows with T
    Suite("realistic", "rnn, lstm, lstm2 at T=128,512 x I=H=256,512, B=32: one driver per mechanism and the "
          "vendor layers", models=("rnn", "lstm", "lstm2"),
          drivers=("torch_loop", "torch_scan_compiled", "jax_lax_scan", "flax_scan", *VENDOR_DRIVERS,
                   "torch_nn_lstm_compiled", "flax_nnx_lstm_cell"),  # the compiled and the NNX vendor LSTMs
          environments=("main",),
          sizes=tuple({"T": t, "B": 32, "I": h, "H": h} for t in (128, 512) for h in (256, 512))),
    # Real sizes on one CUDA GPU, ordered so that a call of a few minutes leaves a useful table with
    # every compile cold: the LSTM (the design card's headline) first, drivers cheapest first. A first
    # call past compile_budget is a timeout record (sized from cold first calls on an H100, docs/gpu.md:
    # inductor's scan finishes within it, an unrolled compiled loop does not); a row past timeout (two
    # compiles, checking, timing) is killed.
    # The gated linear recurrences (mingru, lru) run the associative scans too; on other models
    # those rows are unavailable records, written at once.
    Suite("gpu", "LSTM, RNN, stacked LSTM, GRU, minGRU, LRU at real sizes, float32 and bfloat16, on --device cuda "
          "(docs/gpu.md)",
          models=("lstm", "rnn", "lstm2", "gru", "mingru", "lru"),
          drivers=("torch_nn_lstm", "torch_nn_rnn", "torch_nn_gru", "flax_gru_cell",  # vendor layers: no compile
           "jax_lax_scan", "jax_lax_scan_unroll8", "jax_associative_scan", "flax_scan",  # jax's scans: seconds
           "torch_loop", "jax_loop", "torch_associative_scan",  # the eager loops, the unrolled jit loop
           "torch_scan_compiled", "torch_scan_compiled_cudagraphs",  # inductor: a minute or more
           "torch_associative_scan_compiled", "torch_associative_scan_compiled_pointwise",
           "torch_loop_compiled", "torch_loop_compiled_cudagraphs"),
          environments=("main",),
          sizes=tuple({"T": t, "B": 64, "I": 256, "H": h} for t in (256, 1024) for h in (512, 1024)),
          dtypes=("float32", "bfloat16"), device="cuda", timeout=240.0, compile_budget=90.0, staged=True),
)}
QUICK, REALISTIC, GPU = SUITES["quick"], SUITES["realistic"], SUITES["gpu"]
CURATED = Suite("curated", "each mechanism once and the vendor layers, on rnn and lstm at their default sizes",
                models=("rnn", "lstm"), drivers=tuple(m.driver for m in MECHANISMS) + VENDOR_DRIVERS,
                environments=("main",))
# asv's parameters. asv runs a benchmark by its index in the lists it discovered at one commit, so
# they only grow: append a name, never rename or reorder one. A new driver is measured by
# `rnnbench run` and pytest-benchmark from the registry, and by asv once its name is here.
ASV = Suite("asv", "asv's full matrix", (
    "rnn", "lstm", "decay", "taylor_expm", "newton_schulz", "gru", "mingru", "lru"), (
    "flax_lstm_cell", "flax_scan", "flax_simple_cell", "jax_lax_scan", "jax_loop", "jax_loop_buffer",
    "torch_autocast_loop", "torch_autocast_loop_compiled", "torch_loop", "torch_loop_compiled",
    "torch_loop_index_put", "torch_loop_index_put_compiled", "torch_loop_setitem", "torch_loop_setitem_compiled",
    "torch_nn_lstm", "torch_nn_rnn", "torch_scan", "torch_scan_compiled", "torch_scan_compiled_clone_y_only",
    "torch_scan_compiled_default_config", "torch_xla_loop", "torch_xla_scan", "torch_xla_scan_cached",
    "torch_xla_scan_closure", "torch_loop_compiled_cudagraphs", "torch_scan_compiled_cudagraphs",
    "torch_nn_gru", "flax_gru_cell", "jax_lax_scan_unroll8", "jax_associative_scan", "torch_associative_scan",
    "torch_associative_scan_compiled", "torch_associative_scan_compiled_pointwise",
))
# asv's roads (rnnbench.modes.ROADS): every road besides vjp's forward+backward (Recurrence times that),
# each a benchmark of the `Roads` class over ASV's models and drivers; append only, as ASV's lists.
ASV_ROADS = ("jvp", "jvp_dual", "func", "per_example", "per_example_loop", "per_example_batched_loss")
# the roads in CI's benchmark gate (tests/test_benchmarks.py): the cheapest rows of the quick suite, one
# eager driver per framework on the Elman RNN (the gate's cost: docs/testing.md#ci)
GATE_ROADS = Suite("gate-roads", "each road besides vjp on one eager driver per framework, rnn at its default size",
                   models=("rnn",), drivers=("torch_loop", "jax_lax_scan"), environments=("main",))
# Eager torch scan re-traces its body on every call: its time differs from process to process by
# more than the 10 % a rerun must agree within (docs/measuring.md#asv), so asv times it in more.
ASV_MANY_ROUNDS = ("torch_scan",)

BUG_CLASSES = (
    # the bodies whose d body/d acc depends on x (loop_add and loop_add_sq, the controls, run in every test run)
    BugClass("s4-accumulator-jacobian", "§4 gradients (and second order) wrong when d body/d acc depends on x",
             ("loop_mul", "loop_div", "loop_sin_mul", "loop_acc_plus_acc_mul"), order=2),
    BugClass("s5-sliced-assignment-buffer", "§5 gradients lost through sliced assignment into a preallocated buffer",
             ("decay", "rnn"), ("torch_loop_setitem", "torch_loop_setitem_compiled", "torch_loop_index_put",
                                "torch_loop_index_put_compiled", "jax_loop_buffer",
                                "torch_loop_expanded_slice_scatter", "torch_loop_expanded_slice_scatter_compiled",
                                "torch_loop_expanded_index_put", "torch_loop_expanded_index_put_compiled")),
)
# fmt: on
CHART_BASELINE = "torch_loop"  # the plain Python loop every speed-up chart is relative to
# Each remat mechanism (its step recomputed in the backward) and the plain driver it is a setting of:
# the pairs whose time and step memory rnnbench.report.charts.remat_price sets side by side.
REMAT = {
    "jax_lax_scan_remat_nothing": "jax_lax_scan",
    "jax_lax_scan_remat_dots": "jax_lax_scan",
    "jax_lax_scan_remat3_nothing": "jax_lax_scan",
    "jax_lax_scan_remat3_dots": "jax_lax_scan",
    "torch_loop_checkpoint": "torch_loop",
    "torch_scan_checkpoint": "torch_scan",
    "torch_scan_checkpoint_compiled": "torch_scan_compiled",
}
# The order drivers take the charts' palette (rnnbench.report.charts.style.driver_style): each mechanism and
# the vendor layers first (distinct colours), then asv's list. It only grows, as ASV: a driver keeps
# its colour in every chart and every version.
CHART_ORDER = tuple(dict.fromkeys((*CURATED.drivers, *ASV.drivers)))
