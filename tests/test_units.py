"""Dimensions: derived from each formula and checked against its declared unit."""
from __future__ import annotations

import pytest

from flopsheet.errors import UnitError
from flopsheet.units import convert_value, dim_str, parse_unit

from conftest import lib_from

HEAD = """
doc: x
inputs:
  size: {unit: byte, default: 1, doc: d}
  speed: {unit: byte/s, default: 1, doc: d}
  outlay: {unit: USD, default: 1, doc: d}
  energy: {unit: J, default: 1, doc: d}
  ranks: {unit: "1", default: 1, doc: d}
  tokens: {unit: token, default: 1, doc: d}
  work: {unit: FLOP, default: 1, doc: d}
  span: {unit: s, default: 1, doc: d}
nodes:
"""


def node(expr, unit):
    return lib_from({"u": HEAD + f"  probe: {{expr: '{expr}', unit: '{unit}', doc: d, source: s}}\n"})


@pytest.mark.parametrize("expr, unit", [
    ("size/speed", "s"),
    ("size/span", "byte/s"),
    ("work/span", "FLOP/s"),
    ("energy/span", "W"),
    ("outlay/energy", "USD/J"),
    ("max(0, size - speed*span)", "byte"),
    ("sqrt(size*size)", "byte"),
    ("(size/speed)**2/span", "s"),
    ("size**0.5*size**(1/2)", "byte"),
    ("ceil(size/(speed*span))", "1"),
    ("log2(ranks) + exp(size/size)", "1"),
    ("if_(size > 0, span, 0)", "s"),
    ("abs(size % (2*size))", "byte"),
])
def test_consistent(expr, unit):
    node(expr, unit)


@pytest.mark.parametrize("expr, unit, fragment", [
    ("size/speed", "byte", "declared unit `byte` (byte) but the formula gives s"),
    ("size + speed", "byte", "mismatched units: `size` is byte but `speed` is byte/s"),
    ("log(size)", "1", "the argument of log() must be 1, found byte"),
    ("max(outlay, energy)", "USD", "`outlay` is USD but `energy` is J"),
    ("ranks + tokens", "1", "`ranks` is 1 but `tokens` is token"),
    ("size + 1", "byte", "`size` is byte but `1` is 1"),
    ("size**ranks", "byte", "needs a constant exponent"),
    ("2**size", "1", "an exponent must be 1"),
    ("ceil(span)", "1", "the argument of ceil() must be 1"),
    ("if_(size > span, 1, 2)", "1", "mismatched units"),
    ("work/span", "GFLOP/s", "not a coherent base unit"),
])
def test_mismatch_is_reported(expr, unit, fragment):
    with pytest.raises(UnitError) as ei:
        node(expr, unit)
    assert fragment in ei.value.detail and ei.value.node == "probe"


def test_scaled_units_convert_at_the_boundary():
    dim_b, _ = parse_unit("byte")
    assert convert_value("80 GiB", dim_b) == 80 * 2**30
    assert convert_value("1.5 TB", dim_b) == 1.5e12
    assert convert_value("8 bit", dim_b) == 1
    dim_bw, _ = parse_unit("byte/s")
    assert convert_value("3.35 TB/s", dim_bw) == pytest.approx(3.35e12)
    dim_f, _ = parse_unit("FLOP/s")
    assert convert_value("989 TFLOP/s", dim_f) == pytest.approx(989e12)
    dim_e, _ = parse_unit("J")
    assert convert_value("1 kWh", dim_e) == pytest.approx(3.6e6)  # kWh vs W*s scale
    dim_t, _ = parse_unit("s")
    assert convert_value("2 us", dim_t) == pytest.approx(2e-6)
    assert convert_value("1 h", dim_t) == 3600
    with pytest.raises(UnitError, match="dimension byte/s, expected byte"):
        convert_value("3 GB/s", dim_b)


def test_byte_flop_token_usd_are_distinct_dimensions():
    dims = {u: parse_unit(u)[0] for u in ["byte", "FLOP", "token", "USD", "1", "bit"]}
    assert len({str(d) for u, d in dims.items() if u != "bit"}) == 5
    assert dims["bit"] == dims["byte"]
    assert dim_str(parse_unit("W")[0]) == "J/s"
