"""Correctness under bad input (issue 10): atomic writes, YAML limits, clean one-line errors."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from flopsheet.atomic import atomic_write
from flopsheet.cli import main
from flopsheet.errors import FlopsheetError, OutputPathError

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
    target = tmp_path / "out.txt"
    target.write_text("old")

    def enospc(p: Path):
        p.write_text("partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputPathError, match="No space left"):
        atomic_write(target, enospc)
    assert target.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_workbook_export_crash_keeps_the_old_workbook(tmp_path, monkeypatch):
    from openpyxl import Workbook
    from flopsheet.exports.excel import export_workbook

    lib = lib_from({"small": SMALL})
    target = tmp_path / "s.xlsx"
    export_workbook(target, lib, None, sensitivity=False)
    before = target.read_bytes()
    real_save = Workbook.save

    def crash(self, filename):
        real_save(self, filename)
        with open(filename, "r+b") as f:  # truncate half-way, as a kill would
            f.truncate(100)
        raise KeyboardInterrupt  # stands for SIGINT/SIGKILL mid-save

    monkeypatch.setattr(Workbook, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        export_workbook(target, lib, None, sensitivity=False)
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
