"""What a check_recurrence call runs, from its arguments: the drivers (the default selection and what it leaves
out, for the report), the loss forms and the differentiation modes; each validated like every input
(rnnbench.api.validate), with a message of rnnbench.api.messages."""

from __future__ import annotations

from typing import Any

from rnnbench import registry
from rnnbench.api.messages import problem, text
from rnnbench.drivers.base import Driver
from rnnbench.losses import CHECKED, MODEL_LOSS, form_named
from rnnbench.modes import VJP, rows_and_hvp


def mode_selection(modes: Any, order: Any) -> tuple[tuple[str, ...], bool]:
    """(the first-order modes that get a row each, whether vjp rows check H v) from `modes`
    (rnnbench.modes.rows_and_hvp) and `order`; None: vjp, with H v where order is 2."""
    if modes is None:
        return (VJP,), order == 2
    if not isinstance(modes, (str, list, tuple)):
        raise problem("modes", error=f"expected 'all', a comma-separated str or a list of names, got {modes!r}")
    try:
        return rows_and_hvp(modes)
    except ValueError as exc:
        raise problem("modes", error=str(exc)) from None


def names(value: Any, argument: str, example: str) -> list:
    """A list of names, duplicates once, in the order given."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise problem("names_type", argument=argument, value=value, example=example)
    if not value:
        raise problem("names_empty", argument=argument)
    if not all(isinstance(n, str) for n in value):
        raise problem("names_str", argument=argument, value=list(value))
    return list(dict.fromkeys(value))


ALL_DRIVERS = "all"


def runs_by_default(driver: Driver) -> bool:
    """Whether drivers=None runs it: a core way of running a recurrence (Driver.suite "core") that compiles in
    well under a second. Left out: torch inductor's drivers (seconds of C++ compiles per loss form) and the
    bug-class configurations (`--suite bugs`: remat, native reverse, while loops, buffer writes), which
    drivers="all" runs; the report names them (left_out_by_default)."""
    return driver.suite == "core" and not driver.slow_to_compile


def driver_selection(drivers: Any) -> list[str]:
    """The drivers to run: for None, those that run by default (runs_by_default); "all": every one."""
    if drivers is None:
        return [n for n, d in registry.drivers().items() if runs_by_default(d)]
    if drivers == ALL_DRIVERS:
        return list(registry.drivers())
    selected = names(drivers, "drivers", "'torch_loop'")
    for name in selected:
        try:
            registry.get_driver(name)
        except registry.UnknownName as exc:
            raise registry.UnknownName(text("unknown_driver", error=exc)) from None
    return selected


def left_out_by_default(drivers: Any) -> tuple[str, ...]:
    """The drivers the default selection leaves out (those installed here; which of them can run
    the step, the caller asks): for the report, so that a default check never reads as a check of all."""
    if drivers is not None:
        return ()
    return tuple(n for n, d in registry.drivers().items() if not runs_by_default(d) and d.available() is None)


def loss_forms(loss: Any, losses: Any) -> list[str]:
    """The loss forms every driver is judged under: ["model"] for a custom loss."""
    if loss is not None:
        if losses is not None:
            raise problem("loss_and_losses")
        return [MODEL_LOSS]
    if losses is None:
        return list(CHECKED)
    selected = names(losses, "losses", "'weighted'")
    for name in selected:
        if name == MODEL_LOSS:
            raise problem("model_loss")
        try:
            form_named(name)
        except ValueError as exc:
            raise problem("unknown_loss", error=exc) from None
    return selected
