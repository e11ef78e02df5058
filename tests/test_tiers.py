"""The slow tier's table (tests/conftest.py SLOW_TESTS) names tests that exist: a renamed test must not
drop out of the tier silently, and the generated pairs keep a fast tier on the quick suite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SLOW_TESTS, model_driver_pairs, slow_pair
from rnnbench import registry
from rnnbench.machine.environments import current, runs
from rnnbench.suites import QUICK

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("prefix", sorted(SLOW_TESTS))
def test_every_slow_entry_names_a_test_that_exists(prefix: str) -> None:
    path, _, rest = prefix.partition("::")
    source = ROOT / path
    assert source.is_file(), f"{prefix}: no such file"
    name = re.split(r"[\[:]", rest)[0] if rest else ""
    if name:
        assert re.search(rf"^def {re.escape(name)}\(", source.read_text(), re.M), f"{prefix}: no test {name}"


def test_the_fast_tier_keeps_every_quick_model_on_an_eager_driver() -> None:
    fast = {p.values[0] for p in model_driver_pairs() if not any(m.name == "slow" for m in p.marks)}
    assert fast == set(QUICK.models)


def test_inductor_compiles_and_bug_class_drivers_are_slow() -> None:
    rnn = registry.models()["rnn"]
    for driver in registry.drivers().values():
        if driver.supports(rnn) is not None:
            continue
        inductor = driver.slow_to_compile
        if inductor or driver.suite != "core":
            assert slow_pair(rnn, driver), driver.name


def test_rows_parametrized_by_driver_follow_the_pairs_rule() -> None:
    """The registry's witnesses and the reference cases take their tier from the same rule: an
    inductor driver's rows are slow, any other driver's are not."""
    from conftest import compile_marks

    for driver in registry.drivers().values():
        assert bool(compile_marks(driver.name)) == driver.slow_to_compile, driver.name


def test_unrolled_xla_lstm_programs_are_slow_and_those_drivers_keep_fast_pairs() -> None:
    from conftest import CELL_STATE_MODELS, UNROLLED_XLA_DRIVERS

    pairs = {(p.values[0], p.values[1]): any(m.name == "slow" for m in p.marks) for p in model_driver_pairs()}
    for driver in UNROLLED_XLA_DRIVERS:
        assert all(pairs[(model, driver)] for model in CELL_STATE_MODELS if (model, driver) in pairs), driver
        assert any(not slow for (model, d), slow in pairs.items() if d == driver), f"{driver} left the fast tier"


def test_second_order_thinning_keeps_every_driver_on_the_quick_models_it_runs() -> None:
    """conftest.thinned_second_order_pair: only bug-class drivers lose models, never a quick one; each keeps H v on
    every quick model it supports; the core drivers keep every model."""
    from conftest import second_order_pairs, thinned_second_order_pair

    models, drivers = registry.models().values(), [d for d in registry.drivers().values() if d.second_order]
    thinned = {(m.name, d.name) for m in models for d in drivers if thinned_second_order_pair(m, d)}
    assert thinned, "the rule thins nothing: remove it and its docs"
    assert all(registry.get_driver(d).suite == "bugs" and m not in QUICK.models for m, d in thinned)
    kept = {(p.values[0], p.values[1]) for p in second_order_pairs()}
    for d in drivers:
        if not runs(d, current()):
            continue
        quick = {m.name for m in map(registry.get_model, QUICK.models) if m.suite == "core" and d.supports(m) is None}
        assert {(m, d.name) for m in quick} <= kept, d.name
        if d.suite == "core":
            assert not any(name == d.name for _, name in thinned), d.name


def test_thinned_pairs_are_named_and_every_mechanism_stays() -> None:
    """The thinning of the generated pairs (conftest.thinned_pair): only its two families, never a quick-suite
    model; each variant kind still meets the compiled loop on two or more models, each compiled bug-class
    driver every quick model."""
    from conftest import UNROLLED_COMPILED_LOOPS, VARIANT_SEPARATOR, thinned_pair

    models, drivers = registry.models().values(), registry.drivers().values()
    thinned = {(m.name, d.name) for m in models for d in drivers if thinned_pair(m, d)}
    assert thinned, "the rule thins nothing: remove it and its docs"
    bug_class_compiled = {d.name for d in drivers if d.suite == "bugs" and d.compiled}
    assert {d for _, d in thinned} <= UNROLLED_COMPILED_LOOPS | bug_class_compiled
    assert all(VARIANT_SEPARATOR in m for m, d in thinned if d in UNROLLED_COMPILED_LOOPS)
    assert not any(m.partition(VARIANT_SEPARATOR)[0] in QUICK.models for m, _ in thinned)
    for name in bug_class_compiled:  # each still meets every quick model it supports, or every model where it runs none
        driver = registry.get_driver(name)
        kept = {p.values[0] for p in model_driver_pairs() if p.values[1] == name}
        want = {m for m in QUICK.models if driver.supports(registry.get_model(m)) is None} or {
            m.name
            for m in models
            if VARIANT_SEPARATOR not in m.name
            and driver.supports(m) is None
            and runs(driver, current())
            and "cpu" in driver.devices
        }
        assert want and want <= kept, (name, kept)
    generated = {(p.values[0], p.values[1]) for p in model_driver_pairs()}
    for loop in UNROLLED_COMPILED_LOOPS:
        kinds: dict[str, int] = {}
        for model, driver in generated:
            if driver == loop and VARIANT_SEPARATOR in model:
                kind = model.partition(VARIANT_SEPARATOR)[2]
                kinds[kind] = kinds.get(kind, 0) + 1
        every_kind = {m.name.partition(VARIANT_SEPARATOR)[2] for m in models if VARIANT_SEPARATOR in m.name}
        supported = {
            k
            for k in every_kind
            if any(
                m.name.endswith(VARIANT_SEPARATOR + k)
                and registry.get_driver(loop).supports(m) is None
                and m.name.partition(VARIANT_SEPARATOR)[0] in QUICK.models
                for m in models
            )
        }
        assert supported and all(kinds.get(k, 0) >= 2 for k in supported), (loop, kinds)
