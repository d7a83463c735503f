"""Reverse-mode derivatives through the DAG, checked against central finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from flopsheet.evaluate import Model
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve
from flopsheet.sensitivity import Differentiator

from conftest import SMALL, lib_from


def central_difference(model, values, output, name, rel=1e-6):
    x = float(values[name])
    h = rel * abs(x) if x else rel
    up = dict(values, **{name: x + h})
    dn = dict(values, **{name: x - h})
    return (model.evaluate(up).scalar(output) - model.evaluate(dn).scalar(output)) / (2 * h)


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
    sens = Differentiator(model).gradient(res, output)
    assert sens.derivatives, output
    y = res.scalar(output)
    checked = 0
    for name, d in sens.derivatives.items():
        lo = model.lib.inputs[name].bounds[0]
        if lo is not None and float(values[name]) == lo:
            continue  # at a bound (e.g. experts = 0) only a one-sided derivative exists
        fd = central_difference(model, values, output, name)
        checked += 1
        # relative 1e-6; a true zero (e.g. time_to_train vs global_batch) is compared on the
        # scale of the output per unit input, where rounding leaves ~1e-13
        floor = 1e-9 * abs(y / float(values[name]))
        assert abs(d - fd) <= 1e-6 * max(abs(fd), abs(d)) + floor, (output, name, d, fd)
    assert checked >= 5


def test_elasticities_hand_checked(bundled):
    model, values = bundled
    sens = Differentiator(model).gradient(model.evaluate(values), "step_time")
    e = sens.elasticities
    # step_time = F(B, s, l, h, V) / (n * X): exactly -1 in X and in each parallel degree, +1 in B
    assert e["achieved_flops_per_gpu"] == pytest.approx(-1, rel=1e-12)
    assert e["tp"] == pytest.approx(-1, rel=1e-12)
    assert e["global_batch"] == pytest.approx(1, rel=1e-12)
    assert "token" not in e and "flop_per_mac" not in e  # unit constants are not knobs
    assert "recompute" not in e  # categorical inputs have no derivative
    # F ~ l (24 h^2 + 4 s h) per token at fixed head width: elasticity in layers is the
    # layers' share of the FLOPs (logits excluded), 1 - V/(16 l h) / (1 + s/6h + V/16lh)
    l, h, s, V = 96, 12288, 2048, 51200
    share = 1 - (V / (16 * l * h)) / (1 + s / (6 * h) + V / (16 * l * h))
    assert e["layers"] == pytest.approx(share, rel=1e-12)


def test_intermediate_node_adjoints(bundled):
    model, values = bundled
    sens = Differentiator(model).gradient(model.evaluate(values), "step_time")
    res = model.evaluate(values)
    # d step_time / d hardware_flops_per_step = 1 / (n * X)
    n, x = res.scalar("n_gpus"), res.scalar("achieved_flops_per_gpu")
    assert sens.node_derivatives["hardware_flops_per_step"] == pytest.approx(1 / (n * x), rel=1e-12)


def test_overridden_node_is_a_leaf(bundled):
    model, values = bundled
    v = dict(values, hardware_flops_per_step=1e21)
    sens = Differentiator(model).gradient(model.evaluate(v), "step_time")
    assert "hardware_flops_per_step" in sens.derivatives
    assert "layers" not in sens.derivatives  # cut off by the override
    assert sens.elasticities["hardware_flops_per_step"] == pytest.approx(1, rel=1e-12)


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
        sens = Differentiator(model).gradient(res, out)
        for name, dv in sens.derivatives.items():
            fd = central_difference(model, values, out, name)
            assert abs(dv - fd) <= 1e-6 * max(abs(fd), abs(dv), 1e-300), (out, name)


def test_arrays_are_refused(bundled):
    model, values = bundled
    res = model.evaluate(dict(values, tp=np.array([1.0, 2.0])))
    with pytest.raises(Exception, match="one configuration"):
        Differentiator(model).gradient(res, "step_time")
