"""The files a user names as input that are not results files (a --config TOML file, a requirements
file an environment definition names): each read only when it is a regular file of bounded size.
A FIFO would block the read forever, /dev/zero would fill the memory, a directory or socket has no
text: all are refused from their metadata, with one line (InputError), before a byte is read."""

from __future__ import annotations

import os
import stat

from rnnbench.errors import InputError

MAX_BYTES = 1 << 20  # a config or requirements file is a few lines; more is another file named by mistake


def read_regular_file(path: str | os.PathLike, what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file `path` (at most `limit`), else InputError naming `what` and
    `path`. Opened O_NONBLOCK (a FIFO put in its place after a check cannot block the open) and
    checked on the open file."""
    try:
        _check(os.stat(path), path, what, limit)  # a socket cannot be opened: its kind is named first
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        _check(os.fstat(fd), path, what, limit)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after its size was read
        raise InputError(f"{what} {path} is over the {limit} bytes a {what} may have")
    return data


def _check(st: os.stat_result, path: str | os.PathLike, what: str, limit: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {path} is not a regular file (a FIFO, a device or a socket); name a file")
    if st.st_size > limit:
        raise InputError(f"{what} {path} is {st.st_size} bytes, over the {limit} a {what} may have")
