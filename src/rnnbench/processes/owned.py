"""Folders rnnbench owns: the only ones it empties, replaces or removes.

One rule for every folder rnnbench makes and may later empty or replace (an environment, a site, a
process's temporary directory, a cold compile cache): the folder holds a marker file,
`.rnnbench-<kind>`, written when rnnbench made it (make_owned), and nothing under a folder is removed
(remove_owned, replace_owned) unless that marker is there. A missing path is made; an existing empty
folder is adopted (marked, then used): there is nothing in it to lose. Anything else (a file, a link,
a non-empty folder without the kind's marker, such as the folder that holds a user's virtual
environments) is refused with InputError, one line naming the folder and why, and left untouched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rnnbench.errors import InputError

# The marks an earlier rnnbench left in the environments it built (before every owned folder got
# its `.rnnbench-<kind>`): such a build may still be rebuilt or removed as superseded.
EARLIER_MARKS = {"environment": (".rnnbench-complete", ".rnnbench-partial")}


def marker(kind: str) -> str:
    """The marker file's name for folders of `kind` ("site" -> ".rnnbench-site")."""
    return f".rnnbench-{kind}"


def is_owned(path: Path, kind: str) -> bool:
    """Whether `path` is a real folder (not a link to one) that rnnbench made for `kind`."""
    if path.is_symlink() or not path.is_dir():
        return False
    for name in (marker(kind), *EARLIER_MARKS.get(kind, ())):
        mark = path / name
        if mark.is_file() and not mark.is_symlink():
            return True
    return False


def claim(path: Path, kind: str, what: str) -> None:
    """Refuse (InputError) a `path` rnnbench must not make or replace as `kind` (`what` says what it
    is for, e.g. "environment 'xla'"): anything but a missing path, an empty folder or a folder
    marked for `kind`. Nothing is touched."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise InputError(f"{path} is not a folder, so rnnbench will not use it for {what}; choose another path")
    if path.is_dir() and not is_owned(path, kind) and any(path.iterdir()):
        raise InputError(
            f"{path} holds files rnnbench did not write (no {marker(kind)} in it), so rnnbench will not "
            f"empty it for {what}; choose a new or empty folder"
        )


def make_owned(path: Path, kind: str, what: str) -> Path:
    """`path` as a folder of `kind` that rnnbench owns: made (with its parents) where missing, an
    empty one adopted, a marked one kept; its marker written. Anything else: InputError (claim)."""
    claim(path, kind, what)
    path.mkdir(parents=True, exist_ok=True)
    mark = path / marker(kind)
    if not mark.is_file():
        mark.write_text(f"made by rnnbench ({what}); rnnbench may empty or replace this folder\n")
    return path


def remove_owned(path: Path, kind: str, what: str, ignore_errors: bool = False) -> None:
    """Remove `path` with everything under it where rnnbench owns it for `kind` (an empty folder
    too); a missing path is nothing to do; anything else is refused (InputError) untouched.
    ignore_errors: a file that cannot be removed is left (cleanup at exit), as shutil.rmtree's."""
    if not path.exists() and not path.is_symlink():
        return
    claim(path, kind, what)
    shutil.rmtree(path, ignore_errors=ignore_errors)


def replace_owned(path: Path, kind: str, what: str) -> Path:
    """`path` as a new, empty folder of `kind` (marked): what rnnbench made there before is
    removed; a folder it did not make is refused (InputError) before anything is removed."""
    remove_owned(path, kind, what)
    return make_owned(path, kind, what)
