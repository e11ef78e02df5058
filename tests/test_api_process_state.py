"""check_recurrence leaves its caller's process as it found it (rnnbench.api.process_state;
docs/reliability.md, "What it keeps and what it touches"): jax's x64 and matmul precision, torch's default dtype,
thread counts and dynamo flags, numpy's error state, after a normal return, an exception and a
KeyboardInterrupt. Run in a fresh interpreter: another test's check in this process would already
have changed them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rnnbench.api.process_state import callers_settings_kept

SNAPSHOT = """
import jax, numpy as np, torch, torch._dynamo
import jax.numpy as jnp

def snapshot():
    return {
        "jax_enable_x64": jax.config.jax_enable_x64,
        "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
        "default_dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "dynamo": torch._dynamo.config.get_config_copy(),
        "numpy": np.geterr(),
    }
"""

CALLER = (
    SNAPSHOT
    + """
import rnnbench

def step(ops, params, carry, x):
    (h,) = carry
    if ops.name == "torch" and MODE == "interrupt":  # after the jax driver ran (x64 on)
        raise KeyboardInterrupt
    if ops.name == "torch" and MODE == "raise":
        raise RuntimeError("a step that fails on one framework")
    return (ops.tanh(params["w"] * h + x),), h

np.seterr(over="warn", divide="ignore")
before = snapshot()
for MODE in ("return", "raise", "interrupt"):
    try:
        rnnbench.check_recurrence(step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),),
                                  xs=np.ones((3, 2)), drivers=["jax_lax_scan", "torch_loop"], order=1)
    except KeyboardInterrupt:
        assert MODE == "interrupt"
    after = snapshot()
    assert after == before, (MODE, {k: (before[k], after[k]) for k in before if before[k] != after[k]})
    assert jnp.ones(2).dtype == jnp.float32, (MODE, jnp.ones(2).dtype)
print("kept")
"""
)


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)


def test_check_recurrence_leaves_the_callers_settings_as_they_were() -> None:
    """Before: after the check, x64 stayed on and the caller's jnp.ones(2) was float64."""
    proc = _run(CALLER)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("kept"), proc.stdout + proc.stderr[-3000:]


def test_each_framework_puts_back_what_its_drivers_change() -> None:
    """Every setting the framework layers change (drivers/jax/_framework.py configure, drivers/torch/_compile.py
    compiled's dynamo flags, the intra-op threads of set_threads), and any other change to those
    settings in the block, undone on exit, also when the block raises: jax first loaded inside the
    block too. (torch fixes the inter-op pool's size once it is set: check_recurrence never sets it,
    which the test above checks.)"""
    script = (
        textwrap.dedent(
            """
        import numpy as np
        from rnnbench.api.process_state import callers_settings_kept
        from rnnbench.drivers.jax import _framework as _jax
        from rnnbench.drivers.torch import _framework as _torch
        with callers_settings_kept():
            _jax.configure()  # jax loaded here for the first time: put back to its defaults
        import jax
        assert not jax.config.jax_enable_x64 and jax.config.jax_default_matmul_precision is None
        """
        )
        + textwrap.dedent(SNAPSHOT)
        + textwrap.dedent(
            """
        before = snapshot()
        try:
            with callers_settings_kept():
                _jax.configure()
                torch.set_num_threads(1)
                torch.set_default_dtype(torch.float64)
                torch._dynamo.config.capture_scalar_outputs = not torch._dynamo.config.capture_scalar_outputs
                np.seterr(all="raise")
                raise ValueError("the check failed")
        except ValueError:
            pass
        after = snapshot()
        assert after == before, {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        print("kept")
        """
        )
    )
    proc = _run(script)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("kept"), proc.stdout + proc.stderr[-3000:]


def test_numpy_error_state_is_kept_in_this_process() -> None:
    before = np.geterr()
    with pytest.raises(KeyboardInterrupt), callers_settings_kept():
        np.seterr(all="raise")
        raise KeyboardInterrupt
    assert np.geterr() == before
