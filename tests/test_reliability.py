"""The reliability matrix (tests/reliability_cases.py): every bad input, bad file and refused write
is one line and exit 2 with nothing changed; files that are fine are read; a closed pipe is no
traceback. Then properties: any bytes as a results file and any TOML document as a config give a
clean outcome and never change a file they refuse."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability_cases import CASES, QUICK, problems, run_case, snapshot
from rnnbench import cli
from rnnbench.planning.settings import CONFIG_KEYS


def test_the_matrix_is_large_and_its_ids_unique() -> None:
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, tmp_path: Path) -> None:
    seen = run_case(case, tmp_path)
    assert problems(case, seen) == [], seen.summary + "\n" + seen.stderr


def _main(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.err


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _clean(code: int, err: str) -> None:
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rnnbench: error:"), err


record_like = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["rnn", "lstm"]),
        "driver": st.sampled_from(["torch_loop", "jax_loop"]),
        "dtype": st.just("float32"),
        "status": st.sampled_from(["ok", "grad_mismatch", "crash"]),
    },
    optional={
        "max_rel_error": st.one_of(st.none(), st.floats(), st.text(max_size=3)),
        "sizes": st.dictionaries(st.sampled_from("TBH"), st.one_of(st.integers(), st.text(max_size=2))),
        "machine": st.one_of(
            st.text(max_size=3), st.fixed_dictionaries({"hostname": st.one_of(st.text(), st.integers())})
        ),
        "fwd_bwd": st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["median_ms", "q1_ms", "q3_ms"]), st.one_of(st.floats(), st.text(max_size=2))
            ),
        ),
    },
)
results_bytes = st.one_of(
    st.binary(max_size=400),
    st.lists(st.one_of(record_like.map(json.dumps), st.text(max_size=30)), max_size=5).map(
        lambda lines: "\n".join(lines).encode()
    ),
)


@PROPERTY
@given(data=results_bytes)
def test_any_bytes_as_a_results_file(data: bytes, tmp_path: Path, capsys) -> None:
    """table, report and run --resume on any bytes: exit 0 or one line and exit 2, no traceback;
    a refused file keeps its bytes, an accepted one only loses an incomplete last line."""
    path = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(data)
    for argv in (
        ["table", str(path)],
        ["report", str(path), "--out-dir", str(tmp_path / "rep")],
        ["run", *QUICK, "--resume", "--out", str(path)],
    ):
        before = path.read_bytes()
        code, err = _main(argv, capsys)
        _clean(code, err)
        after = path.read_bytes()
        if code == 2 or argv[0] != "run":
            assert after == before, argv
        else:  # a resume keeps every complete line it found and appends
            kept = [line for line in before.split(b"\n")[:-1] if line.strip()]
            assert after.split(b"\n")[: len(kept)] == before.split(b"\n")[: len(kept)] or not kept


toml_value = st.recursive(
    st.one_of(
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.text(alphabet="abcrnlstmfo0123456789.,= _", max_size=12),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["T", "H", "x"]), inner, max_size=2)
    ),
    max_leaves=5,
)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"


config_documents = st.one_of(
    st.dictionaries(st.sampled_from([*CONFIG_KEYS, "modles", "x"]), toml_value, max_size=4).map(
        lambda d: "\n".join(f"{k} = {_toml(v)}" for k, v in d.items())
    ),
    st.text(max_size=60),
)


@PROPERTY
@given(document=config_documents)
def test_any_toml_document_as_a_config(document: str, tmp_path: Path, capsys) -> None:
    """Any config: exit 0 or one line and exit 2, never a traceback; the config is never changed,
    and a refused run writes nothing. Flags name a row decided at once, so valid documents finish fast."""
    config = tmp_path / f"{uuid.uuid4().hex}.toml"
    config.write_bytes(document.encode())
    before = snapshot(tmp_path)
    out = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    code, err = _main(["run", "--config", str(config), *QUICK, "--out", str(out)], capsys)
    _clean(code, err)
    assert config.read_bytes() == document.encode()
    if code == 2:
        assert snapshot(tmp_path) == before


def test_the_document_names_only_tests_that_exist() -> None:
    """docs/reliability.md says which test guards each class: every test it names exists."""
    import re

    root = Path(__file__).resolve().parents[1]
    named = set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", (root / "docs" / "reliability.md").read_text()))
    assert len(named) >= 20
    for module, test in named:
        source = (root / module).read_text()
        assert re.search(rf"^def {test}\(", source, re.M), (
            f"{module}::{test} is named in docs/reliability.md but does not exist"
        )
