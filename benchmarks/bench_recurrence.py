"""asv benchmarks: thin classes over rnnbench's own check and timing code, with STABLE parameters.

Parameters are literal names (rnnbench.suites: ASV, CURATED), read from src/rnnbench/suites.py of the
checkout these files are in, never from the installed package: asv discovers the parameter list
once per run, then runs each benchmark at every commit, with these files and that commit's
installed rnnbench, *by its index in that list*. A list built from the installed registry differs
from commit to commit (a commit that adds a driver shifts every later name), so results were filed
under the wrong driver and `asv compare` reported false 869x "regressions" between commits where
only the registry grew. With the checkout's lists the index means the same (model, driver, size)
at every commit; a name that the installed rnnbench does not have raises NotImplementedError in
setup (asv shows n/a). How to edit the lists: rnnbench.suites, above ASV.

Three classes:
  Curated     one driver per mechanism on rnn and lstm at the small size, time_fwd_bwd only: the
              set for `asv continuous` (select with `-b Curated`, which also selects
              CuratedManyRounds, the drivers that need more processes), minutes a commit
              (measured: docs/measuring.md#asv).
  Recurrence  the full matrix models x drivers x sizes with fwd / fwd+bwd time, peak memory,
              gradient error and cold first call: nightly-style runs.
  Roads       every other road to the derivatives (rnnbench.modes.ROADS: one JVP, torch's dual
              tensors, torch.func.grad, per-example gradients by vmap, by a loop over the examples, by
              the batched-loss trick) on the full matrix's models and drivers, small size: each checked
              as `rnnbench run --roads` checks it; a road a driver does not offer is n/a with its reason.

setup() prepares the driver and runs the gradient check (a disagreement with the oracle raises
GradientDisagreement, so that benchmark FAILS instead of timing a wrong computation; an
inapplicable combination raises NotImplementedError, n/a), then calls the forward once so that
neither timed callable compiles inside the timed region. asv re-runs setup before every timed
sample; the checked, compiled driver is kept per process (_checked), so a re-run costs a dict
look-up and every sample times the same compiled code. Each timed call blocks on its result.

asv (>= 0.6.6) runs every benchmark in a fresh interpreter: the first setup pays import + compile,
hence the timeout. Threads are 1 and compilation caches are off (see
rnnbench.machine.caches) before any framework is imported, so track_first_call_s is a cold compile.
"""

import importlib.util
import os
import sys
import time
from pathlib import Path

try:  # an rnnbench too old for these entry points: every benchmark is n/a, with the reason
    from rnnbench.machine.caches import cold_cache_env
    from rnnbench.machine.environments import thread_env

    os.environ.update(thread_env(1))
    os.environ.update(cold_cache_env())

    from rnnbench import registry
    from rnnbench.rows.checked import prepare_checked, prepare_road

    _MISSING_API = None
except ImportError as exc:  # pragma: no cover - only on old commits
    _MISSING_API = f"this rnnbench version lacks the benchmark entry points: {exc}"


def _suites_of_this_checkout():
    """src/rnnbench/suites.py beside these benchmarks, loaded by its path: the same file at every
    commit asv measures (it imports nothing from rnnbench)."""
    path = Path(__file__).resolve().parents[1] / "src" / "rnnbench" / "suites.py"
    spec = importlib.util.spec_from_file_location("rnnbench_suites_of_this_checkout", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look up the module of the classes they build
    spec.loader.exec_module(module)
    return module


SUITES = _suites_of_this_checkout()
# Size presets: overrides applied to each model's defaults (keys a model does not use are ignored).
SIZES = {
    "small": {},
    "medium": {"T": 64, "B": 16, "I": 64, "H": 128, "n": 32},
}
MODELS, DRIVERS, ROADS = SUITES.ASV.models, SUITES.ASV.drivers, SUITES.ASV_ROADS
# The curated set: each mechanism once, on the two core recurrences, small size; the vendor layer
# and the flax cell are the model's own class, so a different driver name per model.
CURATED = {model: SUITES.curated(model) for model in SUITES.CURATED.models}
CURATED_MODELS = tuple(CURATED)
CURATED_MANY_ROUNDS = SUITES.ASV_MANY_ROUNDS  # timed by CuratedManyRounds, in more processes
CURATED_DRIVERS = tuple(
    dict.fromkeys(d for drivers in CURATED.values() for d in drivers if d not in CURATED_MANY_ROUNDS)
)

# (model, driver, size) -> (Check, Prepared), filled by the first setup of this process.
_checked = {}

# The clock Curated reads, chosen per row in setup (see Curated). One benchmark per process.
_clock = time.perf_counter


def curated_timer():
    """Curated's timer: process CPU time for rows whose framework computes on the calling thread
    (Framework.cpu_time_clock: torch), wall time for the others (jax; set by setup)."""
    return _clock()


def known(model, driver):
    """Raise NotImplementedError (asv: n/a) where this rnnbench lacks the entry points, the model or
    the driver; else pin the row's own framework to one thread (importing torch for jax rows would
    inflate peakmem)."""
    if _MISSING_API is not None:
        raise NotImplementedError(_MISSING_API)
    if model not in registry.models():
        raise NotImplementedError(f"model {model!r} is not registered in this rnnbench version")
    if driver not in registry.drivers():
        raise NotImplementedError(f"driver {driver!r} is not registered in this rnnbench version")
    registry.drivers()[driver].framework.set_threads(1)


def checked(model, driver, size):
    """The gradient-checked, compiled driver for one benchmark, prepared once per process.

    Raises NotImplementedError (asv: n/a) when this rnnbench has no such model or driver or the
    driver cannot run it here, and GradientDisagreement (the benchmark fails) when its gradients
    disagree with the oracle."""
    key = (model, driver, size)
    if key not in _checked:
        known(model, driver)
        check, prepared = prepare_checked(model, driver, sizes=SIZES[size])
        prepared.block(prepared.forward())  # compile the forward outside the timed region
        _checked[key] = (check, prepared)
    return _checked[key]


class Curated:
    """One driver per mechanism (torch loop eager/compiled, torch scan eager/compiled, jax loop,
    lax.scan, flax nn.scan, the torch.nn vendor layer, the flax cell) on rnn and lstm, small size:
    forward+backward time. For `asv continuous -b Curated`; the full matrix is Recurrence.

    Settings chosen by running one commit twice and comparing (the runs and their agreement:
    docs/measuring.md#asv):
    - every sample is ONE call (this asv re-runs setup before each timed call anyway), and the
      value is the median of many samples per round, after warm-up calls, in 2 processes (rounds;
      each compiles cold, so more rounds cost a cold compile per compiled row each);
    - the clock: a row whose framework computes on the calling thread (Framework.cpu_time_clock:
      torch) is timed in process CPU time, which does not grow while other jobs hold the core; the
      others (jax: the runtime's own threads, whose waits spin) in wall time, where their CPU time
      swings more.
    """

    params = (list(CURATED_MODELS), list(CURATED_DRIVERS))
    param_names = ("model", "driver")
    timeout = 600.0  # import + cold compile + gradient check + timing
    rounds = 2
    number = 1
    repeat = (20, 10000, 3.0)  # (min samples, max samples, seconds of samples) per round
    min_run_count = 1
    warmup_time = 0.3
    sample_time = 0.01  # unused while number is fixed; stated so no default is implied
    timer = staticmethod(curated_timer)

    def setup(self, model, driver):
        global _clock
        if driver not in CURATED.get(model, ()):
            raise NotImplementedError(f"{driver} is not in the curated set for {model}")
        self.prepared = checked(model, driver, "small")[1]
        _clock = time.process_time if registry.drivers()[driver].framework.cpu_time_clock else time.perf_counter

    def time_fwd_bwd(self, model, driver):
        self.prepared.block(self.prepared.forward_backward())


class CuratedManyRounds(Curated):
    """The curated drivers of CURATED_MANY_ROUNDS, as Curated but in 8 rounds (fresh processes) of
    at least 10 samples and 1.5 s each: the median over 8 processes is what a rerun reproduces.
    Selected by `-b Curated` with the rest."""

    params = (list(CURATED_MODELS), list(CURATED_MANY_ROUNDS))
    rounds = 8
    repeat = (10, 10000, 1.5)


class Recurrence:
    """The full matrix: MODELS x DRIVERS x SIZES (nightly-style; hours on 2 cores)."""

    params = (list(MODELS), list(DRIVERS), list(SIZES))
    param_names = ("model", "driver", "size")
    timeout = 600.0  # import + cold compile + gradient check + timing
    rounds = 2
    number = 1
    repeat = (10, 1000, 2.0)
    min_run_count = 1
    warmup_time = 0.3

    def setup(self, model, driver, size):
        self.check, self.prepared = checked(model, driver, size)

    def time_fwd(self, model, driver, size):
        self.prepared.block(self.prepared.forward())

    # torch rows' forward became the training forward (grad enabled); a new version keeps asv from
    # comparing it with the earlier no_grad numbers (the value is a key of asv's history: unchanged).
    time_fwd.version = "training-forward-2026-11-25"

    def time_fwd_bwd(self, model, driver, size):
        self.prepared.block(self.prepared.forward_backward())

    def peakmem_fwd_bwd(self, model, driver, size):
        self.prepared.block(self.prepared.forward_backward())

    def track_grad_error(self, model, driver, size):
        return self.check.max_rel_error

    track_grad_error.unit = "relative error"

    def track_first_call_s(self, model, driver, size):
        """Trace + compile + one run of forward+backward, in a fresh process with caches off."""
        return self.check.first_call_s

    track_first_call_s.unit = "seconds"


# (model, driver, road) -> (prepared, program), filled by the first setup of this process.
_roads = {}


class Roads:
    """Every road besides vjp (ROADS) on MODELS x DRIVERS at the small size: the road's timed program,
    after the row of the mode that checks it and the road's own check against that row
    (rnnbench.rows.checked.prepare_road). n/a, with the reason, where the driver cannot run the mode
    or offers no such program (func and dual tensors are torch's; per-example roads need a batch)."""

    params = (list(MODELS), list(DRIVERS), list(ROADS))
    param_names = ("model", "driver", "road")
    timeout = 600.0
    rounds = 2
    number = 1
    repeat = (10, 1000, 2.0)
    min_run_count = 1
    warmup_time = 0.3

    def setup(self, model, driver, road):
        key = (model, driver, road)
        if key not in _roads:
            known(model, driver)
            _, prepared, program, _ = prepare_road(model, driver, road, sizes=SIZES["small"])
            prepared.block(program())  # the program's own compile outside the timed region
            _roads[key] = (prepared, program)
        self.prepared, self.program = _roads[key]

    def time_road(self, model, driver, road):
        self.prepared.block(self.program())
