"""Where eager torch scan's time per call comes from
(docs/measuring.md#eager-torch-scan-retraces-its-step-on-every-call): the driver compiles nothing per
call, and torch traces the scanned step with make_fx anew on every differentiated call (scan_autograd's
joint graph and partition, gen_schema's mutation check, call_backward's backward step). Counted, not
timed. The second test fails the day torch caches those traces, so that the docs' explanation of the
row's speed is revisited."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from rnnbench import registry

MODEL = "rnn"  # a quick-suite model; a call costs a tenth of a second


@pytest.fixture
def prepared():
    pytest.importorskip("torch")
    model = registry.get_model(MODEL)
    case = model.make_case(model.sizes_with_defaults({}), 0).rounded_to("float32")
    prepared = registry.get_driver("torch_scan").prepare(model, case, "float32", "cpu")
    prepared.forward_backward()  # the first call compiles the scan's dynamo frame
    return prepared


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The make_fx traces torch's scan makes (torch._higher_order_ops.utils.materialize_as_graph),
    by the function that asked for each, wherever torch's scan modules look the name up."""
    import torch._higher_order_ops.partitioner as partitioner
    import torch._higher_order_ops.utils as hop_utils

    scan_module = sys.modules["torch._higher_order_ops.scan"]  # the package's `scan` attribute is the function
    original = hop_utils.materialize_as_graph
    seen: list[str] = []

    def counted(*args, **kwargs):
        seen.append(sys._getframe(1).f_code.co_name)
        return original(*args, **kwargs)

    for module in (hop_utils, partitioner, scan_module):
        monkeypatch.setattr(module, "materialize_as_graph", counted)
    yield seen


def test_the_eager_scan_driver_compiles_no_dynamo_frame_per_call(prepared) -> None:
    from torch._dynamo.utils import counters

    before = counters["frames"]["total"]
    for _ in range(2):
        prepared.forward_backward()
    assert counters["frames"]["total"] == before, "the eager driver recompiled its scan call"


def test_torch_traces_the_scanned_step_on_every_differentiated_call(prepared, traces: list[str]) -> None:
    import torch

    per_call = []
    for _ in range(2):
        traces.clear()
        prepared.forward_backward()
        per_call.append(sorted(traces))
    assert per_call[0] == per_call[1], "the traces per call changed between calls"
    assert {"create_hop_joint_graph", "call_backward"} <= set(per_call[1]), (
        f"torch no longer traces the step on every call ({per_call[1]}): the eager scan rows' explanation "
        "in docs/measuring.md is out of date"
    )
    traces.clear()
    with torch.no_grad():
        prepared.forward()
    assert traces == [], "without autograd nothing is traced"
