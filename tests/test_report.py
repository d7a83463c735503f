"""The HTML audit report, rendered by a real browser (headless Chromium): it loads with no
console message, shows the evaluated values, typesets the formulas as MathML, marks
overridden nodes and failed validity checks, and escapes hostile text."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from flopsheet.cli import main
from flopsheet.evaluate import Model
from flopsheet.exports.report import render
from flopsheet.library import load_library
from flopsheet.scenario import load_scenario, resolve

from conftest import REQUIRE, lib_from

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
REQUIRE_BROWSER = "FLOPSHEET_REQUIRE_BROWSER"


def _browser() -> str:
    for b in BROWSERS:
        path = shutil.which(b)
        if path:
            return path
    why = f"no headless browser ({', '.join(BROWSERS)}) on PATH"
    if os.environ.get(REQUIRE) == "1" or os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"{REQUIRE}/{REQUIRE_BROWSER}=1 but {why}")
    pytest.skip(why)


def run_browser(path, *flags, timeout=180):
    """Load ``path`` in headless Chromium; returns (stdout, console messages)."""
    exe = _browser()
    proc = subprocess.run(
        [exe, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
         "--enable-logging=stderr", "--v=0", *flags, path.as_uri()],
        capture_output=True, text=True, timeout=timeout)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def text_of(dom: str) -> str:
    """Visible text of a DOM dump (tags dropped, entities left as the browser wrote them)."""
    dom = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", dom, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", dom).split())


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The default scenario with a node overridden and an HBM too small to fit."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", "--set", "hbm_capacity=10 GiB", "--set", "optimizer_step_time=0.5",
                 "-o", str(out)]) == 0
    lib = load_library()
    model = Model(lib)
    sc = load_scenario("gpt3-175b-sc21", ["hbm_capacity=10 GiB", "optimizer_step_time=0.5"])
    return out, lib, model.evaluate(resolve(sc, model))


def test_console_detection_works(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><p>x</p><script>console.error('boom')</script>")
    _, console = run_browser(bad, "--dump-dom")
    assert console and "boom" in console[0]


def test_report_renders_in_chromium_with_the_values(page, tmp_path):
    path, lib, res = page
    dom, console = run_browser(path, "--dump-dom")
    assert console == []  # no error, no message of any kind
    text = text_of(dom)
    assert "flopsheet report: gpt3-175b-sc21" in text
    mfu = f"{float(res['mfu']) * 100:.1f} %"
    assert f"mfu {mfu}" in text  # the Outputs table row
    assert f"step_time = {float(res['step_time']):.4g} s" in text  # the node's heading
    assert "tp_allreduce_auto_algorithm ring" in text
    # formulas typeset as MathML, names whole
    assert dom.count("<math") >= len(lib.ancestors("step_time") & set(lib.nodes))
    assert re.search(r"<mi[^>]*>model_tflops_per_gpu</mi>", dom)
    # overridden node and failed validity check marked
    assert "optimizer_step_time = 500 ms overridden" in text
    assert "fits_in_memory is false" in text
    # breakdown plots inline, no network
    assert dom.count('src="data:image/png;base64,') >= 2
    assert not re.search(r"(src|href)=\"(https?:)?//", dom)
    # a screenshot and a PDF from the same page
    shot = tmp_path / "report.png"
    _, console = run_browser(path, f"--screenshot={shot}", "--window-size=1200,1800")
    assert console == [] and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one
    pdf = tmp_path / "report.pdf"
    run_browser(path, f"--print-to-pdf={pdf}", "--no-pdf-header-footer")
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_hostile_text_is_escaped(tmp_path):
    lib = lib_from({"hw/x": """
        doc: x
        inputs:
          clock:
            unit: 1/s
            default: 1e9
            doc: "<script>console.error('pwned')</script> clock & <b>bold</b>"
            source: "<img src=x onerror=console.error('pwned2')>"
        nodes:
          ticks:
            expr: clock*2
            unit: 1/s
            doc: "</math><script>console.error('pwned3')</script>"
            source: "derived: test"
        """})
    model = Model(lib)
    page = render(lib, model, None, {}, ["ticks"], plots=False)
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    path = tmp_path / "x.html"
    path.write_text(page)
    dom, console = run_browser(path, "--dump-dom")
    assert console == []
    assert "<script>console.error('pwned')</script> clock & <b>bold</b>" in \
        dom.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def test_validation_point_report_shows_the_measurement(tmp_path, capsys):
    out = tmp_path / "v.html"
    assert main(["report", "validation:train-korthikanti-22b-selective-sp", "--no-plots",
                 "-o", str(out)]) == 0
    page = out.read_text()
    assert "Published measurement" in page
    assert re.search(r"<td>iteration_time</td><td>[\d.]+ s</td><td>1\.1 s</td>"
                     r"<td>[+-]\d+\.\d %</td><td>±10 %</td>", page)
    run_html = tmp_path / "r.html"
    assert main(["run", "--outputs", "mfu", "--html", str(run_html)]) == 0
    assert "<a href=\"#n-mfu\"><code>mfu</code></a>" in run_html.read_text()
