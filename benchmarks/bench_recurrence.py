"""asv benchmarks: thin classes over the registry and rnnbench's own check and timing code.

params = models x drivers x sizes. setup() prepares the driver, runs the gradient check (a
disagreement with the oracle raises, so that benchmark fails instead of timing a wrong
computation; an inapplicable combination raises NotImplementedError, which asv shows as n/a),
then calls the forward once so that neither timed callable compiles inside the timed region.
Each timed call blocks on its result (Prepared.block).

asv (>= 0.6.6) runs every benchmark in a fresh interpreter: setup pays import + compile, hence
the timeout. Threads are pinned to 1 and compilation caches are off (see rnnbench.run.timing)
before any framework is imported, so track_first_call_s is a cold compile.
"""

import os

from rnnbench.run.environments import thread_env
from rnnbench.run.timing import cold_cache_env

os.environ.update(thread_env(1))
os.environ.update(cold_cache_env())

from rnnbench import registry  # noqa: E402
from rnnbench.run.checked import prepare_checked  # noqa: E402

# Size presets: overrides applied to each model's defaults (keys a model does not use are ignored).
SIZES = {
    "small": {},
    "medium": {"T": 64, "B": 16, "I": 64, "H": 128, "n": 32},
}
MODELS = ("rnn", "lstm", "decay", "taylor_expm", "newton_schulz")
# Every registered driver: one that cannot run in the interpreter asv uses (torch_xla drivers in the
# main environment, jax drivers in the torch_xla one) is reported n/a by setup, with its reason.
DRIVERS = tuple(registry.drivers())


class Recurrence:
    params = (list(MODELS), list(DRIVERS), list(SIZES))
    param_names = ("model", "driver", "size")
    timeout = 600.0  # import + cold compile + gradient check + timing
    warmup_time = 0.2

    def setup(self, model, driver, size):
        # The row's own framework only: importing torch for jax rows would inflate peakmem.
        registry.get_driver(driver).framework.set_threads(1)
        self.check, self.prepared = prepare_checked(model, driver, SIZES[size])
        self.prepared.block(self.prepared.forward())  # compile the forward outside the timed region

    def time_fwd(self, model, driver, size):
        self.prepared.block(self.prepared.forward())

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
