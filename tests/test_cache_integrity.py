"""Caches are evidence, never authority: an entry of the hand-oracle cache (rnnbench.check.oracles.oracle_cache)
or of a GEMM-peak cache (rnnbench.machine.peak_cache) that was edited, cut short, flipped, of
another shape or implausible is computed again, with one line on stderr, and replaced; a verdict
never follows a tampered entry (a planted wrong gradient stays grad_mismatch after the cache is
edited to agree with it); an edit to a helper module the oracle's module imports is a new key; and
the record names where its oracle came from (oracle_source)."""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rnnbench import losses, record_fields, registry
from rnnbench.check.oracles import oracle_cache
from rnnbench.check.oracles.oracle import oracle_grads
from rnnbench.check.verdicts.judge import judge
from rnnbench.machine import device_peak, peak_cache, roofline
from rnnbench.model import reference_loss
from rnnbench.status import Status


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(oracle_cache, "STORE_AFTER_S", 0.0)  # keep even the small cases of a test
    return tmp_path / "rnnbench" / "oracles"


def _rnn(name: str = "rnn"):
    model = registry.get_model(name)
    case = model.make_case(model.sizes_with_defaults({"T": 4, "B": 2, "I": 3, "H": 4}), 0)
    return losses.with_loss(model, case, losses.MODEL_LOSS)


def _planted(grads: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A driver's wrong gradient: one entry 1 % off, far beyond float64's tolerance."""
    wrong = {n: np.array(g, dtype=np.float64) for n, g in grads.items()}
    first = sorted(wrong)[0]
    wrong[first].flat[0] *= 1.01
    return wrong


def _verdict(model, case, grads) -> str:
    return str(
        judge(
            model, case, "float64", device="cpu", driver_name="planted", produced=(reference_loss(model, case), grads)
        ).status
    )


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {n: np.array(data[n]) for n in data.files}


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _values_edited(path: Path, wrong: dict) -> None:
    """The gradients replaced by the planted ones; the key and hash left as they were."""
    _save(path, {**_load(path), **wrong})


def _hash_recomputed_wrongly(path: Path, wrong: dict) -> None:
    """The gradients replaced, and a hash recomputed by another recipe (over the values alone)."""
    arrays = {**_load(path), **wrong}
    meta = json.loads(str(arrays[oracle_cache.META][()]))
    meta["sha256"] = hashlib.sha256(b"".join(wrong[n].tobytes() for n in sorted(wrong))).hexdigest()
    _save(path, {**arrays, oracle_cache.META: np.array(json.dumps(meta))})


def _truncated(path: Path, wrong: dict) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _bit_flipped(path: Path, wrong: dict) -> None:
    """One bit of one gradient's bytes flipped in the file."""
    data = bytearray(path.read_bytes())
    grads = _load(path)
    name = sorted(n for n in grads if n != oracle_cache.META)[0]
    at = bytes(data).index(grads[name].tobytes()) + 3
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def _consistent(path: Path, arrays: dict) -> None:
    """`arrays` with a key and a hash recomputed correctly: only the checks beside the hash can catch it."""
    key = path.stem
    meta = {"format": oracle_cache.FORMAT, "key": key, "sha256": oracle_cache.content_hash(key, arrays)}
    _save(path, {**arrays, oracle_cache.META: np.array(json.dumps(meta))})


def _wrong_shape(path: Path, wrong: dict) -> None:
    grads = {n: g for n, g in _load(path).items() if n != oracle_cache.META}
    name = sorted(grads)[0]
    _consistent(path, {**grads, name: np.concatenate([grads[name].ravel(), [0.0]])})


def _wrong_dtype(path: Path, wrong: dict) -> None:
    grads = {n: g for n, g in _load(path).items() if n != oracle_cache.META}
    name = sorted(grads)[0]
    _consistent(path, {**grads, name: wrong[name].astype(np.float32)})


def _without_hash(path: Path, wrong: dict) -> None:
    """The planted gradients alone, as an entry written before entries carried a hash."""
    _save(path, wrong)


TAMPERINGS: dict[str, Callable[[Path, dict], None]] = {
    "values_edited_hash_left": _values_edited,
    "values_edited_hash_recomputed_wrongly": _hash_recomputed_wrongly,
    "truncated": _truncated,
    "bit_flipped": _bit_flipped,
    "wrong_shape": _wrong_shape,
    "wrong_dtype": _wrong_dtype,
    "without_hash": _without_hash,
}


def _lines(err: str, start: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(start)]


@pytest.mark.parametrize("how", TAMPERINGS)
def test_a_tampered_oracle_entry_is_recomputed_and_the_verdict_stands(
    how: str, cache: Path, capsys: pytest.CaptureFixture
) -> None:
    model, case = _rnn()
    truth = oracle_grads(model, case)
    key = oracle_cache.cache_key(model, case)
    path = cache / f"{key}.npz"
    assert truth.source == "computed" and path.is_file()
    wrong = _planted(dict(truth.grads))
    assert _verdict(model, case, wrong) == Status.GRAD_MISMATCH  # from the entry as written
    TAMPERINGS[how](path, wrong)
    capsys.readouterr()
    again = oracle_grads(model, case)
    assert again.source == f"recomputed:{key}"
    assert all(np.array_equal(again.grads[n], truth.grads[n]) for n in truth.grads)
    (line,) = _lines(capsys.readouterr().err, "rnnbench: ")
    assert line.startswith(f"rnnbench: oracle cache entry {key} failed verification (") and line.endswith(
        "); recomputed"
    )
    # replaced: the entry verifies again, holds the computed answer, and is read without a word
    kept = oracle_cache.read_entry(path, key, model, case)
    assert kept is not None and all(np.array_equal(kept[n], truth.grads[n]) for n in truth.grads)
    assert not list(cache.glob("*.tmp*"))
    assert oracle_grads(model, case).source == f"cache:{key}" and capsys.readouterr().err == ""
    # the cache tampered to agree with a wrong driver: that driver stays grad_mismatch, a right one ok
    TAMPERINGS[how](path, wrong)
    assert _verdict(model, case, wrong) == Status.GRAD_MISMATCH
    TAMPERINGS[how](path, wrong)
    assert _verdict(model, case, dict(truth.grads)) == Status.OK
    assert len(_lines(capsys.readouterr().err, "rnnbench: oracle cache entry")) == 2


HELPER_USES = {
    "module_attribute": ("import cache_probe_helper", "cache_probe_helper.SCALE"),
    "imported_constant": ("from cache_probe_helper import SCALE", "SCALE"),
}
PLUGIN = """
import dataclasses

{imports}
from rnnbench_models import rnn


def oracle(case):
    return {{n: g * {scale} for n, g in rnn.oracle(case).items()}}


MODELS = (dataclasses.replace(rnn.MODELS[0], name="cache_probe_rnn", oracle=oracle),)
"""


@pytest.mark.parametrize("use", HELPER_USES)
def test_an_edit_to_a_helper_module_the_oracle_imports_is_a_new_key(
    use: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A plugin model (RNNBENCH_PLUGINS) whose oracle reads a constant of a helper module it imports:
    the helper edited, the oracle is computed anew, never the stale entry read."""
    imports, scale = HELPER_USES[use]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "cache_probe_models.py").write_text(PLUGIN.format(imports=imports, scale=scale))
    base_model, base_case = _rnn()
    base = base_model.oracle(base_case)
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.setenv("RNNBENCH_PLUGINS", "cache_probe_models")
    # The helper is rewritten within one second at one size: Python's bytecode cache (mtime and size) would
    # run the first version again. That is Python's cache, not the oracle cache this test is about.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    got = []
    for factor in (1.0, 2.0):
        (plugins / "cache_probe_helper.py").write_text(f"SCALE = {factor}\n")
        for name in ("cache_probe_models", "cache_probe_helper"):
            monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.invalidate_caches()  # a file written since the folder was listed is found
        registry.models.cache_clear()
        model, case = _rnn("cache_probe_rnn")
        answer = oracle_grads(model, case)
        assert answer.source == "computed"  # a new key each time: no entry read, nothing failed
        assert all(np.allclose(answer.grads[n], factor * base[n], rtol=0, atol=0) for n in base)
        got.append(oracle_cache.cache_key(model, case))
    registry.models.cache_clear()
    assert got[0] != got[1] and len(list(cache.glob("*.npz"))) == 2
    assert capsys.readouterr().err == ""


def test_the_key_covers_the_helper_modules_of_the_models_module() -> None:
    """rnnbench_models/rnn.py imports rnnbench_models/_common.py (rng_for, uniform): both in the key."""
    model, _ = _rnn()
    files = {Path(f).name for f in oracle_cache._module_files(model)}
    assert {"rnn.py", "_common.py", "model.py", "losses.py", "ops.py"} <= files


def test_the_record_names_where_its_oracle_came_from(cache: Path) -> None:
    """A run row's oracle_source: computed, then the cache's key; a tampered entry agreeing with a
    planted wrong driver is recomputed, and the row stays grad_mismatch."""
    pytest.importorskip("torch")
    from rnnbench.machine.environments import current
    from rnnbench.rows.pair import PairPlan, check_pair
    from rnnbench.rows.row import Job, run_row

    mp = pytest.MonkeyPatch()
    mp.setenv("RNNBENCH_PLUGINS", "rnnbench_plants")
    registry.drivers.cache_clear()
    try:
        plant = "plant_zeroed_carry_cotangent"
        job = Job(model="rnn", driver=plant, dtype="float64", time=False, environment=current())
        first = run_row(job)
        assert first["status"] == Status.GRAD_MISMATCH and first["oracle_source"] == "computed"
        second = run_row(job)
        (path,) = cache.glob("*.npz")
        assert second["oracle_source"] == f"cache:{path.stem}" and second["status"] == Status.GRAD_MISMATCH
        model = registry.get_model("rnn")
        model, case = losses.with_loss(model, model.make_case(model.sizes_with_defaults({}), 0), job.loss_form)
        pair = check_pair(model, registry.get_driver(job.driver), case, dtype="float64", device="cpu", plan=PairPlan())
        _values_edited(path, {n: np.asarray(g, dtype=np.float64) for n, g in pair.check.grads.items()})
        third = run_row(job)
        assert third["status"] == Status.GRAD_MISMATCH and third["oracle_source"] == f"recomputed:{path.stem}"
    finally:
        mp.undo()
        registry.drivers.cache_clear()
    for rec in (first, second, third):
        assert record_fields.problem(rec) is None
    old = {k: v for k, v in first.items() if k != "oracle_source"}  # written before the field
    assert record_fields.problem(old) is None
    assert "oracle_source" in record_fields.problem({**first, "oracle_source": 3})


# --- the GEMM-peak caches ---------------------------------------------------------------------------


def _fake(calls: list, rate: float = 5.0) -> Callable:
    def measure(request: dict, python: str, timeout_s: float) -> dict:
        calls.append(request)
        shapes = {"x".join(map(str, s)): rate for s in request["shapes"]}
        return {"by_framework": {"numpy": shapes}, "errors": {}, "others_on_cpus": 0.0, "accelerator": {}}

    return measure


def _entry_edit(change: Callable[[dict], None], reseal: bool) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        cache = json.loads(path.read_text())
        for key_text, entry in cache["entries"].items():
            change(entry)
            if reseal:
                peak_cache.sealed(key_text, entry)
        path.write_text(json.dumps(cache))

    return edit


def _every_rate(value: float) -> Callable[[dict], None]:
    def change(entry: dict) -> None:
        for rates in entry["by_framework"].values():
            for shape in rates:
                rates[shape] = value

    return change


def _rehashed_wrongly(entry: dict) -> None:
    _every_rate(50.0)(entry)
    body = {k: v for k, v in entry.items() if k != "sha256"}
    entry["sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()  # the key left out


def _peak_bit_flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[data.index(b"5.0") + 2] ^= 0x01  # a rate's digit: 5.0 -> 5.1
    path.write_bytes(bytes(data))


def _peak_truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


PEAK_TAMPERINGS: dict[str, Callable[[Path], None]] = {
    "rate_edited_hash_left": _entry_edit(_every_rate(50.0), reseal=False),
    "rate_edited_hash_recomputed_wrongly": _entry_edit(_rehashed_wrongly, reseal=False),
    "rate_absurd": _entry_edit(_every_rate(1e15), reseal=True),
    "rate_infinite": _entry_edit(_every_rate(math.inf), reseal=True),
    "rate_nan": _entry_edit(_every_rate(math.nan), reseal=True),
    "measured_in_the_future": _entry_edit(lambda e: e.update(measured_epoch=e["measured_epoch"] + 1e9), reseal=True),
    "others_on_cpus_infinite": _entry_edit(lambda e: e.update(others_on_cpus=math.inf), reseal=True),
    "without_hash": _entry_edit(lambda e: e.pop("sha256"), reseal=False),
    "truncated": _peak_truncated,
    "bit_flipped": _peak_bit_flipped,
}


@pytest.mark.parametrize("how", PEAK_TAMPERINGS)
def test_a_tampered_cpu_peak_is_measured_again(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(roofline, "_measure_in_worker", _fake(calls))
    roofline.peak_for("float32", 1, sizes=[], cpus=[0])
    path = roofline.peak_cache_path()
    PEAK_TAMPERINGS[how](path)
    capsys.readouterr()
    peak = roofline.peak_for("float32", 1, sizes=[], cpus=[0])
    assert len(calls) == 2 and len(calls[1]["shapes"]) == len(roofline.PEAK_SQUARE)  # every shape again
    assert peak["gflops"] == 5.0  # the measurement's, never the tampered value
    (line,) = _lines(capsys.readouterr().err, "rnnbench: ")
    assert line.startswith("rnnbench: GEMM peak cache entry ") and "failed verification (" in line
    assert line.endswith("); measured again")
    (key_text,) = (entries := json.loads(path.read_text())["entries"])
    assert peak_cache.verify_entry(key_text, entries[key_text]) == ""  # replaced, whole and verified
    assert roofline.peak_for("float32", 1, sizes=[], cpus=[0]) == peak and len(calls) == 2
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("how", ["rate_edited_hash_left", "rate_absurd", "rate_infinite"])
def test_a_tampered_gpu_peak_is_measured_again(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(device_peak, "measure_in_worker", _fake(calls, rate=900.0))
    device_peak.peak_for("float32", "cuda", sizes=[], python=sys.executable)
    PEAK_TAMPERINGS[how](device_peak.cache_path())
    assert device_peak._cached_identity("cuda") is None  # an entry that fails verification tells nothing
    capsys.readouterr()
    peak = device_peak.peak_for("float32", "cuda", sizes=[], python=sys.executable)
    assert len(calls) == 2 and peak["gflops"] == 900.0
    assert len(_lines(capsys.readouterr().err, "rnnbench: GEMM peak cache entry ")) == 1


def test_a_tampered_peak_is_not_taken_while_another_process_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(roofline, "_measure_in_worker", _fake([]))
    roofline.peak_for("float32", 1, sizes=[], cpus=[0])
    path = roofline.peak_cache_path()
    PEAK_TAMPERINGS["rate_absurd"](path)
    (key_text,) = json.loads(path.read_text())["entries"]
    with pytest.raises(RuntimeError, match="failed verification"):
        peak_cache.without_waiting(path, key_text)
