"""The audit trail: where every number comes from (``flopsheet explain``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .evaluate import Result
from .fmt import format_value
from .library import Library
from .scenario import Scenario


def show(lib: Library, name: str, value) -> str:
    """A value as people read it: choice name, yes/no, or engineering notation."""
    item = lib.item(name)
    if name in lib.inputs and lib.inputs[name].is_choice:
        return lib.inputs[name].choices[int(np.asarray(value))]
    return format_value(value, item.dim, item.display, labels=getattr(item, "labels", None))


def origin(lib: Library, sc: Scenario | None, name: str) -> str:
    """Where a leaf's value came from: a preset file and line, ``--set``, or the default."""
    if sc is not None and name in sc.values:
        return sc.values[name].origin
    item = lib.item(name)
    return f"default ({item.file}:{item.line})"


def value_source(lib: Library, sc: Scenario | None, name: str) -> str:
    """The citation for a leaf's value: the preset's if it gave one, else the input's."""
    if sc is not None and name in sc.values and sc.values[name].source:
        return sc.values[name].source
    return lib.item(name).source


def explain(lib: Library, result: Result, sc: Scenario | None, name: str,
            depth: int | None = 3) -> dict[str, Any]:
    """A nested record of ``name``: formula, value, unit, doc, source and its inputs."""
    seen: set[str] = set()

    def rec(n: str, level: int) -> dict[str, Any]:
        item = lib.item(n)
        v = result.values[n]
        out: dict[str, Any] = {"name": n, "value": _plain(v), "shown": show(lib, n, v),
                               "unit": item.unit, "doc": item.doc,
                               "defined_at": f"{item.file}:{item.line}"}
        if n in lib.inputs or n in result.overridden:
            out["kind"] = "overridden node" if n in result.overridden else "input"
            out["from"] = origin(lib, sc, n)
            out["source"] = value_source(lib, sc, n)
            if n in result.overridden:
                out["replaces_formula"] = lib.nodes[n].parsed.text
            return out
        node = lib.nodes[n]
        out.update(kind="node", formula=node.parsed.text, sympy=str(node.expr),
                   source=node.source)
        if n in seen:
            out["inputs"] = "shown above"
            return out
        seen.add(n)
        if depth is not None and level >= depth:
            out["inputs"] = f"{len(node.deps)} not shown (depth limit)"
        else:
            out["inputs"] = [rec(d, level + 1) for d in node.deps]
        return out

    return rec(name, 0)


def render(rec: dict[str, Any]) -> str:
    """The record of :func:`explain` as an indented tree."""
    lines: list[str] = []

    def emit(r, prefix: str, branch: str, cont: str):
        head = f"{r['name']} = {r['shown']}"
        lines.append(f"{prefix}{branch}{head}   [{r['kind']}, {r['defined_at']}]")
        pad = prefix + cont
        if r["kind"] == "node":
            lines.append(f"{pad}  formula  {r['formula']}")
            if r["sympy"].replace(" ", "") != r["formula"].replace(" ", ""):
                lines.append(f"{pad}  sympy    {r['sympy']}")
        else:
            lines.append(f"{pad}  from     {r['from']}")
            if "replaces_formula" in r:
                lines.append(f"{pad}  replaces {r['replaces_formula']}")
        lines.append(f"{pad}  doc      {r['doc']}")
        if r.get("source"):
            lines.append(f"{pad}  source   {r['source']}")
        kids = r.get("inputs")
        if isinstance(kids, str):
            lines.append(f"{pad}  inputs   {kids}")
        elif kids:
            for i, k in enumerate(kids):
                last = i == len(kids) - 1
                emit(k, pad, "└─ " if last else "├─ ", "   " if last else "│  ")

    emit(rec, "", "", "")
    return "\n".join(lines)


def _plain(v):
    a = np.asarray(v)
    if a.ndim:
        return a.tolist()
    return bool(a) if a.dtype == bool else float(a)
