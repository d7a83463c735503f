"""Fuzzing: whatever text a file or the command line holds, the engine answers with a
number or a FlopsheetError - never another exception, a hang or a crash.

Four strategies: formula expressions (parsed, unit-checked, evaluated on a scalar and
on an array, differentiated), whole formula files (YAML text), scenario files and unit
strings. CI runs a small fixed budget, derandomized so a failure reproduces; a longer
session raises it:

    FLOPSHEET_FUZZ_EXAMPLES=1000000 FLOPSHEET_FUZZ_SECONDS=150 FLOPSHEET_FUZZ_RANDOM=1 \\
    FLOPSHEET_FUZZ_LOG=/tmp/fuzz.log python -m pytest tests/test_fuzz.py -k fuzz_
    sort /tmp/fuzz.log | uniq -c        # cases run per strategy

Every crash found is kept in the corpus below (and in ``tests/data/fuzz_corpus/``) and
replayed on every run.
"""
from __future__ import annotations

import os
import signal
import string
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flopsheet.errors import FlopsheetError
from flopsheet.evaluate import Model
from flopsheet.library import build_library, load_library
from flopsheet.scenario import load_scenario, resolve
from flopsheet.sensitivity import Differentiator
from flopsheet.units import DIMENSIONLESS, convert_value, parse_unit

EXAMPLES = int(os.environ.get("FLOPSHEET_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                derandomize=os.environ.get("FLOPSHEET_FUZZ_RANDOM") != "1", database=None,
                suppress_health_check=list(HealthCheck))
CORPUS = Path(__file__).parent / "data" / "fuzz_corpus"
CASE_SECONDS = 20  # one case may not take longer (a hang is a finding too)


class Hang(BaseException):
    """Not an Exception, so no `except Exception` in library code can swallow it."""


class TimeUp(BaseException):
    """A long session's time for one strategy is over (hypothesis lets it through)."""


def session(run) -> None:
    """Run a hypothesis test; in a timed session its end is a pass, not an error."""
    try:
        run()
    except TimeUp:
        pass


#: A long session: each fuzz test stops running new cases after this many seconds, and
#: every case run is counted in FLOPSHEET_FUZZ_LOG (one line per case: strategy name).
SECONDS = float(os.environ.get("FLOPSHEET_FUZZ_SECONDS", "0"))
LOG = os.environ.get("FLOPSHEET_FUZZ_LOG")
_STARTED: dict[str, float] = {}


def bounded(fn, *args):
    """Run ``fn``; FlopsheetError is an answer, anything else (or > CASE_SECONDS) fails."""
    if SECONDS:
        start = _STARTED.setdefault(fn.__name__, time.monotonic())
        if time.monotonic() - start > SECONDS:
            raise TimeUp  # this strategy's time is up: stop hypothesis at once
    if LOG:
        with open(LOG, "a") as f:
            f.write(fn.__name__ + "\n")

    def expired(*_):
        raise Hang(f"no answer within {CASE_SECONDS} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(CASE_SECONDS)
    try:
        return fn(*args)
    except FlopsheetError as e:
        assert str(e) and "\n" not in e.render(), f"error is not one line: {e!r}"
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------ expressions
NAMES = ["x_a", "x_b", "t_s", "x_n", "algo_kind", "flag", "zz", "min", "log", "select", "n", "c"]
FUNCS = ["min", "max", "ceil", "floor", "log", "log2", "exp", "sqrt", "abs", "if_", "select",
         "pow", "__import__", "eval"]
NUMBERS = st.one_of(st.integers(-10, 10).map(str), st.sampled_from(
    ["0", "0.0", "1e300", "1e-300", "1e999", "9" * 400, "2**64", "0.5", "1e308", "-0", "3.0e-5",
     "0x10", "1_000", "1j", "True", "None", "'x'"]))
BINOPS = ["+", "-", "*", "/", "**", "%", "//", "<", "<=", "==", "!=", ">", " and ", " or ",
          "@", "&"]


def _expr():
    leaf = st.one_of(NUMBERS, st.sampled_from(NAMES))

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(BINOPS), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
            st.tuples(st.sampled_from(["-", "+", "not ", "~"]), inner).map(lambda t: t[0] + t[1]),
            st.tuples(st.sampled_from(FUNCS), st.lists(inner, max_size=4)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, inner).map(lambda t: f"select(algo_kind, x={t[0]}, y={t[1]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"if_({t[0]} > {t[1]}, {t[1]}, {t[2]})"),
        )
    grammar = st.recursive(leaf, extend, max_leaves=25)
    junk = st.text(alphabet=string.printable, max_size=60)
    return st.one_of(grammar, grammar, grammar, junk)


def _library_text(expr: str, unit: str = "1") -> str:
    return yaml.safe_dump({
        "doc": "fuzz",
        "inputs": {
            "x_a": {"unit": "1", "default": 3, "doc": "a", "source": "s"},
            "x_b": {"unit": "1", "default": 0.5, "doc": "b", "source": "s"},
            "x_n": {"unit": "1", "default": 0, "doc": "n", "source": "s"},
            "t_s": {"unit": "s", "default": 2, "doc": "t", "source": "s"},
            "algo_kind": {"choices": ["x", "y"], "default": "y", "doc": "c", "source": "s"},
        },
        "nodes": {
            "flag": {"expr": "x_a > x_b", "unit": "bool", "doc": "f", "source": "s"},
            "out": {"expr": expr, "unit": unit, "doc": "o", "source": "s"},
        },
    }, sort_keys=False)


def expression_answers(expr: str, unit: str = "1") -> None:
    """Build, evaluate (one config and an array), differentiate: numbers or FlopsheetError."""
    lib = build_library([("fuzz.yaml", "fuzz", _library_text(expr, unit))])
    model = Model(lib)
    res = model.evaluate({})
    out = np.asarray(res["out"], dtype=float)
    assert np.isfinite(out).all(), f"non-finite result {out} passed unchecked"
    try:
        arr = model.evaluate({"x_a": np.array([0.0, 1.0, 2.5, 1e300]),
                              "x_n": np.array([0.0, -1.0, 7.0, 0.5])})
        assert np.isfinite(np.asarray(arr["out"], dtype=float)).all()
    except FlopsheetError:
        pass
    sens = Differentiator(model).gradient(res, "out")
    assert isinstance(sens.value, float)


def test_fuzz_library_is_valid():
    """The fuzzed formula sits in a library that builds, evaluates and differentiates
    (otherwise every case would stop at the same early error and test nothing)."""
    expression_answers("x_a*x_b + if_(flag, 1, 2) + select(algo_kind, x=1, y=x_n)", "1")
    lib = build_library([("fuzz.yaml", "fuzz", _library_text("x_a*2 + t_s/t_s"))])
    assert Model(lib).evaluate({})["out"] == 7.0


@FUZZ
@given(_expr(), st.sampled_from(["1", "1", "s", "byte"]))
def _fuzz_expressions(expr, unit):
    bounded(expression_answers, expr, unit)


def test_fuzz_expressions():
    session(_fuzz_expressions)


# ------------------------------------------------------------------ whole formula files
_KEYS = ["doc", "inputs", "nodes", "expr", "unit", "default", "source", "choices", "bounds",
         "integer", "display", "x_a", "x_b", "out", "<<"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                     st.text(max_size=20), st.sampled_from(["80 GiB", "1", "s", "byte/s",
                                                            "x_a*2", "[1, 2]", "GiB**99"]))
_TREE = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5)),
    max_leaves=30)


def _mutate(text: str, data) -> str:
    """Insert, delete or replace a few characters of a valid text."""
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["ins", "del", "rep", "dup"]))
        s = data.draw(st.text(alphabet="[]{}:-*&!|>'\"#\n \t,?%@`\\\x00\xff\u2028ab1", max_size=4))
        if op == "ins":
            text = text[:i] + s + text[i:]
        elif op == "del":
            text = text[:i] + text[i + len(s) + 1:]
        elif op == "rep":
            text = text[:i] + s + text[i + len(s):]
        else:
            j = data.draw(st.integers(0, len(text)))
            text = text[:i] + text[min(i, j):max(i, j)] + text[i:]
    return text


def formula_file_answers(text: str) -> None:
    lib = build_library([("fuzz.yaml", "fuzz", text)])
    model = Model(lib)
    res = model.evaluate({})
    for n in lib.order:
        if not lib.nodes[n].is_bool:
            assert np.isfinite(np.asarray(res[n], dtype=float)).all()


@FUZZ
@given(st.data())
def _fuzz_formula_files(data):
    kind = data.draw(st.sampled_from(["mutated", "tree", "text"]))
    if kind == "mutated":
        text = _mutate(_library_text(data.draw(_expr())), data)
    elif kind == "tree":
        text = yaml.safe_dump(data.draw(_TREE))
    else:
        text = data.draw(st.text(max_size=200))
    bounded(formula_file_answers, text)


def test_fuzz_formula_files():
    session(_fuzz_formula_files)


# ------------------------------------------------------------------ scenario files
_REFS = st.sampled_from(["gpt3-175b-sc21", "models/gpt3-175b", "hardware/a100-sxm4-80gb",
                         "systems/dgx-a100-superpod", "nope", "s", "./s.yaml", "../x",
                         "/dev/null", "scenarios/sc21-table1-1t", "models/llama2-70b"])
_INPUT_NAMES = st.sampled_from(["tp", "pp", "dp", "cp", "micro_batch", "global_batch", "seq_len",
                                "recompute", "hbm_capacity", "step_time", "heads", "layers",
                                "nonexistent", "fits_in_memory", "mfu", "zero_stage"])
_VALUES = st.one_of(
    st.integers(-5, 4096), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.none(), st.text(max_size=15),
    st.sampled_from(["80 GiB", "1 TB/s", "full", "selective", "8 s", "1e999", "2 GiB**3",
                     "80 GiB**9**9**9", "-1 GiB", "0", "9" * 400]),
    st.lists(st.integers(1, 64), min_size=0, max_size=5),
    st.fixed_dictionaries({"value": st.integers(1, 16), "source": st.text(max_size=5)}))


def scenario_answers(path: Path) -> None:
    sc = load_scenario(str(path))
    model = Model(load_library())
    values = resolve(sc, model)
    res = model.evaluate(values, outputs=["step_time", "memory_per_gpu", "n_gpus"])
    assert np.isfinite(np.asarray(res["step_time"], dtype=float)).all()


@FUZZ
@given(st.data())
def _fuzz_scenario_files(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("sc")
    kind = data.draw(st.sampled_from(["structured", "structured", "mutated"]))
    doc = {"doc": data.draw(st.one_of(st.text(max_size=10), st.none(), st.integers())),
           "use": data.draw(st.one_of(st.lists(_REFS, max_size=3), _REFS, st.integers())),
           "values": data.draw(st.one_of(st.dictionaries(_INPUT_NAMES, _VALUES, max_size=5),
                                         st.lists(st.integers()), st.text(max_size=5))),
           "report": data.draw(st.one_of(st.lists(_INPUT_NAMES, max_size=3), st.text(max_size=5)))}
    extra = data.draw(st.dictionaries(st.sampled_from(["source", "bogus", "use"]), _VALUES,
                                      max_size=1))
    doc.update(extra)
    text = yaml.safe_dump(doc, sort_keys=False)
    if kind == "mutated":
        text = _mutate(text, data)
    p = folder / "s.yaml"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    bounded(scenario_answers, p)


def test_fuzz_scenario_files(tmp_path_factory):
    session(lambda: _fuzz_scenario_files(tmp_path_factory))


# ------------------------------------------------------------------ unit strings
_UNIT_ATOMS = ["GiB", "GB", "s", "ms", "byte", "FLOP", "TFLOP", "token", "USD", "W", "J", "h",
               "m", "mm", "%", "1", "bit", "kWh", "Ki", "x", "e", "inf", "nan", "pi"]
_UNIT_TEXT = st.one_of(
    st.lists(st.one_of(st.sampled_from(_UNIT_ATOMS), st.sampled_from(
        ["*", "/", "**", "^", " ", "(", ")", "-", "2", "9", "99", ".", "e9", "**9**9"])),
        max_size=12).map("".join),
    st.text(alphabet="GiBsmk*/^() -0123456789.%µ_eE", max_size=30),
    st.text(max_size=20))


def unit_answers(unit: str) -> None:
    try:
        dim, factor = parse_unit(unit)
        assert factor > 0 and np.isfinite(factor)
    except ValueError:
        pass
    x = convert_value(f"80 {unit}", DIMENSIONLESS)
    assert isinstance(x, float)


@FUZZ
@given(_UNIT_TEXT)
def _fuzz_unit_strings(unit):
    bounded(unit_answers, unit)


def test_fuzz_unit_strings():
    session(_fuzz_unit_strings)


# ------------------------------------------------------------------ the corpus
#: Inputs that once crashed or hung the engine (found by the fuzzers above or by hand),
#: replayed on every run. Each is (kind, text).
CRASHES = [
    ("expr", "((10**64)**64)**64"),                           # ValueError: int str digits
    ("expr", "x_a*1e300*1e300*1e300*1e300*1e300"),             # OverflowError at evaluation
    ("expr", "max(" + ", ".join(["x_a"] * 300) + ")"),         # > 255 arguments
    ("expr", "-" * 19000 + "x_a"),                              # MemoryError in ast.parse
    ("expr", "(-8)**(1/3)"),                                  # complex constant, TypeError
    ("expr", "(1/select(algo_kind, x=0, y=0))"),              # KeyError ComplexInfinity
    ("expr", "1/if_(x_a > 1, 0, 1)"),                          # zoo in one branch
    ("expr", "if_(0 > 1, 1, x_a)"),                            # sympy TypeError in diff
    ("expr", "if_(0 > 0, 0, x_a)"),                            # sympy TypeError (NaN) in diff
    ("expr", "if_(0 > if_(0 > 1, 1, 0), if_(0 > 1, 1, 0), 0)"),  # sympy TypeError building
    ("unit", "GiB**9**9**9"),                                 # pint hangs
    ("unit", "GiB^99"),                                       # overflow in pint
]


def _corpus_files():
    return sorted(CORPUS.glob("*.yaml")) if CORPUS.is_dir() else []


@pytest.mark.parametrize("kind,text", CRASHES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CRASHES)])
def test_corpus_cases(kind, text):
    if kind == "expr":
        bounded(expression_answers, text, "1")
    else:
        bounded(unit_answers, text)


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_corpus_files(path, tmp_path):
    """``formula-*.yaml`` are formula files, ``scenario-*.yaml`` scenario files."""
    if path.name.startswith("formula-"):
        bounded(formula_file_answers, path.read_bytes().decode("utf-8", "replace"))
    else:
        p = tmp_path / "s.yaml"
        p.write_bytes(path.read_bytes())
        bounded(scenario_answers, p)
