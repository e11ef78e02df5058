"""What a run compiles once: a compiled torch row's forward reuses the program its fwd+bwd compiled
(no second, no_grad program), and `rnnbench run` keeps the frameworks' compile caches across runs
without overriding what the user set (rnnbench.machine.caches.warm_cache_env). Every compiled torch
driver of the registry is covered."""

from __future__ import annotations

import pytest

from conftest import compile_marks
from rnnbench import registry
from rnnbench.machine import caches

MODEL = "decay"  # every compiled torch configuration compiles it (rnn/lstm trip a registered bug on one)


def _compiled_torch_drivers() -> list[str]:
    return [
        name
        for name, d in registry.drivers().items()
        if d.compiled
        and d.framework.name == "torch"
        and d.autocast is None
        and "cpu" in d.devices
        and d.supports(registry.get_model(MODEL)) is None
    ]


@pytest.mark.parametrize("name", [pytest.param(n, marks=compile_marks(n)) for n in _compiled_torch_drivers()])
def test_the_forward_of_a_compiled_torch_row_compiles_nothing_new(name: str) -> None:
    torch = pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    driver = registry.get_driver(name)
    model = registry.get_model(MODEL)
    case = model.make_case(model.sizes_with_defaults({}), 0).rounded_to("float32")
    prepared = driver.prepare(model, case, "float32", "cpu")
    prepared.loss_and_grads()
    compiled_before = counters["stats"]["unique_graphs"]
    loss = prepared.forward()
    assert counters["stats"]["unique_graphs"] == compiled_before, "the forward compiled another program"
    assert torch.is_tensor(loss) and loss.requires_grad  # the training forward: graph recorded


def test_warm_cache_env_keeps_jax_programs_and_respects_the_user(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", raising=False)
    env = caches.warm_cache_env()
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "rnnbench" / "compile" / "jax")
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/elsewhere")
    assert "JAX_COMPILATION_CACHE_DIR" not in caches.warm_cache_env()


def test_every_framework_names_its_cache_variables() -> None:
    """Rows record these (environment.compile_cache): a framework that compiles must name them."""
    for framework in registry.frameworks().values():
        if framework.name in ("torch", "jax", "flax"):
            assert framework.cache_variables, framework.name
