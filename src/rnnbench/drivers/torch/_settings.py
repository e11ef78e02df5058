"""torch's process-wide settings (part of the torch framework layer, drivers/torch/_framework.py): the thread
pools rows run with, what rnnbench changed and what it was before (UNTOUCHED), and putting them back
after a check (Framework.keep_settings)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

UNTOUCHED: dict[str, Any] = {}  # each setting as it was before rnnbench first changed it here


def set_threads(threads: int) -> None:
    """torch's intra-op pool (OpenMP) and inter-op pool at `threads`; the worker is also pinned to
    `threads` CPUs (rnnbench.rows.worker.setup). The inter-op size can be set only before that pool
    starts: a process that has used it keeps its size."""
    import torch

    UNTOUCHED.setdefault("threads", torch.get_num_threads())
    UNTOUCHED.setdefault("interop_threads", torch.get_num_interop_threads())
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already started (or set) in this process
        pass


def _settings() -> dict[str, Any]:
    """torch's process-wide settings that a check may change: the default dtype, the thread counts,
    and every value of torch._dynamo.config where dynamo is loaded ("dynamo.<name>")."""
    import torch

    out = {
        "default_dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
    }
    if "torch._dynamo" in sys.modules:
        out.update({f"dynamo.{k}": v for k, v in torch._dynamo.config.get_config_copy().items()})
    return out


def _put_back(settings: Mapping[str, Any]) -> None:
    import torch

    now = _settings()
    for key, value in settings.items():
        if key not in now or now[key] == value:
            continue
        if key == "default_dtype":
            torch.set_default_dtype(value)
        elif key == "threads":
            torch.set_num_threads(value)
        elif key == "interop_threads":
            with contextlib.suppress(RuntimeError):  # fixed once the pool has started: nothing to put back
                torch.set_num_interop_threads(value)
        else:
            setattr(torch._dynamo.config, key.removeprefix("dynamo."), value)


@contextlib.contextmanager
def keep_torch_settings() -> Iterator[None]:
    """torch's process-wide settings (_settings) put back on every exit of the block: as they were
    on entry; one not loaded then (torch, or dynamo, first loaded inside the block) as torch makes
    it at import (default dtype float32) or as it was before rnnbench first changed it
    (set_threads)."""
    before = _settings() if "torch" in sys.modules else None
    try:
        yield
    finally:
        if "torch" in sys.modules:
            import torch

            _put_back({"default_dtype": torch.float32, **UNTOUCHED, **(before or {})})


def threads_in_use() -> dict[str, int]:
    import torch

    return {"torch_intra_op": torch.get_num_threads(), "torch_inter_op": torch.get_num_interop_threads()}
