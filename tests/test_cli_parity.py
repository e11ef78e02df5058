"""The rows `rnnbench run` plans are pinned: the default run's rows (model, driver, environment,
dtype, device, sizes, seed, timing, loss form, order) with each row's unavailable reason, and a
digest of the rows of the other suites, compared with tests/data/run_plan.json. A change to suite
policy or job planning must show up here as a deliberate edit of that file
(`python tests/test_cli_parity.py > tests/data/run_plan.json`), never as a side effect. The pin
covers the models and drivers the file names: a new model or driver configuration adds rows of its
own and leaves the pinned ones as they were (docs/architecture.md: one row and nothing else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXPECTED = Path(__file__).parent / "data" / "run_plan.json"
SUITES = ("--suite core --dtypes float32,float64", "--suite bugs", "--suite all")

# Run in a fresh process without RNNBENCH_PLUGINS: the registry holds exactly the shipped models
# and drivers. Threads are left out (all the cores of the machine running it).
PLAN = """
import hashlib, json, sys
from rnnbench import registry
from rnnbench.cli import options
from rnnbench.cli.main import parser
from rnnbench.planning import plan
from rnnbench.rows.pair import unavailable_reason

PINNED = json.loads(sys.argv[1])  # {"models": [...], "drivers": [...]}, or {} for every registered one
models = set(PINNED.get("models") or registry.models())
drivers = set(PINNED.get("drivers") or registry.drivers())

def planned(flags):
    rows = []
    for job in plan.jobs(options.settings(parser().parse_args(["run", *flags]))):
        if job.model not in models or job.driver not in drivers:
            continue
        row = job.to_dict()
        row.pop("threads")
        rows.append((job, row))
    return rows

default = []
for job, row in planned([]):
    model, driver = registry.get_model(job.model), registry.get_driver(job.driver)
    row["unavailable"] = unavailable_reason(model, driver, **job.where())
    default.append(row)
digests = {}
for flags in sys.argv[2:]:
    rows = [json.dumps(row, sort_keys=True) for _, row in planned(flags.split())]
    digests[flags] = {"rows": len(rows), "sha256": hashlib.sha256("\\n".join(rows).encode()).hexdigest()}
pinned = {"models": sorted(models), "drivers": sorted(drivers)}
print(json.dumps({"default": default, "suites": digests, "pinned": pinned}, indent=1, sort_keys=True))
"""


def plan(pinned: dict) -> str:
    """The planned rows of the models and drivers `pinned` names ({}: every registered one)."""
    env = {k: v for k, v in os.environ.items() if k != "RNNBENCH_PLUGINS"}
    argv = [sys.executable, "-c", PLAN, json.dumps(pinned), *SUITES]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_planned_rows_are_unchanged() -> None:
    from rnnbench.machine.environments import current

    if current() != "main":
        pytest.skip("the unavailable reasons pinned are those of the main environment")
    want = json.loads(EXPECTED.read_text())
    got = json.loads(plan(want["pinned"]))
    assert got["suites"] == want["suites"]
    assert len(got["default"]) == len(want["default"])
    for g, w in zip(got["default"], want["default"]):
        assert g == w


if __name__ == "__main__":
    print(plan({}), end="")
