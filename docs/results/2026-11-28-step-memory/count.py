"""What each driver's training step saves for backward (rnnbench.run.memory.step_memory) at the
README CPU chart's sizes: prepare, one fwd+bwd (compiles), then the count. No timing, no oracle.

    cd docs/results/2026-11-28-step-memory && nice -n 10 ../../../.venv/bin/python count.py > counts.jsonl
"""

import json
import sys

from rnnbench import registry
from rnnbench.run.memory import step_memory
from rnnbench.suites import REALISTIC

SIZES = {"T": 512, "B": 32, "I": 512, "H": 512}

for name in ("rnn", "lstm", "lstm2"):
    model = registry.get_model(name)
    sizes = model.sizes_with_defaults(SIZES)
    case = model.make_case(sizes, 0).rounded_to("float32")
    for driver_name in REALISTIC.drivers:
        driver = registry.get_driver(driver_name)
        why = driver.why_not(model, "float32", "cpu")
        if why:
            continue
        prepared = driver.prepare(model, case, "float32", "cpu")
        prepared.block(prepared.forward_backward())
        got = step_memory(prepared)
        row = {"model": name, "driver": driver_name, "env_label": driver.framework.label(), "sizes": sizes, **got}
        print(json.dumps(row), flush=True)
        print(name, driver_name, got["saved_mb"], file=sys.stderr, flush=True)
