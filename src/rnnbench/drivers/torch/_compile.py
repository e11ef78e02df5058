"""torch.compile as the torch mechanisms run it (part of the torch framework layer,
drivers/torch/_framework.py): inductor, fullgraph, the settings rows record, and dynamo's state reset before
each compile or kept across several (Framework.compiles_kept, Framework.reset_compiles); another
backend for the compiles made under at_backend (Framework.at_layer: where a wrong gradient appears)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

# compiled() resets dynamo first (see there), but not under compiles_kept() (Framework.compiles_kept):
# a caller keeping several compiles alive at once resets between groups itself (reset_dynamo).
_KEEP_COMPILED: ContextVar[bool] = ContextVar("rnnbench_keep_compiled", default=False)


# The backends a compile passes through, each a complete way to run it: dynamo's graph run eagerly,
# then AOTAutograd's joint graph run eagerly, then inductor's kernels (Framework.layers).
BACKENDS = ("eager", "aot_eager", "inductor")
_BACKEND: ContextVar[str] = ContextVar("rnnbench_compile_backend", default=BACKENDS[-1])


@contextlib.contextmanager
def at_backend(name: str) -> Iterator[None]:
    """Within it, compiled() compiles with torch.compile's backend `name` (one of BACKENDS)."""
    if name not in BACKENDS:
        raise ValueError(f"torch.compile backend {name!r} is not one of {', '.join(BACKENDS)}")
    token = _BACKEND.set(name)
    try:
        yield
    finally:
        _BACKEND.reset(token)


@contextlib.contextmanager
def compiles_kept() -> Iterator[None]:
    """Within it, compiled() keeps dynamo's state (the code of earlier compiles) instead of resetting it."""
    token = _KEEP_COMPILED.set(True)
    try:
        yield
    finally:
        _KEEP_COMPILED.reset(token)


def fresh_dynamo_state() -> None:
    """dynamo's state reset unless the caller keeps its compiles (compiles_kept): a row starts clean whatever ran
    before it in the process (torch's eager scan traces its body with dynamo too)."""
    if not _KEEP_COMPILED.get():
        reset_dynamo()


def reset_dynamo() -> None:
    """A clean dynamo state (compiled code and recompile counts dropped): Framework.reset_compiles."""
    import torch

    torch._dynamo.reset()


def compiled(
    loss_fn: Callable[[dict[str, Any]], Any], dynamo_config: Mapping[str, Any] = {}, mode: str | None = None
) -> tuple[Callable, dict[str, Any]]:
    """(torch.compile(loss_fn) with inductor, or the backend at_backend chose, the settings to record).
    Starts from a clean dynamo
    state: dynamo caches compiled code per code object, so without a reset the second model
    compiled in one process would hit the recompile limit and silently run eager. fullgraph=True
    turns any graph break into an error instead of a silent eager fallback. dynamo_config: values
    of torch._dynamo.config set (and recorded) for this compile: in force during each call of the
    compiled function only (dynamo traces at the first call, and again at any recompile), then put
    back, so no other compile in the process sees them. mode: torch.compile's mode
    ("reduce-overhead": CUDA graphs; each call then starts a new cudagraph step, so a forward
    timed alone never waits on the backward of the call before it; inductor's alone, so another
    backend compiles without it)."""
    import torch

    fresh_dynamo_state()
    backend = _BACKEND.get()
    mode = mode if backend == "inductor" else None
    settings: dict[str, Any] = {"backend": backend, "fullgraph": True}
    settings.update({f"torch._dynamo.config.{key}": value for key, value in dynamo_config.items()})
    fn = torch.compile(loss_fn, backend=backend, fullgraph=True, **({"mode": mode} if mode else {}))
    if dynamo_config:
        fn = _under_dynamo_config(fn, dynamo_config)
    if mode is not None:
        settings["mode"] = mode
        fn = _stepped(fn)
    return remembered(fn, eager=loss_fn, compile_like=lambda other: compiled(other, dynamo_config, mode)[0]), settings


def remembered(fn: Callable, *, eager: Callable, compile_like: Callable[[Callable], Callable]) -> Callable:
    """fn, carrying the eager function it computes and how to compile another function as it was compiled
    (eager_and_compile_like reads them back); a wrapper of fn passes them on by calling this again."""
    fn._rnnbench_eager = eager  # type: ignore[attr-defined]
    fn._rnnbench_compile_like = compile_like  # type: ignore[attr-defined]
    return fn


def eager_and_compile_like(loss_fn: Callable) -> tuple[Callable, Callable[[Callable], Callable] | None]:
    """(the eager function a compiled() callable computes, a compile of another function with its settings), or
    (loss_fn, None) for an eager one. A torch.func transform (the jvp, func and per_example modes) is applied to the
    eager function and the transform compiled as the driver compiles (its backend, dynamo settings, mode; a clean
    dynamo state): dynamo refuses a transform of a compiled function ("Unsupported functorch tracing attempt"),
    and compiling the transform is how users compose the two (pytorch#136662's composition)."""
    return getattr(loss_fn, "_rnnbench_eager", loss_fn), getattr(loss_fn, "_rnnbench_compile_like", None)


def _stepped(fn: Callable) -> Callable:
    """fn with a new CUDA graph step begun before each call."""
    import torch

    def stepped(*args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return fn(*args, **kwargs)

    return stepped


def _under_dynamo_config(fn: Callable, dynamo_config: Mapping[str, Any]) -> Callable:
    """fn called with torch._dynamo.config patched to `dynamo_config`, restored after each call."""
    import torch

    def patched(*args: Any, **kwargs: Any) -> Any:
        with torch._dynamo.config.patch(**dynamo_config):
            return fn(*args, **kwargs)

    return patched
