"""Correctness under bad input (issue 10): atomic writes, YAML limits, clean one-line errors."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from flopsheet import errors as E
from flopsheet.cli import main

from conftest import SMALL, lib_from


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("flopsheet: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------ atomic writes
def test_failure_mid_write_leaves_the_old_file(tmp_path):
    from flopsheet.atomic import atomic_write
    target = tmp_path / "out.yaml"
    target.write_text("old complete file\n")

    def half_then_crash(p: Path):
        p.write_text("new but only ha")
        raise RuntimeError("disk full (simulated)")

    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_crash)
    assert target.read_text() == "old complete file\n"
    assert sorted(os.listdir(tmp_path)) == ["out.yaml"]  # no temp file left behind
    atomic_write(target, "new\n")
    assert target.read_text() == "new\n" and sorted(os.listdir(tmp_path)) == ["out.yaml"]


def test_oserror_mid_write_is_one_line_and_keeps_the_old_file(tmp_path):
    from flopsheet.atomic import atomic_write
    target = tmp_path / "out.txt"
    target.write_text("old")

    def enospc(p: Path):
        p.write_text("partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(E.OutputPathError, match="No space left"):
        atomic_write(target, enospc)
    assert target.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_workbook_export_crash_keeps_the_old_workbook(tmp_path, monkeypatch):
    from flopsheet.exports import xlsx_package
    from flopsheet.exports.excel import export_workbook

    lib = lib_from({"small": SMALL})
    target = tmp_path / "s.xlsx"
    export_workbook(target, lib, None, sensitivity=False)
    before = target.read_bytes()
    real_cells = xlsx_package._with_cells
    seen = []

    def crash(xml, sheet):  # the package file is half-written when the sheets go in
        seen.append(sorted(os.listdir(tmp_path)))
        real_cells(xml, sheet)
        raise KeyboardInterrupt  # stands for SIGINT/SIGKILL mid-save

    monkeypatch.setattr(xlsx_package, "_with_cells", crash)
    with pytest.raises(KeyboardInterrupt):
        export_workbook(target, lib, None, sensitivity=False)
    assert len(seen[0]) == 2  # the temporary file beside the target existed
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["s.xlsx"]


@pytest.mark.parametrize("case", ["folder", "parent_is_file", "missing_parent", "unwritable"])
def test_odd_output_paths_are_one_line_errors(capsys, tmp_path, case):
    (tmp_path / "afile").write_text("x")
    out = {"folder": str(tmp_path),
           "parent_is_file": str(tmp_path / "afile" / "o.xlsx"),
           "missing_parent": str(tmp_path / "no" / "such" / "o.xlsx"),
           "unwritable": "/proc/flopsheet-test.xlsx"}[case]
    before = sorted(os.listdir(tmp_path))
    code, _, err = cli(capsys, "export", "-o", out)
    assert code == 2
    line = one_error_line(err)
    assert out in line
    assert sorted(os.listdir(tmp_path)) == before  # nothing written


def test_import_xlsx_odd_output_path(capsys, tmp_path):
    code, _, err = cli(capsys, "import-xlsx", str(tmp_path / "nope.xlsx"), "-o", str(tmp_path))
    assert code == 2 and "folder" in one_error_line(err)


# ------------------------------------------------------------------ helpers
import contextlib
import signal
import subprocess
import sys
import zipfile

from flopsheet.library import build_library
from flopsheet.scenario import load_scenario
from flopsheet.yamlio import read_mapping


class Hang(BaseException):
    """Not an Exception: library code that catches Exception must not swallow it."""


@contextlib.contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) when the body runs longer than ``seconds``
    (signals reach Python between bytecodes; a hang inside one C call needs a subprocess)."""
    def expired(*_):
        raise Hang(f"took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def subprocess_cli(*argv, cwd=None, timeout=60):
    """The CLI in a fresh interpreter: a segfault or hang there cannot take the suite down."""
    p = subprocess.run([sys.executable, "-m", "flopsheet.cli", *argv], cwd=cwd,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def scenario_file(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


FORMULA = """\
doc: t
inputs:
  a: {unit: '1', default: 2, doc: a, source: s}
nodes:
  b:
    expr: a*2
    unit: '1'
    doc: d
    source: s
"""


# ------------------------------------------------------------------ duplicate keys
@pytest.mark.parametrize("text,lines,key", [
    ("doc: a\ndoc: b\n", (1, 2), "doc"),                                        # top level
    (FORMULA.replace("    unit: '1'\n    doc: d", "    unit: '1'\n    expr: a*3\n    doc: d"),
     (6, 8), "expr"),                                                           # 3rd level
    (FORMULA.replace("source: s}", "source: s, unit: s}"), (3, 3), "unit"),     # flow mapping
])
def test_duplicate_keys_in_formula_files_name_both_lines(text, lines, key):
    with pytest.raises(E.DuplicateNameError) as ei:
        build_library([("f.yaml", "f", text)])
    msg = str(ei.value)
    assert f"lines {lines[0]} and {lines[1]}" in msg and f"`{key}`" in msg and "f.yaml" in msg


def test_duplicate_keys_in_a_scenario_value(tmp_path, capsys):
    p = scenario_file(tmp_path, """\
        doc: x
        use: [gpt3-175b-sc21]
        values:
          tp: {value: 8, source: a, value: 4}
        """)
    code, _, err = cli(capsys, "run", str(p))
    assert code == 2
    line = one_error_line(err)
    assert "`value` is given twice under `values.tp`" in line and "lines 4 and 4" in line


def test_duplicate_keys_in_a_validation_file():
    from flopsheet.validate import load_points  # noqa: F401 - shares read_mapping
    with pytest.raises(E.DuplicateNameError, match=r"lines 3 and 4"):
        read_mapping("doc: v\npoints:\n  - id: a\n    id: b\n", "v.yaml", "validation family")


# ------------------------------------------------------------------ YAML resource bounds
def test_deep_yaml_nesting_is_an_error_not_a_segfault(tmp_path):
    n = 50_000  # libyaml's composer overflows the C stack at ~30k levels
    scenario_file(tmp_path, "doc: x\nvalues: {a: " + "[" * n + "]" * n + "}\n", "deep.yaml")
    code, out, err = subprocess_cli("run", "./deep.yaml", cwd=tmp_path)
    assert code == 2, (code, err[-500:])
    assert "nesting deeper than 64 levels" in one_error_line(err)


def test_block_nesting_is_bounded_too():
    text = "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v\n"
    with pytest.raises(E.ResourceLimitError, match="nesting deeper"):
        read_mapping(text, "b.yaml", "x")


def test_billion_laughs_is_refused_quickly():
    lol = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lol.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with deadline(10), pytest.raises(E.ResourceLimitError, match="aliases expand"):
        read_mapping("\n".join(lol) + "\n", "lol.yaml", "x")


def test_many_aliases_are_refused():
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 300) + "]\n"
    with pytest.raises(E.ResourceLimitError, match="more than 256 aliases"):
        read_mapping(text, "al.yaml", "x")


def test_huge_file_is_refused_before_reading(tmp_path, capsys):
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as f:
        f.write(b"doc: x\n# " + b"x" * 3_000_000 + b"\n")
    code, _, err = cli(capsys, "run", str(p))
    assert code == 2 and "the limit is 2,000,000" in one_error_line(err)


def test_non_utf8_file_is_one_line(tmp_path, capsys):
    p = tmp_path / "latin.yaml"
    p.write_bytes("doc: caf\xe9\nvalues: {}\n".encode("latin-1"))
    code, _, err = cli(capsys, "run", str(p))
    assert code == 2 and "latin.yaml:1: not UTF-8 text (byte 0xe9" in one_error_line(err)


def test_non_utf8_formula_file(write_lib, capsys):
    root = write_lib({"f.yaml": FORMULA})
    (root / "g.yaml").write_bytes(b"doc: \xff\n")
    code, _, err = cli(capsys, "check", "--formulas", str(root))
    assert code == 2 and "g.yaml:1: not UTF-8" in one_error_line(err)


def test_integer_of_5000_digits_in_yaml(tmp_path, capsys):
    p = scenario_file(tmp_path, "doc: x\nvalues: {tp: " + "9" * 5000 + "}\n")
    code, _, err = cli(capsys, "run", str(p))
    assert code == 2 and "a value cannot be read" in one_error_line(err)


def test_integer_beyond_float_range(tmp_path, capsys):
    p = scenario_file(tmp_path, "doc: x\nuse: [gpt3-175b-sc21]\nvalues: {tp: " + "9" * 400 + "}\n")
    code, _, err = cli(capsys, "run", str(p))
    assert code == 2 and ":3: tp: " in one_error_line(err) and "not finite" in err
    code, _, err = cli(capsys, "run", "--set", "dp=" + "9" * 400)
    assert code == 2 and "dp" in one_error_line(err)


# ------------------------------------------------------------------ units
def test_unit_power_tower_fails_fast():
    # pint evaluates 9**9**9 as a Python integer (minutes of one C call): a subprocess
    code, _, err = subprocess_cli("run", "--set", "hbm_capacity=80 GiB**9**9**9", timeout=60)
    assert code == 2 and "hbm_capacity" in one_error_line(err)
    assert "not a product of unit names with small integer exponents" in err


@pytest.mark.parametrize("unit", ["GiB^99", "GiB**(9**9)", "x" * 80, "GiB*" * 20 + "GiB",
                                  "1e999 GiB"])
def test_hostile_unit_strings_fail_fast(capsys, unit):
    with deadline(10):
        code, _, err = cli(capsys, "run", "--set", f"hbm_capacity=80 {unit}")
    assert code == 2
    assert "hbm_capacity" in one_error_line(err)


def test_ordinary_units_still_parse():
    from flopsheet.units import parse_unit
    for u, f in [("GB/s", 1e9), ("mm^2", 1e-6), ("1/cm^2", 1e4), ("USD/h", 1 / 3600),
                 ("byte/(s*token)", 1.0), ("s^-1", 1.0), ("kWh", 3.6e6)]:
        assert parse_unit(u)[1] == pytest.approx(f)


# ------------------------------------------------------------------ formulas
@pytest.mark.parametrize("expr,why", [
    ("((10**64)**64)**64", "constant power beyond the range"),
    ("a*1e300*1e300", "beyond the range of a float"),
    ("max(" + ", ".join(["a"] * 300) + ")", "300 arguments; the limit is 255"),
    ("-" * 19000 + "a", "cannot be parsed"),
    ("(" * 70 + "a" + ")" * 70 + "+" + "+".join(["a"] * 70), "nests deeper"),
])
def test_formula_resource_bounds(expr, why):
    text = FORMULA.replace("expr: a*2", f"expr: '{expr}'")
    with deadline(20), pytest.raises(E.ExpressionError, match=why):
        build_library([("f.yaml", "f", text)])


# ------------------------------------------------------------------ use: chains
def test_diamond_of_use_is_fast_and_bounded(tmp_path, capsys):
    # d0 uses [d1a, d1b]; both use d2; ... : 2^depth applications without a bound
    depth = 24
    for i in range(depth):
        nxt = f"d{i + 1}" if i + 1 < depth else None
        for side in ("a", "b"):
            use = f"use: [{nxt}a, {nxt}b]\n" if nxt else ""
            (tmp_path / f"d{i}{side}.yaml").write_text(f"doc: x\n{use}values: {{tp: 8}}\n")
    top = scenario_file(tmp_path, "doc: top\nuse: [d0a, d0b]\n", "top.yaml")
    with deadline(20):
        code, _, err = cli(capsys, "run", str(top))
    assert code == 2 and "apply more than 1000 preset files" in one_error_line(err)


def test_long_use_chain_is_bounded(tmp_path):
    for i in range(40):
        (tmp_path / f"c{i}.yaml").write_text(f"doc: x\nuse: [c{i + 1}]\n" if i < 39 else "doc: x\n")
    with pytest.raises(E.ResourceLimitError, match="deeper than 32"):
        load_scenario(str(tmp_path / "c0.yaml"))


def test_shared_preset_is_read_once(tmp_path, monkeypatch):
    from flopsheet import scenario as S
    (tmp_path / "base.yaml").write_text("doc: b\nvalues: {tp: 8}\n")
    (tmp_path / "m1.yaml").write_text("doc: m\nuse: [base]\n")
    (tmp_path / "m2.yaml").write_text("doc: m\nuse: [base]\n")
    top = scenario_file(tmp_path, "doc: t\nuse: [m1, m2]\n", "top.yaml")
    reads = []
    real = S.read_text
    monkeypatch.setattr(S, "read_text", lambda p, shown: reads.append(shown) or real(p, shown))
    sc = load_scenario(str(top))
    assert len(reads) == 4 and sc.chain.count(str(tmp_path / "base.yaml")) == 2


# ------------------------------------------------------------------ --set configurations
def test_zipped_lists_of_different_lengths(capsys):
    # crossed by default (issue 14); --zip pairs them, and unequal lengths cannot pair
    code, _, err = cli(capsys, "run", "--zip", "--set", "dp=8,16", "--set", "tp=1,2,4")
    assert code == 2 and "length" in one_error_line(err)


def test_too_many_configurations(tmp_path, capsys, monkeypatch):
    from flopsheet import scenario as S
    assert S.MAX_CONFIGS == 100_000
    monkeypatch.setattr(S, "MAX_CONFIGS", 1000)  # same code path, a smaller file
    p = scenario_file(tmp_path, "doc: x\nuse: [gpt3-175b-sc21]\nvalues:\n  dp: ["
                      + ", ".join(["8"] * 1001) + "]\n")
    code, _, err = cli(capsys, "run", str(p))
    assert code == 2 and "at most 1,000 values" in one_error_line(err)


# ------------------------------------------------------------------ .xlsx inputs
def test_xlsx_that_is_not_a_zip(tmp_path, capsys):
    p = tmp_path / "fake.xlsx"
    p.write_text("not a workbook")
    code, _, err = cli(capsys, "import-xlsx", str(p))
    assert code == 2 and "not a zip archive" in one_error_line(err)


def test_xlsx_zip_bomb_is_refused_before_openpyxl(tmp_path, capsys, monkeypatch):
    from flopsheet.exports import xlsx_import as X
    assert X.MAX_XLSX_UNCOMPRESSED == 200_000_000
    monkeypatch.setattr(X, "MAX_XLSX_UNCOMPRESSED", 10_000_000)  # same path, faster to build
    p = tmp_path / "bomb.xlsx"
    chunk = b"\0" * (1 << 20)
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("xl/worksheets/sheet1.xml", "w") as f:
            for _ in range(11):
                f.write(chunk)
    assert p.stat().st_size < 100_000
    import openpyxl
    monkeypatch.setattr(openpyxl, "load_workbook", lambda *a, **k: pytest.fail("read"))
    code, _, err = cli(capsys, "import-xlsx", str(p))
    assert code == 2 and "inflates to 11,534,336 bytes" in one_error_line(err)


def test_xlsx_with_too_many_entries(tmp_path, capsys):
    p = tmp_path / "many.xlsx"
    with zipfile.ZipFile(p, "w") as z:
        for i in range(2001):
            z.writestr(f"e{i}", b"")
    code, _, err = cli(capsys, "import-xlsx", str(p))
    assert code == 2 and "2,001 entries" in one_error_line(err)


# ------------------------------------------------------------------ the guard
def test_internal_error_is_one_line_exit_3(capsys, monkeypatch):
    import flopsheet.cli_library as C
    monkeypatch.setattr(C, "cmd_list", lambda args: {}["boom"])
    code, _, err = cli(capsys, "list", "nodes")
    assert code == 3 and "Traceback" not in err
    assert err.strip() == ("flopsheet: internal error: KeyError: 'boom' (please report; "
                           "--debug shows the traceback)")
    with pytest.raises(KeyError):
        main(["--debug", "list", "nodes"])


# ------------------------------------------------------------------ name resolution
def test_stray_file_in_cwd_does_not_shadow_a_bundled_scenario(tmp_path, capsys, monkeypatch):
    scenario_file(tmp_path, "doc: not the bundled one\nvalues: {tp: 1, pp: 1, dp: 1}\n",
                  "gpt3-175b-sc21.yaml")
    (tmp_path / "models").mkdir()
    scenario_file(tmp_path, "doc: shadow\nvalues: {layers: 1}\n", "models/gpt3-175b.yaml")
    monkeypatch.chdir(tmp_path)
    sc = load_scenario("gpt3-175b-sc21")
    assert sc.path == "templates/scenarios/gpt3-175b-sc21.yaml"
    assert "templates/models/gpt3-175b.yaml" in sc.chain
    code, out, _ = cli(capsys, "run", "gpt3-175b-sc21", "--json", "--outputs", "n_gpus")
    assert code == 0 and '"value": 1024' in out
    code, out, _ = cli(capsys, "run", "./gpt3-175b-sc21.yaml", "--json", "--outputs", "n_gpus")
    assert code == 0 and '"value": 1.0' in out  # an explicit path does read the user's file


def test_explain_says_which_file_a_name_resolved_to(capsys):
    code, out, _ = cli(capsys, "explain", "n_gpus", "sc21-table1-1t")
    assert code == 0
    assert out.splitlines()[0] == "scenario  sc21-table1-1t  (templates/scenarios/sc21-table1-1t.yaml)"


# ------------------------------------------------------------------ validity is visible
def test_broken_divisibility_warns_and_strict_refuses(capsys):
    args = ["run", "--set", "tp=3", "--set", "heads=64", "--set", "kv_heads=64"]
    code, out, err = cli(capsys, *args)
    assert code == 0 and "step_time" in out  # the numbers are still printed
    warn = [ln for ln in err.splitlines() if ln.startswith("warning: ")]
    assert len(warn) == 1 and "parallel_config_valid is false: heads_divisible" in warn[0]
    assert "heads = 64" in warn[0] and "tp = 3" in warn[0]
    code, out, err = cli(capsys, *args, "--strict")
    assert code == 2 and "heads_divisible" in one_error_line(err)


def test_not_fitting_memory_warns_with_the_numbers(capsys):
    code, out, err = cli(capsys, "run", "--set", "micro_batch=32", "--json", "--outputs", "mfu")
    import json
    data = json.loads(out)
    assert code == 0 and data["outputs"]["n_gpus"]["value"] == 1024  # always reported
    assert any(w.startswith("fits_in_memory is false") and "memory_per_gpu = 94.72 GiB" in w
               for w in data["warnings"])


def test_served_model_too_large_warns_and_strict_refuses(capsys):
    # Kimi K2's 1.03T parameters in FP8 over tp 8 are 128 GB of weights per GPU before any KV cache: the
    # serving numbers are still printed, never silently
    args = ["run", "cost-serve-llama3-70b-h100", "--use", "models/kimi-k2", "--set", "tp=8"]
    code, out, err = cli(capsys, *args)
    assert code == 0 and "cost_per_million_tokens" in out
    warn = [ln for ln in err.splitlines() if ln.startswith("warning: ")]
    assert len(warn) == 1 and warn[0].startswith("warning: serving_fits_in_memory is false")
    assert "serving_memory_per_gpu = 126.8 GiB" in warn[0]
    code, out, err = cli(capsys, *args, "--strict")
    assert code == 2 and "serving_fits_in_memory" in one_error_line(err)
    # the bundled workload fits; a training run is not held to the serving rule
    assert "warning" not in cli(capsys, "run", "cost-serve-llama3-70b-h100", "--strict")[2]


def test_valid_bundled_scenario_has_no_warning_and_reports_n_gpus(capsys):
    code, out, err = cli(capsys, "run", "sc21-table1-1t", "--strict")
    assert code == 0 and "warning" not in err
    assert any(ln.startswith("n_gpus ") for ln in out.splitlines())


def test_run_xlsx_to_an_odd_path(capsys, tmp_path):
    code, out, err = cli(capsys, "run", "--xlsx", str(tmp_path / "afile.xlsx" / "x.xlsx"))
    assert code == 2 and "folder" in one_error_line(err) and os.listdir(tmp_path) == []
