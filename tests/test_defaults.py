"""The library's defaults describe a modern training run, so a measurement that leaves a setting unsaid is priced
as such a run would be.

Most published tables of 2024-26 state the model, the hardware, the layout and the batch, and leave activation
recomputation, dropout and data-parallel overlap unsaid. The measured runs in templates/validation that state them
mostly run without recomputation (494 of 749), without dropout (591) and with overlapped data-parallel traffic (574).
Here each such row is priced twice - with what it states and with the three settings left to the defaults - and the
defaults must land within a few per cent. With the 2021 Megatron-LM defaults (full recomputation, dropout, exposed
gradient all-reduce) the same rows read a median 35 % slower (measured 2026-11-28).
"""
from __future__ import annotations

import statistics

import pytest

from flopsheet.scenario import resolve
from flopsheet.validate import Validator, load_points

UNSAID = ("recompute", "dropout", "dp_comm_overlap")


@pytest.fixture(scope="module")
def ratios():
    v = Validator()
    out = []
    for p in load_points():
        if p.category != "training":
            continue
        stated = v.scenario(p)
        said = {name: str(stated.values[name].raw) for name in UNSAID if name in stated.values}
        if said != {"recompute": "none", "dropout": "no", "dp_comm_overlap": "1"}:
            continue
        unsaid = v.scenario(p)
        for name in UNSAID:
            unsaid.values.pop(name, None)
        t_stated = v.model.evaluate(resolve(stated, v.model), check=False).scalar("step_time")
        t_default = v.model.evaluate(resolve(unsaid, v.model), check=False).scalar("step_time")
        out.append(t_default / t_stated)
    return out


def test_modern_runs_read_nearly_the_same_with_the_settings_left_unsaid(ratios):
    assert len(ratios) > 300
    # selective recomputation of the attention core costs a few per cent of the step; nothing else moves
    assert 1.0 <= statistics.median(ratios) < 1.05, statistics.median(ratios)
    assert sorted(ratios)[int(0.9 * len(ratios))] < 1.10
    assert max(ratios) < 1.35, max(ratios)  # standard (non-flash) attention recomputes its s x s scores
    # combined-1F1B MoE steps (Qwen3-235B on H100) read up to 0.2 % faster: the recomputed attention widens the
    # window the expert all-to-all hides behind by a little more than it adds - a per-layer bound, not a saving
    assert min(ratios) > 0.99, min(ratios)
