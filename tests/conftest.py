"""Shared fixtures: small formula libraries written to a temporary folder."""
from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from pathlib import Path

import pytest

from flopsheet.evaluate import Model
from flopsheet.exports.recalc import availability, shared
from flopsheet.library import build_library, load_library
from flopsheet.scenario import load_scenario, resolve

REQUIRE = "FLOPSHEET_REQUIRE_LIBREOFFICE"  # set by .ci/run: a missing LibreOffice fails, not skips


@pytest.fixture(scope="session")
def lo():
    """One headless LibreOffice for the test session; skipped (with the reason) where absent."""
    ok, why = availability()
    if not ok:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {why}")
        pytest.skip(why)
    return shared()


def lib_from(files: dict[str, str]):
    """Build a library from {topic: yaml_text} without touching the disk."""
    raw = [(f"{topic}.yaml", topic, textwrap.dedent(text)) for topic, text in files.items()]
    return build_library(raw)


@pytest.fixture
def write_lib(tmp_path):
    """Write {relative_path: yaml_text} under tmp_path/formulas and return that folder."""
    def write(files: dict[str, str]):
        root = tmp_path / "formulas"
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(textwrap.dedent(text))
        return root
    return write


SMALL = """
doc: A small library for tests.
inputs:
  bytes_moved:
    unit: byte
    default: 1 GiB
    bounds: [0, null]
    doc: Bytes to move.
    source: test
  link_bw:
    unit: byte/s
    default: 100 GB/s
    bounds: [0, null]
    doc: Link bandwidth.
    source: test
  ranks:
    unit: "1"
    default: 8
    bounds: [1, 1024]
    integer: true
    doc: Ranks.
    source: test
  algo:
    choices: [ring, tree]
    default: ring
    doc: Algorithm.
    source: test
nodes:
  ring_time:
    expr: 2*(ranks - 1)/ranks*bytes_moved/link_bw
    unit: s
    doc: Ring all-reduce time.
    source: test
  tree_time:
    expr: 2*log2(ranks)*bytes_moved/link_bw/4
    unit: s
    doc: Tree time.
    source: test
  chosen_time:
    expr: select(algo, ring=ring_time, tree=tree_time)
    unit: s
    doc: Time of the chosen algorithm.
    source: test
  best_time:
    expr: min(ring_time, tree_time)
    unit: s
    doc: Faster of the two.
    source: test
  chunk_bytes:
    expr: 64*2**20*bytes_moved/bytes_moved*link_bw/link_bw
    unit: "1"
    doc: Chunk size as a count (dimension test helper).
    source: test
  steps:
    expr: ceil(bytes_moved/(link_bw*ring_time))
    unit: "1"
    doc: A step function of the inputs.
    source: test
"""


@pytest.fixture(scope="module")
def model():
    """The bundled library, compiled (cached per library, so cheap after the first module)."""
    return Model(load_library())


def run_scenario(model, scenario, **sets):
    """Evaluate a bundled scenario with ``name=value`` overrides, as `--set` would."""
    sc = load_scenario(scenario, [f"{k}={v}" for k, v in sets.items()])
    return model.evaluate(resolve(sc, model))


def evaluate_outputs(model, outputs, scenario=None, **values):
    """Evaluate ``outputs`` on a bundled scenario (or the library defaults) with raw values (any unit text) set,
    each as a float array."""
    import numpy as np
    base = resolve(load_scenario(scenario), model) if scenario else {}
    for k, v in values.items():
        base[k] = model.encode(k, v)
    res = model.evaluate(base, outputs=outputs)
    return {o: np.asarray(res[o], dtype=float) for o in outputs}


@pytest.fixture(scope="module")
def validator():
    """A validator on the bundled library, shared by the modules that run validation points."""
    from flopsheet.validate import Validator
    return Validator()


def family_points(family: str):
    """The validation points of one family, in file order."""
    from flopsheet.validate import load_points
    return [p for p in load_points() if p.family == family]


def expected_value(point, metric: str) -> float:
    """The measured value a validation point states for ``metric``."""
    return next(e.value for e in point.expects if e.metric == metric)


def evaluate_point(validator, point, outputs: list[str]) -> dict[str, float]:
    """``outputs`` of a validation point's scenario (with its first expectation's settings), as scalars."""
    vals = resolve(validator.scenario(point, point.expects[0].values), validator.model)
    r = validator.model.evaluate(vals, outputs=outputs)
    return {name: r.scalar(name) for name in outputs}


def fit_errors(validator, points, **overrides):
    """predicted / measured - 1 of every counted row of ``points`` as `validate --fit` evaluates them, with
    ``name=value`` (encoded) overrides on top."""
    from flopsheet.validate_fit import collect, predict
    rows = collect(validator, points)
    return predict(validator, rows, overrides) / rows.measured - 1


def point_runner(default_pid: str):
    """Evaluate validation points as `flopsheet validate` builds them, with ``name=value`` overrides:
    ``run(pid=default_pid, **sets)``."""
    from flopsheet.validate import Validator, load_points
    v = Validator()
    pts = {p.id: p for p in load_points()}

    def run(pid=default_pid, **sets):
        return v.model.evaluate(resolve(v.scenario(pts[pid], sets), v.model))
    return run


def load_tool(name: str):
    """The script tools/<name>.py loaded as module ``name`` (the tools are scripts, not a package; registered in
    sys.modules because dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
