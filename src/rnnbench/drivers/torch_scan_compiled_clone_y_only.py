"""torch_scan_compiled cloning only y, as torch's scan documentation suggests, not the carry.

Exists to exercise a known issue: under autograd, torch 2.13.0's inductor refuses a scan whose
carry comes from an op that saves its output for backward (tanh, sigmoid) with "scan might be
aliasing the input or the output!", although the body follows the documented contract.
torch_scan_compiled works around it by cloning every carry leaf. Runs on the models whose carry
is a tanh/sigmoid output (rnn, lstm) and on one whose carry is not (decay), which compiles."""

from __future__ import annotations

from typing import Optional

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver
from rnnbench.drivers.torch_scan_compiled import make_prepare
from rnnbench.model import Model

MODELS = ("decay", "rnn", "lstm")


def supports(model: Model) -> Optional[str]:
    return None if model.name in MODELS else f"configuration variant, run on {', '.join(MODELS)} only"


DRIVER = Driver(
    name="torch_scan_compiled_clone_y_only",
    framework="torch",
    summary="torch.compile(inductor) of torch scan, only y cloned",
    prepare=make_prepare(capture_scalar_outputs=True, clone_carry=False),
    available=_torch.available,
    versions=_torch.versions,
    supports=supports,
    compiled=True,
    environments=("main",),
)
