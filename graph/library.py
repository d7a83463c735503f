"""Load a formula library (a folder of YAML files) into one checked DAG.

Two passes: the first reads every file's inputs and node declarations (so the
categorical inputs and condition nodes of the whole library are known), the
second parses each formula with the whitelisted parser, derives its unit and
adds edges from the names it uses. The result is a :class:`Library`.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import networkx as nx
from . import units
from .errors import (CycleError, DuplicateNameError, FlopsheetError, InputValueError,
                     SchemaError, UnknownNameError)
from .names import check_name, suggest
from .yamlio import read_mapping, read_text
from .parser import Parsed, parse

FILE_KEYS = {"doc", "inputs", "nodes"}
INPUT_KEYS = {"unit", "default", "doc", "source", "choices", "bounds", "integer", "display"}
NODE_KEYS = {"expr", "unit", "doc", "source", "display"}
NODE_REQUIRED = ("expr", "unit", "doc", "source")


@dataclass
class Input:
    name: str
    doc: str
    unit: str
    dim: Any
    default: Any  # float in coherent units, or the default choice (text)
    source: str = ""
    choices: list[str] | None = None
    bounds: tuple[float | None, float | None] = (None, None)
    integer: bool = False
    file: str = ""
    line: int | None = None
    display: str | None = None  # unit to show values in, e.g. GiB

    @property
    def is_choice(self) -> bool:
        return self.choices is not None


@dataclass
class Node:
    name: str
    expr_text: str
    unit: str
    dim: Any
    doc: str
    source: str
    file: str
    line: int | None
    parsed: Parsed | None = None
    display: str | None = None  # unit to show values in, e.g. h for GPU-hours

    @property
    def expr(self):
        return self.parsed.expr

    @property
    def deps(self) -> list[str]:
        return self.parsed.names

    @property
    def is_bool(self) -> bool:
        return self.dim is units.BOOL  # declared_dim returns the BOOL constant itself


@dataclass
class FormulaFile:
    """One YAML file: one topic, one workbook sheet."""

    path: str  # as shown to people
    topic: str  # relative name without extension, e.g. "model/transformer"
    doc: str
    inputs: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


class Library:
    """The loaded, checked formula graph.

    ``graph`` is a networkx DiGraph with an edge ``a -> b`` when ``b``'s formula
    uses ``a``; each graph node carries ``kind`` ("input" or "node") and ``item``
    (the :class:`Input` or :class:`Node`).
    """

    def __init__(self, files: list[FormulaFile], inputs: dict[str, Input],
                 nodes: dict[str, Node], digest: str, root: str):
        self.files = files
        self.inputs = inputs
        self.nodes = nodes
        self.digest = digest
        self.root = root
        self.graph = nx.DiGraph()
        for name, inp in inputs.items():
            self.graph.add_node(name, kind="input", item=inp)
        for name, node in nodes.items():
            self.graph.add_node(name, kind="node", item=node)
        for name, node in nodes.items():
            for dep in node.deps:
                self.graph.add_edge(dep, name)
        self.order: list[str] = [n for n in nx.topological_sort(self.graph) if n in nodes]

    def __contains__(self, name: str) -> bool:
        return name in self.inputs or name in self.nodes

    def item(self, name: str) -> Input | Node:
        if name in self.inputs:
            return self.inputs[name]
        if name in self.nodes:
            return self.nodes[name]
        raise UnknownNameError(f"no input or node named `{name}`" + suggest(name, self.names()),
                               node=name)

    def names(self) -> list[str]:
        return list(self.inputs) + list(self.nodes)

    def dim(self, name: str):
        return self.item(name).dim

    def ancestors(self, name: str) -> set[str]:
        return nx.ancestors(self.graph, name)


def bundled_formulas() -> Path:
    return Path(str(resources.files("flopsheet.formulas")))


def load_library(root: str | Path | None = None) -> Library:
    """Load every ``*.yaml`` below ``root`` (default: the bundled formulas)."""
    root_path = Path(root) if root is not None else bundled_formulas()
    if not root_path.is_dir():
        raise SchemaError(f"formula folder `{root_path}` does not exist")
    paths = sorted(p for p in root_path.rglob("*.yaml") if p.is_file())
    if not paths:
        raise SchemaError(f"no *.yaml formula files under `{root_path}`")
    bundled = root is None
    digest = hashlib.sha256()
    raw = []
    for p in paths:
        rel = p.relative_to(root_path).as_posix()
        shown = f"formulas/{rel}" if bundled else str(p)
        text = read_text(p, shown)
        digest.update(rel.encode() + b"\0" + text.encode() + b"\0")
        raw.append((shown, rel[: -len(".yaml")], text))
    key = (str(root_path), digest.hexdigest())
    lib = _CACHE.get(key)
    if lib is None:  # parsing and unit checks take ~1 s; the files' text decides reuse
        lib = _CACHE[key] = build_library(raw, digest=key[1][:16], root=str(root_path))
    return lib


_CACHE: dict[tuple[str, str], Library] = {}


def build_library(raw: list[tuple[str, str, str]], *, digest: str = "", root: str = "") -> Library:
    """Build from ``(shown_path, topic, text)`` triples (also used by tests and benchmarks)."""
    files: list[FormulaFile] = []
    inputs: dict[str, Input] = {}
    nodes: dict[str, Node] = {}
    where: dict[str, tuple[str, int | None]] = {}

    def claim(name, file, line):
        check_name(name, file=file, line=line)
        if name in where:
            f0, l0 = where[name]
            raise DuplicateNameError(
                f"`{name}` is defined twice: {f0}:{l0} and {file}:{line}",
                file=file, line=line, node=name)
        where[name] = (file, line)

    # pass 1: declarations
    for shown, topic, text in raw:
        data, lines = read_mapping(text, shown, "formula file")
        _no_unknown(data, FILE_KEYS, shown, 1, None, "file")
        if not isinstance(data.get("doc"), str) or not data["doc"].strip():
            raise SchemaError("file needs a `doc:` line saying what the topic is", file=shown, line=1)
        ff = FormulaFile(path=shown, topic=topic, doc=data["doc"].strip())
        for section in ("inputs", "nodes"):
            sec = data.get(section) or {}
            if not isinstance(sec, dict):
                raise SchemaError(f"`{section}:` must be a mapping of name -> fields",
                                  file=shown, line=lines.get((section,)))
            for name, body in sec.items():
                line = lines.get((section, name))
                claim(name, shown, line)
                if not isinstance(body, dict):
                    raise SchemaError(f"`{name}` must be a mapping of fields", file=shown,
                                      line=line, node=name)
                if section == "inputs":
                    inputs[name] = _read_input(name, body, shown, line)
                    ff.inputs.append(name)
                else:
                    nodes[name] = _read_node(name, body, shown, line)
                    ff.nodes.append(name)
        files.append(ff)

    # pass 2: formulas
    choices = {n: i.choices for n, i in inputs.items() if i.is_choice}
    bool_names = frozenset([n for n, i in nodes.items() if i.is_bool])
    known = set(inputs) | set(nodes)
    for node in nodes.values():
        node.parsed = parse(node.expr_text, file=node.file, line=node.line, node=node.name,
                            choices=choices, bool_names=bool_names)
        for dep in node.parsed.names:
            if dep not in known:
                raise UnknownNameError(f"unknown name `{dep}`" + suggest(dep, known),
                                       file=node.file, line=node.line, node=node.name)
        if node.parsed.is_bool != node.is_bool:
            want = "a condition (unit: bool)" if node.is_bool else "a number"
            raise SchemaError(f"declared as {want} but the formula is "
                              f"{'a condition' if node.parsed.is_bool else 'a number'}",
                              file=node.file, line=node.line, node=node.name)

    _check_cycles(nodes)
    dims = {n: i.dim for n, i in inputs.items()}
    dims.update({n: i.dim for n, i in nodes.items()})
    for node in nodes.values():
        found = units.infer(node.parsed.tree, dims, node.parsed.text, file=node.file,
                            line=node.line, node=node.name)
        if found != node.dim:
            raise units.UnitError(
                f"declared unit `{node.unit}` ({units.dim_str(node.dim)}) but the formula gives "
                f"{units.dim_str(found)}", file=node.file, line=node.line, node=node.name)
    return Library(files, inputs, nodes, digest, root)


def _check_cycles(nodes: dict[str, Node]) -> None:
    g = nx.DiGraph()
    for name, node in nodes.items():
        g.add_node(name)
        g.add_edges_from((d, name) for d in node.deps if d in nodes)
    if nx.is_directed_acyclic_graph(g):  # ~ms; find_cycle walks the whole graph (~1 s at 2k nodes)
        return
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return
    loop = [a for a, _ in cycle] + [cycle[0][0]]
    first = nodes[loop[0]]
    raise CycleError("formulas form a cycle: " + " -> ".join(loop), file=first.file,
                     line=first.line, node=first.name)


def _no_unknown(body: dict, allowed: set, file, line, name, what) -> None:
    for k in body:
        if k not in allowed:
            raise SchemaError(f"unknown {what} key `{k}`" + suggest(str(k), allowed)
                              + f" (allowed: {', '.join(sorted(allowed))})",
                              file=file, line=line, node=name)


def _text(body, key, file, line, name, required=True) -> str:
    v = body.get(key)
    if v is None or (isinstance(v, str) and not v.strip()):
        if required:
            raise SchemaError(f"missing `{key}:`", file=file, line=line, node=name)
        return ""
    if not isinstance(v, str):
        raise SchemaError(f"`{key}:` must be text", file=file, line=line, node=name)
    return " ".join(v.split())


def _read_node(name, body, file, line) -> Node:
    _no_unknown(body, NODE_KEYS, file, line, name, "node")
    for k in NODE_REQUIRED:
        if k not in body or body[k] is None or body[k] == "":
            raise SchemaError(f"missing `{k}:` (every node has {', '.join(NODE_REQUIRED)})",
                              file=file, line=line, node=name)
    unit = str(body["unit"])
    dim = units.declared_dim(unit, file=file, line=line, node=name)
    expr = body["expr"]
    return Node(name=name, expr_text=expr if isinstance(expr, str) else repr(expr), unit=unit,
                dim=dim, doc=_text(body, "doc", file, line, name),
                source=_text(body, "source", file, line, name), file=file, line=line,
                display=_display(body, dim, file, line, name))


def _read_input(name, body, file, line) -> Input:
    _no_unknown(body, INPUT_KEYS, file, line, name, "input")
    doc = _text(body, "doc", file, line, name)
    source = _text(body, "source", file, line, name, required=False)
    if "default" not in body:
        raise SchemaError("missing `default:` (inputs carry a physical, documented default)",
                          file=file, line=line, node=name)
    choices = body.get("choices")
    if choices is not None:
        if (not isinstance(choices, list) or len(choices) < 2
                or not all(isinstance(c, str) and c for c in choices)
                or len(set(choices)) != len(choices)):
            raise SchemaError("`choices:` must be a list of two or more distinct names",
                              file=file, line=line, node=name)
        for c in choices:
            if not c.isidentifier() or c == "otherwise":
                raise SchemaError(f"choice `{c}` must be an identifier (it is a select() keyword)",
                                  file=file, line=line, node=name)
        for k in ("bounds", "integer"):
            if k in body:
                raise SchemaError(f"a categorical input takes no `{k}:`", file=file, line=line,
                                  node=name)
        default = body["default"]
        if default not in choices:
            raise InputValueError(f"default `{default}` is not one of the choices "
                                  f"({', '.join(choices)})", file=file, line=line, node=name)
        return Input(name=name, doc=doc, unit=str(body.get("unit", "1")), dim=units.DIMENSIONLESS,
                     default=default, source=source, choices=list(choices), file=file, line=line)
    if "unit" not in body:
        raise SchemaError("missing `unit:` (use `1` for counts)", file=file, line=line, node=name)
    unit = str(body["unit"])
    dim = units.declared_dim(unit, file=file, line=line, node=name)
    if dim == units.BOOL:
        raise SchemaError("inputs cannot be conditions; use `choices:`", file=file, line=line,
                          node=name)
    integer = body.get("integer", False)
    if not isinstance(integer, bool):
        raise SchemaError("`integer:` must be true or false", file=file, line=line, node=name)
    bounds = _read_bounds(body.get("bounds"), dim, file, line, name)
    default = number_value(body["default"], dim, file=file, line=line, node=name)
    inp = Input(name=name, doc=doc, unit=unit, dim=dim, default=default, source=source,
                bounds=bounds, integer=integer, file=file, line=line,
                display=_display(body, dim, file, line, name))
    check_value(inp, default, file=file, line=line, what="default")
    return inp


def _display(body, dim, file, line, name) -> str | None:
    """The optional display unit; it must have the declared dimension."""
    d = body.get("display")
    if d is None:
        return None
    try:
        ddim, _ = units.parse_unit(str(d))
    except ValueError as e:
        raise units.UnitError(f"display: {e}", file=file, line=line, node=name) from None
    if ddim != dim:
        raise units.UnitError(f"display unit `{d}` is {units.dim_str(ddim)}, the value is "
                              f"{units.dim_str(dim)}", file=file, line=line, node=name)
    return str(d)


def _read_bounds(b, dim, file, line, name):
    if b is None:
        return (None, None)
    if not isinstance(b, list) or len(b) != 2:
        raise SchemaError("`bounds:` must be [low, high] (null for open)", file=file, line=line,
                          node=name)
    lo, hi = (None if v is None else number_value(v, dim, file=file, line=line, node=name)
              for v in b)
    if lo is not None and hi is not None and lo > hi:
        raise InputValueError(f"bounds [{lo:g}, {hi:g}] are empty (low > high)", file=file,
                              line=line, node=name)
    return (lo, hi)


def number_value(v, dim, *, file=None, line=None, node=None) -> float:
    """A number from YAML or the command line: a plain number, or text with a unit."""
    if isinstance(v, bool):
        raise InputValueError(f"`{v}` is a boolean, expected a number", file=file, line=line,
                              node=node)
    if isinstance(v, (int, float)):
        try:
            x = float(v)
        except OverflowError:
            x = math.inf if v > 0 else -math.inf  # refused just below, with its place
    elif isinstance(v, str):
        x = units.convert_value(v, dim, file=file, line=line, node=node)
    else:
        raise InputValueError(f"expected a number (optionally with a unit), got "
                              f"{type(v).__name__}", file=file, line=line, node=node)
    if not math.isfinite(x):
        raise InputValueError(f"value `{v}` is not finite", file=file, line=line, node=node)
    return x


def check_value(inp: Input, x: float, *, file=None, line=None, what="value") -> None:
    """Bounds and integrality of one scalar value of an input."""
    if file is None:
        file, line = inp.file, inp.line
    lo, hi = inp.bounds
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise InputValueError(f"{what} {x:g} is outside the bounds "
                              f"[{'-inf' if lo is None else f'{lo:g}'}, "
                              f"{'inf' if hi is None else f'{hi:g}'}]",
                              file=file, line=line, node=inp.name)
    if inp.integer and x != int(x):
        raise InputValueError(f"{what} {x:g} must be a whole number", file=file, line=line,
                              node=inp.name)


__all__ = ["Library", "Input", "Node", "FormulaFile", "load_library", "build_library",
           "number_value", "check_value", "FlopsheetError"]
