"""The README stays true: its formula example loads and its set-up commands match CI."""
from __future__ import annotations

import pathlib
import re

import pytest

from flopsheet.evaluate import Model

from conftest import lib_from

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_formula_example_loads_and_evaluates():
    block = README.split("## Writing a formula file", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    model = Model(lib_from({"example": block}))
    r = model.evaluate()
    assert r.scalar("transfer_time") == pytest.approx(2 * 7 / 8 * 2**30 / 450e9)


def test_ci_runs_the_readme_test_command():
    blocks = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    assert len(blocks) == 2, "README gives exactly two set-up commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci


def test_accuracy_section_is_current():
    """README's tables are `flopsheet validate --markdown`, not typed by hand."""
    from flopsheet.validate import CATEGORIES, Validator, load_points, markdown
    block = README.split("<!-- accuracy:start -->", 1)[1].split("<!-- accuracy:end -->", 1)[0]
    report = Validator().run(load_points())
    assert block.strip() == markdown(report, CATEGORIES).strip(), \
        "README accuracy tables are stale: paste the output of `flopsheet validate --markdown`"
