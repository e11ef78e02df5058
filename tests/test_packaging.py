"""rnnbench installs the way Python users expect: Python >= 3.11, `--version` with the commit, every
package in the distribution, runtime requirements that carry only what `run` needs (the rest in the
extras charts, ray, dev), lock files for the environments, installed by `make venv` and by
environment creation, and `report` without matplotlib is one line with the install hint.

The whole install (`pip install -e .` into a clean Python 3.11 venv, then `rnnbench run`) is
checked by hand and recorded in docs/results/2026-11-26-clean-install.md; here,
test_run_needs_none_of_the_extras runs `rnnbench run` with ray, uv, asv, pytest and hypothesis made
unimportable."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rnnbench.run import environments

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS_ONLY = ("ray", "uv", "asv", "pytest", "hypothesis", "matplotlib")  # never needed by `run`


def _pins(path: Path) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements or lock file (extras dropped)."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


def test_requires_python_311() -> None:
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"


def test_every_package_of_the_source_is_in_the_distribution() -> None:
    found = {
        ".".join(("rnnbench", *p.parent.relative_to(REPO / "src" / "rnnbench").parts))
        for p in (REPO / "src" / "rnnbench").rglob("__init__.py")
    }
    assert found | {"rnnbench_models"} == set(PYPROJECT["tool"]["setuptools"]["packages"])


def test_version_names_the_commit() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "--version"], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert re.fullmatch(rf"rnnbench \d+\.\d+\.\d+\+g{head.stdout.strip()}(\.dirty)?\n", proc.stdout), proc.stdout


def test_runtime_requirements_carry_only_what_run_needs() -> None:
    runtime = _pins(REPO / "requirements" / "main.txt")
    assert not set(runtime) & set(EXTRAS_ONLY), runtime
    assert {"torch", "jax", "jaxlib", "flax", "numpy"} <= set(runtime)
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(extras) >= {"charts", "ray", "dev"}
    assert "matplotlib" in extras["charts"] and "ray" in extras["ray"]
    assert {"pytest", "hypothesis", "asv", "uv"} <= set(extras["dev"])
    assert not set(PYPROJECT["project"]["dependencies"]) & set(EXTRAS_ONLY)


def test_run_needs_none_of_the_extras(tmp_path: Path) -> None:
    """`rnnbench run` (a real row, timed) with ray, uv, asv, pytest, hypothesis and matplotlib unimportable."""
    out = tmp_path / "r.jsonl"
    blocked = ", ".join(repr(m) for m in EXTRAS_ONLY)
    code = (
        f"import sys\nfor m in ({blocked},): sys.modules[m] = None\n"
        "from rnnbench.cli.main import main\n"
        f"sys.exit(main(['run', '--models', 'rnn', '--drivers', 'torch_loop,jax_loop', '--budget', '0.05', "
        f"'--out', {str(out)!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "c")},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["driver"]: r["status"] for r in records} == {"torch_loop": "ok", "jax_loop": "ok"}


def test_report_without_matplotlib_is_one_line_with_the_install_hint(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps({"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok"}) + "\n")
    code = (
        "import sys\nsys.modules['matplotlib'] = None\nfrom rnnbench.cli.main import main\n"
        f"sys.exit(main(['report', {str(results)!r}, '--out-dir', {str(tmp_path / 'rep')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "pip install 'rnnbench[charts]'" in lines[0] and "matplotlib" in lines[0], lines[0]
    assert not (tmp_path / "rep").exists()


LOCKED = [name for name, env in environments.environments().items() if env.requirements_file]


@pytest.mark.parametrize("name", LOCKED)
def test_each_environment_with_a_requirements_file_has_a_lock_that_pins_its_inputs(name: str) -> None:
    from rnnbench.run.locks import lock_inputs

    lock = environments.lock_path(name)
    assert lock.is_file(), f"no {lock.relative_to(REPO)}: run `rnnbench env lock {name}`"
    pinned = _pins(lock)
    files, inline = lock_inputs(name)
    for source in files:
        for package, version in _pins(REPO / source).items():
            assert pinned.get(package, "").split("+")[0] == version.split("+")[0], (source, package, version)
    for requirement in inline.split():
        assert re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower().replace("_", "-") in pinned, requirement
    text = lock.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert all("--hash=sha256:" in block for block in blocks if "==" in block), "a pin without its hash"
    assert not re.search(r"(/home/|/Users/|/opt/|/tmp/|/wor[k]/|file://)", text), "a machine path in the lock"


def test_make_venv_installs_the_main_lock_with_hashes() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "pip install -q --require-hashes -r requirements/locks/main.lock" in makefile
    assert "$(VENV)/.installed: requirements/locks/main.lock" in makefile


def test_environment_creation_installs_its_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(environments, "LOCKS", tmp_path / "locks")
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "locktest.lock").write_text("numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    monkeypatch.setattr(environments, "_EXTRA", {})
    monkeypatch.setenv(environments.DEFINITIONS_VAR, "{}")  # add_definitions sets it: restored after
    environments.add_definitions({"locktest": {"requirements": ["numpy==2.4.6"]}}, "test")
    commands = []

    def run(command: list[str], env) -> None:
        commands.append(command)
        if command[1] == "venv":
            (Path(command[-1]) / "bin").mkdir(parents=True)
            (Path(command[-1]) / "bin" / "python").touch()

    monkeypatch.setattr(environments, "_run", run)
    monkeypatch.setattr(environments, "_uv", lambda: "uv")
    env = environments.create("locktest", log=lambda line: None)
    install = next(c for c in commands if c[1:3] == ["pip", "install"] and "--no-deps" not in c)
    assert install[-3:] == ["--require-hashes", "-r", str(tmp_path / "locks" / "locktest.lock")], install
    assert env.missing_reason() is None
    # the lock is part of the environment's identity: another lock, another environment
    (tmp_path / "locks" / "locktest.lock").write_text("numpy==2.4.5 \\\n    --hash=sha256:" + "1" * 64 + "\n")
    assert environments.get("locktest").python != env.python
