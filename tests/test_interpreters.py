"""An environment's `python` key (rnnbench.machine.interpreters) and its `constraints` key: the interpreter
is found or the definition is refused in one line; the key is part of the environment's identity."""

from __future__ import annotations

import sys

import pytest

from rnnbench.errors import InputError
from rnnbench.machine import environments, interpreters


def test_the_running_version_is_the_running_interpreter() -> None:
    assert interpreters.find(None) == sys.executable
    assert interpreters.find(f"{sys.version_info.major}.{sys.version_info.minor}") == sys.executable


@pytest.mark.parametrize("bad", ["3", "three", "3.12.1", "2.7; rm -rf /"])
def test_a_malformed_version_is_refused(bad: str) -> None:
    with pytest.raises(InputError, match="major.minor"):
        interpreters.find(bad)


def test_a_version_nowhere_on_the_machine_is_one_line(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match=r"needs Python 3\.99"):
        interpreters.find("3.99")


def test_python_and_constraints_keys_reach_the_environment() -> None:
    entry = {"requirements": ["jax==0.12.0.1"], "python": "3.12", "constraints": False}
    environments.check_definition("j", entry, "test")
    env = environments._environment("j", entry)
    assert env.python_version == "3.12" and env.constraints is False
    other = environments._environment("j", {**entry, "python": "3.13"})
    assert other.python != env.python  # another Python is another environment


def test_a_wrongly_typed_key_is_refused() -> None:
    with pytest.raises(InputError, match="wrong type"):
        environments.check_definition("j", {"requirements": ["x==1"], "constraints": "no"}, "test")
