"""Engine layout and wording rules of issue 10: small files in graph/, one-way imports, a
cold import that leaves sympy, pint and networkx alone, status words that say what happened."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import flopsheet
from flopsheet.validate import Expect, Point, Row, status

GRAPH = Path(flopsheet.__file__).parent

#: import layers: a module may import only from its own layer or lower ones
LAYERS = [
    {"errors", "names", "parser", "spreadsheet", "yamlio", "diskcache", "allocator"},
    {"units", "declarations"},
    {"library", "libcache", "compile", "codegen", "emit"},
    {"evaluate", "fmt", "scenario"},
    {"sensitivity", "nonsmooth", "audit", "validate_points", "validate_report", "validate_run",
     "validate_fit", "validate_crossval"},
    {"validate", "cli"},
]


def test_no_engine_file_over_400_lines():
    long = {p.name: n for p in GRAPH.glob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_imports_flow_one_way():
    layer = {m: i for i, group in enumerate(LAYERS) for m in group}
    bad = []
    for p in GRAPH.glob("*.py"):
        me = p.stem
        if me not in layer:
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.col_offset == 0:
                mods = [n.module] if n.module else [a.name for a in n.names]
                for m in mods:
                    m = m.split(".")[0]
                    if m in layer and layer[m] > layer[me]:
                        bad.append(f"{me} imports {m}")
    assert not bad, bad


def test_cold_run_imports_no_sympy_pint_networkx(tmp_path):
    code = ("import sys\nfrom flopsheet.cli import main\nmain(['run'])\n"
            "print(sorted(m for m in ('sympy', 'pint', 'networkx') if m in sys.modules))")
    env = {"FLOPSHEET_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert first.stdout.splitlines()[-1] != "[]"  # the first run builds (and fills the cache)
    assert again.stdout.splitlines()[-1] == "[]"  # the second needs none of them
    assert first.stdout == again.stdout.replace("[]", first.stdout.splitlines()[-1])


def _row(error, tol=0.10, flags=(), problem=None):
    p = Point(id="p", family="f", file="f.yaml", line=1, category="training", description="",
              source="", use=[], values={}, expects=[])
    e = Expect(metric="m", node="mfu", value=1, unit="1", tolerance=tol)
    return Row(p, e, predicted=1 + error, measured=1.0, error=error, problem=problem,
               flags=list(flags))


def test_status_words_say_what_happened():
    assert status(_row(0.04)) == "within 10 %"
    assert status(_row(1.77)) == "off by +177 % (tolerance 10 %)"
    assert status(_row(-0.3, flags=["exceeds HBM"])) == "off by -30 % (tolerance 10 %); exceeds HBM"
    assert status(_row(0.01, flags=["exceeds HBM"])) == "within 10 %; exceeds HBM"
    assert "ok" not in status(_row(0.0)).split()
