"""A built library as a plain record (JSON) for the disk cache, and back.

Loading a library parses every formula with sympy and checks every unit with pint
(~0.5 s plus ~0.8 s of imports); a cold ``flopsheet run`` needs neither when the same
formula files were loaded before. The record keeps each node's formula text and the
names it uses; its sympy form is parsed again only if something asks for it. A record
that does not fit the expected shape exactly is ignored (the library is built again).
"""
from __future__ import annotations

from . import diskcache, units
from .library import FormulaFile, Input, Library, Node, raw_digest
from .names import check_name

VERSION = 2  # 2: index-node labels


def _dim_out(d):
    return units.BOOL if d == units.BOOL else [[k, v] for k, v in d.items()]


def _dim_in(x):
    if x == units.BOOL:
        return units.BOOL
    if not isinstance(x, list) or not all(isinstance(k, str) and isinstance(v, (int, float))
                                          and not isinstance(v, bool) for k, v in x):
        raise ValueError("bad dimension")
    return units.Dim(x)


def record(lib: Library) -> dict:
    return {
        "version": VERSION, "root": lib.root, "digest": lib.digest,
        "digest_full": lib.digest_full, "order": lib.order,
        "files": [[f.path, f.topic, f.doc, f.inputs, f.nodes] for f in lib.files],
        "inputs": [[i.name, i.doc, i.unit, _dim_out(i.dim), i.default, i.source, i.choices,
                    list(i.bounds), i.integer, i.file, i.line, i.display]
                   for i in lib.inputs.values()],
        "nodes": [[n.name, n.expr_text, n.unit, _dim_out(n.dim), n.doc, n.source, n.file,
                   n.line, n.display, n.text, n.deps,
                   sorted(n.labels.items()) if n.labels else None] for n in lib.nodes.values()],
    }


def _str(x, none=False):
    if isinstance(x, str) or (none and x is None):
        return x
    raise ValueError("expected text")


def _labels(x):
    """Index-node labels as stored: [[code, name], ...] or None."""
    if x is None:
        return None
    if not isinstance(x, list) or not all(
            isinstance(p, list) and len(p) == 2 and type(p[0]) is int and isinstance(p[1], str)
            for p in x):
        raise ValueError("bad labels")
    return {k: v for k, v in x}


def _line(x):
    if x is None or (type(x) is int and x > 0):
        return x
    raise ValueError("bad line")


def from_record(rec: dict) -> Library:
    """The library of a record; ValueError (or TypeError) if the record is not well formed."""
    if not isinstance(rec, dict) or rec.get("version") != VERSION:
        raise ValueError("not a library record")
    inputs: dict[str, Input] = {}
    for (name, doc, unit, dim, default, source, choices, bounds, integer, file, line,
         display) in rec["inputs"]:
        check_name(name)
        if choices is not None:
            if not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)
                    and default in choices):
                raise ValueError("bad choices")
        elif isinstance(default, bool) or not isinstance(default, (int, float)):
            raise ValueError("bad default")
        lo, hi = bounds
        for b in (lo, hi):
            if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))):
                raise ValueError("bad bounds")
        if not isinstance(integer, bool):
            raise ValueError("bad integer flag")
        inputs[name] = Input(name=name, doc=_str(doc), unit=_str(unit), dim=_dim_in(dim),
                             default=default if choices is not None else float(default),
                             source=_str(source), choices=choices, bounds=(lo, hi),
                             integer=integer, file=_str(file), line=_line(line),
                             display=_str(display, True))
    nodes: dict[str, Node] = {}
    raw_nodes = rec["nodes"]
    for (name, expr_text, unit, dim, doc, source, file, line, display, text,
         deps, labels) in raw_nodes:
        check_name(name)
        if name in inputs or name in nodes:
            raise ValueError("duplicate name")
        if not isinstance(deps, list):
            raise ValueError("bad names")
        nodes[name] = Node(name=name, expr_text=_str(expr_text), unit=_str(unit),
                           dim=_dim_in(dim), doc=_str(doc), source=_str(source),
                           file=_str(file), line=_line(line), display=_str(display, True),
                           _text=_str(text), _names=[_str(d) for d in deps],
                           labels=_labels(labels))
    known = set(inputs) | set(nodes)
    choices = {n: i.choices for n, i in inputs.items() if i.is_choice}
    bool_names = frozenset(n for n, node in nodes.items() if node.is_bool)
    position = {}
    order = rec["order"]
    for i, n in enumerate(order):
        position[n] = i
    if sorted(position) != sorted(nodes) or len(order) != len(nodes):
        raise ValueError("bad order")
    for name, node in nodes.items():
        node._context = (choices, bool_names)
        for d in node.deps:
            if d not in known or (d in nodes and position[d] >= position[name]):
                raise ValueError("bad dependency")
    files = []
    for path, topic, doc, fin, fno in rec["files"]:
        if not all(n in inputs for n in fin) or not all(n in nodes for n in fno):
            raise ValueError("bad file")
        files.append(FormulaFile(path=_str(path), topic=_str(topic), doc=_str(doc),
                                 inputs=list(fin), nodes=list(fno)))
    lib = Library(files, inputs, nodes, _str(rec["digest"]), _str(rec["root"]), order=list(order))
    lib.digest_full = _str(rec["digest_full"])
    return lib


def load(raw, *, digest: str, root: str) -> Library | None:
    """The library these files built before (from the disk cache), or None."""
    full = raw_digest(raw)
    rec = diskcache.load(diskcache.key("library", f"{root}\0{full}"))
    if rec is None:
        return None
    try:
        lib = from_record(rec)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if lib.digest_full != full or lib.root != root or lib.digest != digest:
        return None
    return lib


def save(lib: Library) -> None:
    diskcache.save(diskcache.key("library", f"{lib.root}\0{lib.digest_full}"), record(lib))
