"""The formula reference, generated from the YAML (``flopsheet docs -o docs/``), so it never
drifts: one Markdown page per formula file (its inputs with unit, default, allowed values,
doc and source; every node with its formula, unit, doc, source and the quantities it uses,
linked), and an index. A test regenerates it and compares it with the committed copy."""
from __future__ import annotations

import re
from pathlib import Path

from flopsheet.audit import show

from .atomic import write_text

REF = "reference"


def page_name(topic: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", topic) + ".md"


def _cell(x) -> str:
    return " ".join(str(x).split()).replace("|", "\\|")


def _anchor(name: str) -> str:
    return name.lower()


def pages(lib) -> dict[str, str]:
    """Relative path -> Markdown text of the whole reference."""
    where = {}
    for f in lib.files:
        for n in list(f.inputs) + list(f.nodes):
            where[n] = page_name(f.topic)
    out: dict[str, str] = {}

    def link(n, here):
        target = where.get(n, "")
        return f"[`{n}`]({'' if target == here else target}#{_anchor(n)})"

    index = ["# Formula reference", "",
             "Generated from the formula files by `flopsheet docs -o docs/`; do not edit by "
             "hand. Every quantity with its formula, unit, description and source.", "",
             f"{len(lib.files)} files, {len(lib.inputs)} inputs, {len(lib.nodes)} nodes.", "",
             "| file | inputs | nodes | topic |", "| --- | ---: | ---: | --- |"]
    for f in lib.files:
        name = page_name(f.topic)
        index.append(f"| [{f.topic}]({name}) | {len(f.inputs)} | {len(f.nodes)} | "
                     f"{_cell(f.doc)} |")
        lines = [f"# {f.topic}", "", _cell(f.doc), "",
                 f"Defined in `{f.path}`. [All files](README.md).", ""]
        if f.inputs:
            lines += ["## Inputs", "", "| input | unit | default | allowed | doc | source |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for n in f.inputs:
                i = lib.inputs[n]
                if i.is_choice:
                    unit, default, allowed = "choice", i.default, " \\| ".join(i.choices)
                else:
                    lo, hi = i.bounds
                    unit = i.unit
                    default = show(lib, n, i.default)
                    allowed = ("" if lo is None and hi is None else
                               f"[{'-inf' if lo is None else f'{lo:g}'}, "
                               f"{'inf' if hi is None else f'{hi:g}'}]")
                    if i.integer:
                        allowed = (allowed + " whole number").strip()
                lines.append(f"| <a id=\"{_anchor(n)}\"></a>`{n}` | {_cell(unit)} | "
                             f"{_cell(default)} | {_cell(allowed)} | {_cell(i.doc)} | "
                             f"{_cell(i.source)} |")
            lines.append("")
        if f.nodes:
            lines += ["## Nodes", ""]
            for n in f.nodes:
                node = lib.nodes[n]
                users = sorted(lib.graph.successors(n))
                lines += [f"### `{n}`", "", _cell(node.doc), "", "```", node.parsed.text.strip(),
                          "```", "", f"- unit: `{node.unit}`"
                          + (f" (shown in {node.display})" if node.display else "")]
                if node.labels:
                    lines.append("- values: " + ", ".join(f"{k} = {v}"
                                                          for k, v in node.labels.items()))
                lines.append(f"- source: {_cell(node.source)}")
                if node.deps:
                    lines.append("- uses: " + ", ".join(link(d, name) for d in node.deps))
                if users:
                    lines.append("- used by: " + ", ".join(link(u, name) for u in users))
                lines.append(f"- defined in `{node.file}:{node.line}`")
                lines.append("")
        out[f"{REF}/{name}"] = "\n".join(lines).rstrip() + "\n"
    out[f"{REF}/README.md"] = "\n".join(index) + "\n"
    return out


def write(lib, folder) -> list[Path]:
    """Write the reference below ``folder`` (``folder/reference/...``); returns the files.
    Pages of formula files that no longer exist are removed."""
    folder = Path(folder)
    written = []
    texts = pages(lib)
    (folder / REF).mkdir(parents=True, exist_ok=True)  # the writer refuses missing folders
    for rel, text in texts.items():
        p = folder / rel
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            write_text(p, text)
        written.append(p)
    ref = folder / REF
    for old in ref.glob("*.md"):
        if f"{REF}/{old.name}" not in texts:
            old.unlink()
    return written


__all__ = ["pages", "write", "page_name"]
