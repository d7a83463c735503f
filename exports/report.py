"""The HTML audit report: one self-contained page per scenario (``flopsheet report``).

Headline outputs with units; breakdown plots inline (base64 PNG); then, for every reported
output, the formula chain down to the leaves: each node once, its formula typeset as MathML
(sympy's presentation printer, rendered by the browser, no network and no script), its
value with unit, doc, source and where it is defined, links to the quantities it uses; the
leaves (inputs and overridden nodes) in a table with the value's origin and citation.
Overridden nodes and validity warnings are marked. Every piece of text is HTML-escaped.
"""
from __future__ import annotations

import base64
import html
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from flopsheet import __version__
from flopsheet.audit import origin, show, value_source

from .atomic import write_text
from .mathml import formula

#: Condition nodes whose False value is a warning (the configuration is not valid).
WARN = re.compile(r"(valid|fits|feasible)")

CSS = """
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#1d232b}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{border-bottom:1px solid #ccd;margin-top:2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
td,th{border-bottom:1px solid #e3e6ea;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#44546a;color:#fff;font-weight:600} td.v{text-align:right;white-space:nowrap}
code{font-size:.9em;background:#f3f4f6;padding:0 .2em}
.node{border:1px solid #dde;border-radius:6px;padding:.5rem .9rem;margin:.8rem 0}
.node h3{margin:.2rem 0;font-size:1.05rem} .meta{color:#555;font-size:.9em}
.over{background:#fff4e0;border-color:#e6a23c} .tag{font-size:.8em;padding:0 .4em;
border-radius:4px;background:#e6a23c;color:#fff;margin-left:.4em}
.warn{background:#fdecea;border-left:4px solid #d93025;padding:.4rem .8rem;margin:.3rem 0}
.note{background:#eef3fb;border-left:4px solid #4a78c2;padding:.4rem .8rem;margin:.3rem 0}
math{font-size:1.05em;overflow-x:auto;max-width:100%} img{max-width:100%}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _anchor(name: str) -> str:
    return "n-" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _link(name: str) -> str:
    return f'<a href="#{_anchor(name)}"><code>{_e(name)}</code></a>'


def _png(plot_fn) -> str | None:
    """Draw with ``plot_fn(path)`` into a temporary PNG; return it as a data URI."""
    with tempfile.TemporaryDirectory(prefix="flopsheet-report-") as d:
        path = Path(d) / "p.png"
        try:
            plot_fn(path)
        except Exception:  # noqa: BLE001 - a plot that cannot be drawn is left out, not fatal
            return None
        return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def warnings_for(lib, model, res, sc, scope: Iterable[str]) -> list[str]:
    """Validity warnings: configuration checks that fail, presets the run lacks."""
    from flopsheet.cli_scenario import default_notes
    out = []
    for n in lib.order:
        node = lib.nodes[n]
        if n in scope and node.is_bool and WARN.search(n) and not bool(np.asarray(res[n])):
            out.append(f"{n} is false: {node.doc}")
    if sc is not None:
        defaults = model.defaults()
        out += default_notes(lib, sc, lambda k: show(lib, k, defaults[k]))
    return out


def render(lib, model, sc, values, outputs: list[str], *, plots: bool = True,
           measured=()) -> str:
    """The page as text."""
    res = model.evaluate(values)
    choices = {n: i.choices for n, i in lib.inputs.items() if i.is_choice}
    scope: set[str] = set()
    for o in outputs:
        scope |= {o} | lib.ancestors(o)
    title = f"flopsheet report: {sc.name}" if sc is not None else "flopsheet report"
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1>"]
    if sc is not None:
        parts.append(f"<p>{_e(sc.doc)}</p>")
        parts.append(f"<p class=\"meta\">scenario file <code>{_e(sc.path)}</code>; presets "
                     f"{_e(' <- '.join(reversed(sc.chain)))}</p>")
        sets = [f"{k}={v.raw}" for k, v in sc.values.items() if v.origin == "--set"]
        if sets:
            parts.append(f"<p class=\"meta\">--set {_e(', '.join(sets))}</p>")
    parts.append(f"<p class=\"meta\">flopsheet {_e(__version__)}, formula library "
                 f"{_e(lib.digest)} ({len(lib.files)} files, {len(lib.inputs)} inputs, "
                 f"{len(lib.nodes)} nodes). Values in the units shown; formulas as in the "
                 f"YAML.</p>")

    warns = warnings_for(lib, model, res, sc, scope)
    over = sorted(n for n in res.overridden if n in scope)
    if warns or over:
        parts.append("<h2 id=\"warnings\">Warnings</h2>")
        parts += [f"<div class=\"warn\">{_e(w)}</div>" for w in warns]
        parts += [f"<div class=\"note\">{_link(n)} is overridden by the scenario "
                  f"({_e(origin(lib, sc, n))}): a number replaces its formula.</div>"
                  for n in over]

    parts.append("<h2 id=\"outputs\">Outputs</h2><table><tr><th>output</th><th>value</th>"
                 "<th>what</th></tr>")
    for o in outputs:
        tag = " <span class=\"tag\">overridden</span>" if o in res.overridden else ""
        parts.append(f"<tr><td>{_link(o)}{tag}</td><td class=\"v\">{_e(show(lib, o, res[o]))}"
                     f"</td><td>{_e(lib.item(o).doc)}</td></tr>")
    parts.append("</table>")

    if measured:
        from flopsheet.cli_scenario import measured_rows
        parts.append("<h2 id=\"measured\">Published measurement</h2><table><tr><th>metric</th>"
                     "<th>predicted</th><th>measured</th><th>error</th><th>tolerance</th></tr>")
        for row in measured_rows(list(measured), lib, res):
            parts.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
        parts.append(f"</table><p class=\"meta\">source: {_e(measured[0].source)}</p>")
    if plots:
        parts += _plots(lib, res, values, outputs)

    parts.append("<h2 id=\"chain\">How each output is computed</h2><p class=\"meta\">Every "
                 "quantity the outputs depend on, outputs first, each once; follow the links "
                 "down to the inputs.</p>")
    order = [n for n in reversed(lib.order) if n in scope]
    first = [o for o in outputs if o in lib.nodes]
    order = first + [n for n in order if n not in first]
    for n in order:
        parts.append(_node(lib, res, sc, n, choices))
    parts.append("<h2 id=\"inputs\">Inputs (the leaves)</h2><table><tr><th>input</th>"
                 "<th>value</th><th>from</th><th>source</th><th>doc</th></tr>")
    for n in lib.inputs:
        if n in scope:
            parts.append(f"<tr id=\"{_anchor(n)}\"><td><code>{_e(n)}</code></td>"
                         f"<td class=\"v\">{_e(show(lib, n, res[n]))}</td>"
                         f"<td>{_e(origin(lib, sc, n))}</td>"
                         f"<td>{_e(value_source(lib, sc, n))}</td>"
                         f"<td>{_e(lib.inputs[n].doc)}</td></tr>")
    parts.append("</table></body></html>\n")
    return "\n".join(parts)


def _node(lib, res, sc, n: str, choices) -> str:
    node = lib.nodes[n]
    val = show(lib, n, res[n])
    if n in res.overridden:
        return (f"<div class=\"node over\" id=\"{_anchor(n)}\"><h3><code>{_e(n)}</code> = "
                f"{_e(val)}<span class=\"tag\">overridden</span></h3>"
                f"<p>{_e(node.doc)}</p><p class=\"meta\">set by {_e(origin(lib, sc, n))} "
                f"({_e(value_source(lib, sc, n))}); replaces the formula "
                f"<code>{_e(node.parsed.text)}</code></p></div>")
    deps = ", ".join(f"{_link(d)} = {_e(show(lib, d, res[d]))}" for d in node.deps)
    return (f"<div class=\"node\" id=\"{_anchor(n)}\"><h3><code>{_e(n)}</code> = {_e(val)}"
            f"</h3>{formula(n, node.expr, choices)}"
            f"<p>{_e(node.doc)}</p><p class=\"meta\">unit {_e(node.unit)} · source: "
            f"{_e(node.source)} · defined in <code>{_e(node.file)}:{_e(node.line)}</code>"
            f"<br>YAML: <code>{_e(' '.join(node.parsed.text.split()))}</code></p>"
            f"<p class=\"meta\">uses: {deps}</p></div>")


def _plots(lib, res, values, outputs) -> list[str]:
    from . import plots as P
    from .xlsx_charts import chartable
    out = []
    items = []
    for name in chartable(lib, res, outputs)[:2]:
        cap = "hbm_capacity" if name == "memory_per_gpu" and "hbm_capacity" in lib else None
        items.append((f"{name} breakdown",
                      lambda p, name=name, cap=cap: P.breakdown_from_result(
                          lib, res, values, name, p, depth=2 if cap else 1, capacity=cap)))
    if P.operators(lib) and "peak_flops_per_gpu" in lib and "hbm_bandwidth" in lib:
        items.append(("roofline (per GPU)", lambda p: P.roofline_from_result(lib, res, p)))
    for title, fn in items:
        uri = _png(fn)
        if uri:
            out.append(f"<figure><img alt=\"{_e(title)}\" src=\"{uri}\"><figcaption>"
                       f"{_e(title)}</figcaption></figure>")
    if out:
        out.insert(0, "<h2 id=\"plots\">Breakdowns</h2>")
    return out


def write_report(path, lib, model, sc, values, outputs: list[str], *, plots: bool = True,
                 measured=()) -> Path:
    """Render and write the page atomically; returns the path. ``measured``: published
    measurements of a validation point (:mod:`flopsheet.cli_scenario`), shown beside the
    prediction."""
    return write_text(path, render(lib, model, sc, values, outputs, plots=plots,
                                   measured=measured))


__all__ = ["render", "write_report", "warnings_for"]
