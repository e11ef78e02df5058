"""The caller's process left as it was: check_recurrence runs every driver in its caller's process,
and a driver sets process-wide state for its rows (jax's x64 and matmul precision, torch's dynamo
flags, ...). Every such setting is put back when the check ends, however it ends (a return, an
exception, KeyboardInterrupt), so the caller's own code after it runs as before. Which settings a
framework changes is its own fact (Framework.keep_settings); numpy's error state is kept here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

import numpy as np

from rnnbench import registry

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def callers_settings_kept() -> Iterator[None]:
    """numpy's error state (np.seterr) and every registered framework's settings
    (Framework.keep_settings) as they were on entry, on every exit of the block."""
    with ExitStack() as kept:
        errors = np.geterr()
        kept.callback(lambda: np.seterr(**errors))
        for framework in registry.frameworks().values():
            kept.enter_context(framework.keep_settings())
        yield


def keeps_callers_settings(function: F) -> F:
    """`function` run under callers_settings_kept (its name, docstring and signature kept)."""

    @functools.wraps(function)
    def kept(*args: Any, **kwargs: Any) -> Any:
        with callers_settings_kept():
            return function(*args, **kwargs)

    return kept  # type: ignore[return-value]
