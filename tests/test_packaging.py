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
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rnnbench.machine import env_create, environments

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
    assert found | {"rnnbench_models", "rnnbench_upstream"} == set(PYPROJECT["tool"]["setuptools"]["packages"])


def test_the_layout_is_simple_so_the_editable_install_is_a_plain_pth() -> None:
    """Every package lies under src/ (rnnbench_models and rnnbench_upstream as symlinks to models/ and
    docs/upstream): setuptools' own check for a simple layout holds, so `pip install -e .` takes its
    static .pth strategy, whose build prints no warning about folders named like the package (the
    top-level finder it uses for any other layout prints one on every install)."""
    from setuptools.command.editable_wheel import _simple_layout

    tool = PYPROJECT["tool"]["setuptools"]
    assert _simple_layout(tool["packages"], tool["package-dir"], str(REPO)), tool["package-dir"]
    for package, target in (("rnnbench_models", "models"), ("rnnbench_upstream", "docs/upstream")):
        link = REPO / "src" / package
        assert link.is_symlink() and link.resolve() == (REPO / target).resolve(), package
        assert (link / "__init__.py").is_file() or any(link.glob("*.md")), package


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
    from rnnbench.machine.locks import lock_inputs

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

    monkeypatch.setattr(env_create, "_run", run)
    monkeypatch.setattr(env_create, "_uv", lambda: "uv")
    env = env_create.create("locktest", log=lambda line: None)
    install = next(c for c in commands if c[1:3] == ["pip", "install"] and "--no-deps" not in c)
    assert install[-3:] == ["--require-hashes", "-r", str(tmp_path / "locks" / "locktest.lock")], install
    assert env.missing_reason() is None
    # the lock is part of the environment's identity: another lock, another environment
    (tmp_path / "locks" / "locktest.lock").write_text("numpy==2.4.5 \\\n    --hash=sha256:" + "1" * 64 + "\n")
    assert environments.get("locktest").python != env.python


def _asv_config() -> dict:
    """asv.conf.json, whose // comment lines asv allows and json does not."""
    text = (REPO / "asv.conf.json").read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def test_asv_matrix_is_the_main_pin_list() -> None:
    """asv benchmarks the main environment: its matrix is requirements/main.txt, pin for pin (the one
    pin list; ml_dtypes included), so the two cannot drift apart."""
    matrix = {
        re.sub(r"\[.*\]", "", name).lower().replace("_", "-"): version
        for name, version in _asv_config()["matrix"]["req"].items()
    }
    assert matrix == _pins(REPO / "requirements" / "main.txt")


def test_the_framework_extras_are_the_frameworks_of_the_main_environment() -> None:
    """One extra per framework family a main-environment driver needs (the name the exit-2 hint
    gives: rnnbench.planning.plan.install_hint), holding that family's packages of requirements/main.txt;
    [all] takes every framework extra."""
    from rnnbench import registry

    extras = PYPROJECT["project"]["optional-dependencies"]
    main = set(_pins(REPO / "requirements" / "main.txt"))
    families = {d.framework.family for d in registry.drivers().values() if "main" in d.environments}
    for family in families:
        packages = {re.sub(r"\[.*\]", "", p).lower().replace("_", "-") for p in extras[family]}
        assert packages and packages <= main, (family, packages)
        frameworks = [f for f in registry.frameworks().values() if f.family == family]
        assert all(f.module.replace("_", "-") in packages or f.module not in main for f in frameworks), family
    (everything,) = extras["all"]
    assert set(re.fullmatch(r"rnnbench\[(.*)\]", everything).group(1).split(",")) >= families


def test_metadata_license_typed_and_changelog() -> None:
    """The MIT license (its file shipped in the wheel), py.typed (the API is annotated), classifiers,
    and a changelog with a section for the next release and the current version."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert (REPO / "src" / "rnnbench" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["rnnbench"]
    assert {"Typing :: Typed", "Programming Language :: Python :: 3.11"} <= set(project["classifiers"])
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "## Unreleased" in changelog and f"## {project['version']}" in changelog


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, installed into a clean venv with its two runtime requirements only (numpy and
    ml_dtypes at the pins of requirements/main.txt, from pip's configured package sources): no
    torch, no jax, no checkout on the path. The bin/ folder of that venv."""
    root = tmp_path_factory.mktemp("wheel")
    # A caller's PYTHONPATH (a checkout's src/, which holds the build's egg-info) would make pip find rnnbench
    # installed already and leave the venv without it: the venv is clean only without it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = lambda *argv: subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True, env=env)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root), str(REPO))
    (wheel,) = root.glob("rnnbench-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", str(root / "venv"))  # pip of this environment installs
    pins = _pins(REPO / "requirements" / "main.txt")
    python = str(root / "venv" / "bin" / "python")
    deps = [f"numpy=={pins['numpy']}", f"ml_dtypes=={pins['ml-dtypes']}"]
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", str(wheel), *deps)
    return root / "venv" / "bin"


def _installed(bin_: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed `rnnbench` script, run away from the checkout (nothing imports from it)."""
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(bin_.parent), "XDG_CACHE_HOME": str(bin_.parent / "cache")}
    return subprocess.run(
        [str(bin_ / "rnnbench"), *args], capture_output=True, text=True, timeout=300, cwd=bin_.parent, env=env
    )


def test_the_wheel_without_frameworks_answers_version_list_and_bugs(wheel_venv: Path) -> None:
    """From a wheel, torch and jax absent: --version, list, and every registry entry's ready-to-file
    report (`bugs ID --markdown`, the repro inlined where the report links one)."""
    from rnnbench.check.bugs import known_issues

    assert _installed(wheel_venv, "bugs", "torch-xla-scan-closure-over-tensors", "--markdown").returncode == 0
    version = _installed(wheel_venv, "--version")
    assert version.returncode == 0 and re.fullmatch(r"rnnbench \d+\.\d+\.\d+\n", version.stdout), version
    listed = _installed(wheel_venv, "list")
    assert listed.returncode == 0 and "torch_loop" in listed.stdout, listed.stderr
    fuzz = _installed(wheel_venv, "fuzz", "--cases", "1", "--out", "f.jsonl")  # no framework at all
    assert fuzz.returncode == 2 and "pip install 'rnnbench[" in fuzz.stderr and "make" not in fuzz.stderr, fuzz
    # the checkout's environments (xla: `make venv-xla`, .venv-xla) are named without a make target or a path
    script = "from rnnbench.machine import environments as e\nprint(e.get('xla').missing_reason())"
    xla = subprocess.run([str(wheel_venv / "python"), "-c", script], capture_output=True, text=True, timeout=120)
    assert "source checkout" in xla.stdout and "make" not in xla.stdout and "/" not in xla.stdout, xla
    # every entry in one process of the installed interpreter (one start instead of one per entry)
    ids = [issue.id for issue in known_issues.registry()]
    script = (
        "import contextlib, io, json, sys\nfrom rnnbench.cli.main import main\nout = {}\n"
        "for i in sys.argv[1:]:\n    buf = io.StringIO()\n    with contextlib.redirect_stdout(buf):\n"
        "        code = main(['bugs', i, '--markdown'])\n    out[i] = (code, buf.getvalue())\nprint(json.dumps(out))"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(wheel_venv.parent)}
    proc = subprocess.run(
        [str(wheel_venv / "python"), "-c", script, *ids],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=wheel_venv.parent,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(proc.stdout)
    for issue_id in ids:
        code, text = reports[issue_id]
        assert code == 0 and text.strip(), (issue_id, proc.stderr)
        if (REPO / "docs" / "upstream" / f"{issue_id}.py").is_file():
            assert "```python" in text, issue_id  # the repro inlined where the report links it
        assert "rnnbench_upstream" not in text and "site-packages" not in text, issue_id


@pytest.mark.parametrize("family", ["torch", "jax"])
def test_the_wheel_without_a_framework_refuses_its_drivers_naming_the_extra(wheel_venv: Path, family: str) -> None:
    """A run naming a driver of a missing framework: exit 2, one line naming the extra, no make
    target and no path (the package lives in site-packages), nothing written."""
    from rnnbench import registry

    driver = next(n for n, d in registry.drivers().items() if d.framework.family == family and "main" in d.environments)
    proc = _installed(wheel_venv, "run", "--drivers", driver, "--out", "r.jsonl")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert f"pip install 'rnnbench[{family}]'" in lines[0], lines[0]
    assert "make" not in lines[0] and "/" not in lines[0].split("install it with")[1], lines[0]
    assert not (wheel_venv.parent / "r.jsonl").exists()
