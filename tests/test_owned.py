"""The folders rnnbench empties or replaces are its own (rnnbench.processes.owned; docs/security.md,
"Folders rnnbench owns"): an environment's `path`, a stale temporary directory, a site. A folder it
did not make is refused with one line (exit 2 at the command line) and left as it was."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from rnnbench.cli.main import main
from rnnbench.errors import InputError
from rnnbench.machine import env_create, environments
from rnnbench.processes import owned, tmpdirs


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _users_venvs(tmp_path: Path) -> Path:
    """A folder that holds a user's virtual environments: not an environment, not rnnbench's."""
    venvs = tmp_path / "venvs"
    (venvs / "project-a" / "bin").mkdir(parents=True)
    (venvs / "project-a" / "bin" / "python").write_text("#!/bin/sh\n")
    (venvs / "notes.txt").write_text("mine\n")
    return venvs


def test_make_owned_takes_a_missing_or_empty_folder_and_marks_it(tmp_path: Path) -> None:
    new, empty = tmp_path / "a" / "new", tmp_path / "empty"
    empty.mkdir()
    for path in (new, empty):
        assert owned.make_owned(path, "test", "a test") == path
        assert owned.is_owned(path, "test") and not owned.is_owned(path, "other")
    assert owned.make_owned(new, "test", "a test") == new  # a folder of its kind is kept
    (new / "x").write_text("rnnbench's")
    assert owned.replace_owned(new, "test", "a test") == new and sorted(p.name for p in new.iterdir()) == [
        owned.marker("test")
    ]
    owned.remove_owned(new, "test", "a test")
    assert not new.exists()
    owned.remove_owned(new, "test", "a test")  # missing: nothing to do


@pytest.mark.parametrize("action", ["make", "remove", "replace"])
def test_a_folder_rnnbench_did_not_make_is_refused_in_one_line_untouched(tmp_path: Path, action: str) -> None:
    venvs = _users_venvs(tmp_path)
    before = _tree(venvs)
    run = {"make": owned.make_owned, "remove": owned.remove_owned, "replace": owned.replace_owned}[action]
    with pytest.raises(InputError) as refused:
        run(venvs, "environment", "environment 'mine'")
    message = str(refused.value)
    assert "\n" not in message and str(venvs) in message and "did not write" in message
    assert _tree(venvs) == before
    # a folder of another kind is not this kind's, and a file or a link is no folder at all
    site = owned.make_owned(tmp_path / "site", "site", "the site")
    (site / "index.html").write_text("x")
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(site)
    for path in (site, tmp_path / "file", tmp_path / "link"):
        with pytest.raises(InputError):
            run(path, "environment", "environment 'mine'")
    assert (site / "index.html").is_file() and (tmp_path / "file").read_text() == "x"


@pytest.fixture
def fake_uv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    """uv replaced by a recorder that makes bin/python, in a cache of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(environments, "_EXTRA", {})
    monkeypatch.setenv(environments.DEFINITIONS_VAR, "{}")
    commands: list[list[str]] = []

    def run(command: list[str], env) -> None:
        commands.append(command)
        if command[1] == "venv":
            (Path(command[-1]) / "bin").mkdir(parents=True, exist_ok=True)
            (Path(command[-1]) / "bin" / "python").touch()

    monkeypatch.setattr(env_create, "_run", run)
    monkeypatch.setattr(env_create, "_uv", lambda: "uv")
    return commands


def test_an_environment_path_naming_a_users_folder_is_refused_not_emptied(tmp_path: Path, fake_uv, capsys) -> None:
    """Before: `create` removed whatever folder `path` named, then built there."""
    venvs = _users_venvs(tmp_path)
    before = _tree(venvs)
    environments.add_definitions({"mine": {"requirements": ["numpy==2.4.6"], "path": str(venvs)}}, "test")
    with pytest.raises(InputError, match="did not write"):
        env_create.create("mine", log=lambda line: None)
    assert _tree(venvs) == before and fake_uv == []
    assert main(["env", "create", "mine"]) == 2  # the command line: one line, exit 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(venvs) in err, err
    assert _tree(venvs) == before and fake_uv == []


def test_an_environment_is_built_in_an_empty_folder_and_rebuilt_in_its_own(tmp_path: Path, fake_uv) -> None:
    empty = tmp_path / "env"
    empty.mkdir()
    environments.add_definitions({"mine": {"requirements": ["numpy==2.4.6"], "path": str(empty)}}, "test")
    env = env_create.create("mine", log=lambda line: None)
    assert env.missing_reason() is None and owned.is_owned(empty, env_create.ENV_KIND)
    (empty / "bin" / "python").unlink()  # broken: rnnbench's own folder is emptied and built again
    (empty / "stale").write_text("from the last build")
    env = env_create.create("mine", log=lambda line: None)
    assert env.missing_reason() is None and not (empty / "stale").exists()


def test_a_build_an_older_rnnbench_made_is_still_rebuilt(tmp_path: Path, fake_uv) -> None:
    """An environment built before the owned marker carries create's own marks: still rnnbench's."""
    old = tmp_path / "env"
    (old / "bin").mkdir(parents=True)
    (old / ".rnnbench-partial").touch()  # cut short
    environments.add_definitions({"mine": {"requirements": ["numpy==2.4.6"], "path": str(old)}}, "test")
    assert env_create.create("mine", log=lambda line: None).missing_reason() is None


def test_a_stale_temp_dir_is_removed_only_when_rnnbench_marked_it(tmp_path: Path) -> None:
    """A folder of a temp dir's name, with a free `.lock` but no marker, is not rnnbench's: left."""
    foreign = tmp_path / f"{tmpdirs.TMP_PREFIX}{2**22 + 3}-0-x"
    foreign.mkdir()
    (foreign / tmpdirs.LOCK_NAME).touch()
    (foreign / "data").write_text("someone else's")
    ours = tmp_path / f"{tmpdirs.TMP_PREFIX}{2**22 + 4}-0-y"
    owned.make_owned(ours, tmpdirs.TMP_KIND, "a test's temporary directory")
    (ours / tmpdirs.LOCK_NAME).touch()
    assert tmpdirs.remove_stale_tmpdirs(str(tmp_path)) == [ours]
    assert (foreign / "data").is_file() and not ours.exists()


def test_this_process_temp_dir_is_marked_and_locked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tmpdirs.tempfile, "tempdir", str(tmp_path))
    made = tmpdirs.short_tmpdir("t", 200)
    assert owned.is_owned(made, tmpdirs.TMP_KIND)
    fd = os.open(made / tmpdirs.LOCK_NAME, os.O_RDWR)
    try:
        with pytest.raises(OSError):  # held by this process
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    owned.remove_owned(made, tmpdirs.TMP_KIND, "a test's temporary directory")
