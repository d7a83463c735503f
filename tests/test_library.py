"""Loading formula files: every build error is a specific, located, picklable exception."""
from __future__ import annotations

import pickle

import pytest

from flopsheet import errors as E
from flopsheet.library import load_library

from conftest import SMALL, lib_from


def test_small_library_builds():
    lib = lib_from({"net/small": SMALL})
    assert set(lib.inputs) == {"bytes_moved", "link_bw", "ranks", "algo"}
    assert lib.inputs["bytes_moved"].default == 2**30  # "1 GiB" in coherent bytes
    assert lib.inputs["link_bw"].default == 100e9
    assert lib.nodes["ring_time"].file == "net/small.yaml"
    assert lib.nodes["ring_time"].line == 29
    assert lib.graph.has_edge("ring_time", "chosen_time")
    assert lib.order.index("ring_time") < lib.order.index("best_time")


def _err(files, cls):
    with pytest.raises(cls) as ei:
        lib_from(files)
    e = ei.value
    assert pickle.loads(pickle.dumps(e)).render() == e.render()  # sweeps ship errors between processes
    return e


def test_yaml_syntax_error_has_line():
    e = _err({"a": "doc: x\ninputs:\n  a: [1,\n"}, E.YamlSyntaxError)
    assert e.file == "a.yaml" and e.line is not None


def test_missing_required_keys():
    e = _err({"a": """
        doc: x
        nodes:
          speed:
            expr: 1
            unit: "1"
            doc: no source here
        """}, E.SchemaError)
    assert (e.node, e.line) == ("speed", 4) and "source" in e.detail
    e = _err({"a": "inputs: {}\n"}, E.SchemaError)
    assert "doc" in e.detail


def test_unknown_key_suggests():
    e = _err({"a": """
        doc: x
        inputs:
          width:
            unit: "1"
            default: 1
            doc: d
            bound: [0, 1]
        """}, E.SchemaError)
    assert "bound" in e.detail and "bounds" in e.detail


def test_duplicate_across_files_names_both_places():
    node = "doc: x\nnodes:\n  speed:\n    expr: 1\n    unit: '1'\n    doc: d\n    source: s\n"
    e = _err({"a": node, "b": node}, E.DuplicateNameError)
    assert "a.yaml:3" in e.detail and "b.yaml:3" in e.detail


def test_duplicate_within_file_is_not_silently_collapsed():
    text = ("doc: x\nnodes:\n  speed:\n    expr: 1\n    unit: '1'\n    doc: d\n    source: s\n"
            "  speed:\n    expr: 2\n    unit: '1'\n    doc: d\n    source: s\n")
    e = _err({"a": text}, E.DuplicateNameError)
    assert "lines 3 and 8" in e.detail


def test_unknown_name_suggests_close_match():
    e = _err({"a": SMALL.replace("2*(ranks - 1)/ranks", "2*(rank - 1)/ranks")}, E.UnknownNameError)
    assert e.node == "ring_time" and "`rank`" in e.detail and "ranks" in e.detail


def test_cycle_is_printed_whole():
    text = """
    doc: x
    nodes:
      alpha_time: {expr: beta_time, unit: s, doc: d, source: s}
      beta_time: {expr: gamma_time, unit: s, doc: d, source: s}
      gamma_time: {expr: alpha_time, unit: s, doc: d, source: s}
    """
    e = _err({"a": text}, E.CycleError)
    loop = e.detail.split(": ", 1)[1].split(" -> ")
    assert loop[0] == loop[-1] and set(loop) == {"alpha_time", "beta_time", "gamma_time"}


@pytest.mark.parametrize("body, cls, fragment", [
    ("choices: [a, b]\n    default: c", E.InputValueError, "not one of the choices"),
    ("choices: [a]\n    default: a", E.SchemaError, "two or more"),
    ("choices: [a, a]\n    default: a", E.SchemaError, "distinct"),
    ("unit: '1'\n    default: 5\n    bounds: [0, 4]", E.InputValueError, "outside the bounds"),
    ("unit: '1'\n    default: 5\n    bounds: [6, 4]", E.InputValueError, "empty"),
    ("unit: '1'\n    default: 5\n    bounds: 4", E.SchemaError, "[low, high]"),
    ("unit: '1'\n    default: 2.5\n    integer: true", E.InputValueError, "whole number"),
    ("unit: '1'\n    default: '80 GiB'", E.UnitError, "dimension byte, expected 1"),
    ("unit: 's'\n    default: fast", E.UnitError, "not a number"),
    ("unit: 'GiB'\n    default: 1", E.UnitError, "not a coherent base unit"),
    ("unit: 'parsecs'\n    default: 1", E.UnitError, "unknown unit"),
    ("unit: '1'\n    default: .nan", E.InputValueError, "not finite"),
])
def test_bad_inputs(body, cls, fragment):
    text = f"doc: x\ninputs:\n  knob:\n    doc: d\n    {body}\n"
    e = _err({"a": text}, cls)
    assert fragment in e.detail and e.node == "knob" and e.line == 3


@pytest.mark.parametrize("name, fix", [
    ("fp8", "fp8_value"), ("h100", "h100_value"), ("tp1", "tp1_value"), ("r", "r_value"),
    ("c", "c_value"), ("r1c1", "r1c1_value"), ("sum", "sum_value"), ("ln", "ln_value"),
    ("MixedCase", "mixedcase"), ("min", "min_value"), ("lambda", "lambda_value"),
    ("2fast", "x_2fast"),
])
def test_excel_unsafe_names_are_refused_with_a_fix(name, fix):
    text = f"doc: x\ninputs:\n  {name}:\n    unit: '1'\n    default: 1\n    doc: d\n"
    e = _err({"a": text}, E.NameRuleError)
    assert f"try `{fix}`" in e.detail


def test_condition_declared_as_number():
    text = """
    doc: x
    inputs:
      mem: {unit: byte, default: 1, doc: d}
    nodes:
      fits: {expr: mem <= 2*mem, unit: "1", doc: d, source: s}
    """
    e = _err({"a": text}, E.SchemaError)
    assert "declared as a number but the formula is a condition" in e.detail


def test_condition_nodes_feed_if():
    lib = lib_from({"a": """
    doc: x
    inputs:
      mem: {unit: byte, default: 1, doc: d}
    nodes:
      fits: {expr: mem <= 2*mem, unit: bool, doc: d, source: s}
      spill: {expr: "if_(fits, 0, mem)", unit: byte, doc: d, source: s}
    """})
    assert lib.nodes["fits"].is_bool


def test_bundled_library_loads_with_sources_everywhere():
    lib = load_library()
    assert len(lib.nodes) >= 15
    for n in lib.nodes.values():
        assert n.unit and n.doc and n.source, n.name
    for i in lib.inputs.values():
        assert i.doc and i.source, i.name


def test_formula_folder_errors(tmp_path):
    with pytest.raises(E.SchemaError, match="does not exist"):
        load_library(tmp_path / "nope")
    with pytest.raises(E.SchemaError, match="no \\*.yaml"):
        load_library(tmp_path)


def test_user_folder_shows_real_paths(write_lib):
    root = write_lib({"sub/net.yaml": SMALL.replace("2*(ranks", "2*(rank")})
    with pytest.raises(E.UnknownNameError) as ei:
        load_library(root)
    assert ei.value.file.endswith("sub/net.yaml") and ei.value.line == 29
