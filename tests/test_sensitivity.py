"""Reverse-mode derivatives through the DAG, checked against central finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve
from flopsheet.sensitivity import Differentiator

from conftest import SMALL, lib_from


_DIFFERENTIATORS: dict[int, Differentiator] = {}


def differentiator(model) -> Differentiator:
    """One per model: partial derivatives compile on first use (~1.5 s for the bundled library)."""
    return _DIFFERENTIATORS.setdefault(id(model), Differentiator(model))


def central_difference(model, values, output, name, rel=1e-6):
    x = float(values[name])
    h = rel * abs(x) if x else rel
    up = dict(values, **{name: x + h})
    dn = dict(values, **{name: x - h})
    up_y = model.evaluate(up, outputs=[output]).scalar(output)
    dn_y = model.evaluate(dn, outputs=[output]).scalar(output)
    return (up_y - dn_y) / (2 * h)


# whole-number inputs whose formulas are smooth around the bundled scenario's values
SMOOTH_WHOLE_NUMBERS = {"layers", "hidden", "vocab", "global_batch", "ffn_hidden"}


@pytest.fixture(scope="module")
def bundled():
    lib = load_library()
    model = Model(lib)
    sc = load_scenario("gpt3-175b-sc21")
    values = dict(model.defaults(), **resolve(sc, model))
    return model, values


@pytest.mark.parametrize("output", ["step_time", "mfu", "time_to_train", "total_params",
                                    "hardware_flops_per_step", "tokens_per_second"])
def test_gradient_matches_finite_differences(bundled, output):
    model, values = bundled
    res = model.evaluate(values)
    sens = differentiator(model).gradient(res, output)
    assert sens.derivatives, output
    y = res.scalar(output)
    checked = 0
    for name, d in sens.derivatives.items():
        inp = model.lib.inputs[name]
        if inp.bounds[0] is not None and float(values[name]) == inp.bounds[0]:
            continue  # at a bound (e.g. experts = 0) only a one-sided derivative exists
        if inp.integer and name not in SMOOTH_WHOLE_NUMBERS:
            continue  # e.g. tp = 8 sits on `tp <= scaleup_domain_size`: a step, not a slope
        fd = central_difference(model, values, output, name)
        checked += 1
        # relative 1e-6; a true zero (e.g. time_to_train vs global_batch) is compared on the
        # scale of the output per unit input, where rounding leaves ~1e-13
        floor = 1e-9 * abs(y / float(values[name]))
        assert abs(d - fd) <= 1e-6 * max(abs(fd), abs(d)) + floor, (output, name, d, fd)
    assert checked >= 3


def test_elasticities_hand_checked(bundled):
    model, values = bundled
    # with the achieved FLOP/s given (as SC21 Eq. 4 does), time = T F_tok / (n X)
    v = dict(values, achieved_flops_per_gpu=140e12)
    res = model.evaluate(v)
    sens = differentiator(model).gradient(res, "time_to_train")
    e = sens.elasticities
    assert e["achieved_flops_per_gpu"] == pytest.approx(-1, rel=1e-12)
    assert e["train_tokens"] == pytest.approx(1, rel=1e-12)
    assert e["tp"] == pytest.approx(-1, rel=1e-12) and e["dp"] == pytest.approx(-1, rel=1e-12)
    assert "token" not in e and "flop_per_mac" not in e  # unit constants are not knobs
    assert "recompute" not in e  # categorical inputs have no derivative
    assert "gemm_efficiency" not in e  # cut off by the override
    # F per token ~ 96 l h^2 (1 + s/6h) + 6 h V: the layers' share of the FLOPs
    l, h, s, V = 96, 12288, 2048, 51200
    share = 1 - (V / (16 * l * h)) / (1 + s / (6 * h) + V / (16 * l * h))
    assert e["layers"] == pytest.approx(share, rel=1e-12)
    # d time / d hardware_flops_per_token = T / (n X)
    assert sens.node_derivatives["hardware_flops_per_token"] == pytest.approx(300e9 / (1024 * 140e12),
                                                                             rel=1e-12)


def test_overridden_node_is_a_leaf(bundled):
    model, values = bundled
    sens = differentiator(model).gradient(model.evaluate(dict(values, step_time=20.0)),
                                          "tokens_per_second")
    assert "step_time" in sens.derivatives and "gemm_efficiency" not in sens.derivatives
    assert sens.elasticities["step_time"] == pytest.approx(-1, rel=1e-12)


def test_nonsmooth_points_are_flagged():
    model = Model(lib_from({"net/small": SMALL}))
    d = Differentiator(model)
    # ring 2*(p-1)/p vs tree 2*log2(p)/4: both 0 at p = 1 -> tie in min()
    res = model.evaluate({"ranks": 1.0}, outputs=["best_time"])
    notes = d.gradient(res, "best_time").nonsmooth
    assert any("min() arguments tie" in n for n in notes), notes
    res = model.evaluate({"ranks": 64.0})
    assert not d.gradient(res, "best_time").nonsmooth
    # steps = ceil(bytes/(bw*ring_time)) = ceil(8/14) = 1 off a jump, ceil(1) on one (ranks = 2)
    assert not d.gradient(model.evaluate(), "steps").nonsmooth
    assert d.gradient(model.evaluate(), "steps").derivatives["bytes_moved"] == 0
    notes = d.gradient(model.evaluate({"ranks": 2.0}), "steps").nonsmooth
    assert any("sits on a step" in n for n in notes), notes


def test_smooth_small_library_matches_finite_differences():
    model = Model(lib_from({"net/small": SMALL}))
    values = dict(model.defaults(), ranks=48.0, algo=1)
    res = model.evaluate(values)
    for out in ["ring_time", "chosen_time", "best_time"]:
        sens = differentiator(model).gradient(res, out)
        for name, dv in sens.derivatives.items():
            fd = central_difference(model, values, out, name)
            assert abs(dv - fd) <= 1e-6 * max(abs(fd), abs(dv), 1e-300), (out, name)


def test_arrays_are_refused(bundled):
    model, values = bundled
    res = model.evaluate(dict(values, gemm_efficiency=np.array([0.5, 0.6])))
    with pytest.raises(Exception, match="one configuration"):
        differentiator(model).gradient(res, "step_time")


def test_tied_max_follows_one_branch():
    """min(t, t, u) at t < u has slope 1 in t (sympy's Heaviside form would give 0.25 or 2)."""
    model = Model(lib_from({"a": """
    doc: x
    inputs:
      span: {unit: s, default: 2, doc: d}
      other: {unit: s, default: 5, doc: d}
    nodes:
      same_span: {expr: span*1, unit: s, doc: d, source: s}
      fastest: {expr: "min(span, same_span, other)", unit: s, doc: d, source: s}
      slowest: {expr: "max(other, 2*span, other)", unit: s, doc: d, source: s}
    """}))
    d = Differentiator(model)
    sens = d.gradient(model.evaluate(), "fastest")
    assert sens.derivatives == {"span": 1.0, "other": 0.0}
    assert any("tie" in n for n in sens.nonsmooth)
    sens = d.gradient(model.evaluate({"span": 1.0}), "slowest")
    assert sens.derivatives == {"span": 0.0, "other": 1.0}


def test_mod_differentiates_like_its_spreadsheet_form():
    """d/da MOD(a, b) = 1 and d/db = -INT(a/b), away from the jumps."""
    model = Model(lib_from({"a": """
    doc: x
    inputs:
      span: {unit: s, default: 7.5, doc: d}
      period: {unit: s, default: 2, doc: d}
    nodes:
      phase: {expr: span % period, unit: s, doc: d, source: s}
    """}))
    sens = Differentiator(model).gradient(model.evaluate(), "phase")
    assert sens.value == 1.5
    assert sens.derivatives == {"span": 1.0, "period": -3.0}


def test_nonsmooth_notes_do_not_depend_on_the_cached_probe_order(bundled):
    """The probes of a node are cached in the order some earlier process walked its formula; the
    notes come out sorted, so a workbook's Sensitivity sheet is the same whichever process
    filled the cache (a GPT-3 step has several one-sided spots in one node)."""
    from flopsheet.nonsmooth import _specs, notes
    model, values = bundled
    res = model.evaluate(values)
    scope = model.lib.ancestors("step_time") | {"step_time"}
    first = notes(model, res, scope)
    by_node = [n.split(":", 1)[0] for n in first]
    assert len(first) > len(set(by_node))  # some node has more than one note: order matters
    specs = _specs(model)
    for name in list(specs):
        specs[name] = list(reversed(specs[name]))
    model.__dict__.pop("_probe_programs", None)
    try:
        assert notes(model, res, scope) == first
    finally:
        for name in list(specs):
            specs[name] = list(reversed(specs[name]))
        model.__dict__.pop("_probe_programs", None)
