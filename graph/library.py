"""Load a formula library (a folder of YAML files) into one checked DAG.

Two passes: the first reads every file's inputs and node declarations (so the
categorical inputs and condition nodes of the whole library are known), the
second parses each formula with the whitelisted parser, derives its unit and
adds edges from the names it uses. The result is a :class:`Library`.
"""
from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from . import units
from .declarations import (FILE_KEYS, INPUT_KEYS, NODE_KEYS, NODE_REQUIRED,  # noqa: F401
                           FormulaFile, Input, Node, _no_unknown, _read_input, _read_node,
                           check_value, number_value)
from .errors import CycleError, DuplicateNameError, FlopsheetError, SchemaError, UnknownNameError
from .names import check_name, suggest
from .parser import parse
from .yamlio import read_mapping, read_text


class Library:
    """The loaded, checked formula graph.

    ``graph`` is a networkx DiGraph with an edge ``a -> b`` when ``b``'s formula
    uses ``a``; each graph node carries ``kind`` ("input" or "node") and ``item``
    (the :class:`Input` or :class:`Node`).
    """

    def __init__(self, files: list[FormulaFile], inputs: dict[str, Input],
                 nodes: dict[str, Node], digest: str, root: str, order: list[str] | None = None):
        self.files = files
        self.inputs = inputs
        self.nodes = nodes
        self.digest = digest
        self.digest_full = digest
        self.root = root
        self._graph = None
        self._ancestors: dict[str, frozenset[str]] = {}
        if order is None:  # as networkx orders them (the disk cache keeps this order)
            import networkx as nx
            order = [n for n in nx.topological_sort(self.graph) if n in nodes]
        self.order: list[str] = order

    @property
    def graph(self):
        """networkx DiGraph of the library (built on first use: networkx takes ~0.25 s to import)."""
        if self._graph is None:
            import networkx as nx
            g = nx.DiGraph()
            for name, inp in self.inputs.items():
                g.add_node(name, kind="input", item=inp)
            for name, node in self.nodes.items():
                g.add_node(name, kind="node", item=node)
            for name, node in self.nodes.items():
                for dep in node.deps:
                    g.add_edge(dep, name)
            self._graph = g
        return self._graph

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
        """Every name ``name``'s formula depends on, directly or not (memoized)."""
        found = self._ancestors.get(name)
        if found is None:
            seen, stack = set(), [name]
            while stack:
                n = stack.pop()
                node = self.nodes.get(n)
                for d in node.deps if node is not None else ():
                    if d not in seen:
                        seen.add(d)
                        stack.append(d)
            found = self._ancestors[name] = frozenset(seen)
        return set(found)


def bundled_formulas() -> Path:
    return Path(str(resources.files("flopsheet.formulas")))


def load_library(root: str | Path | list | None = None) -> Library:
    """Load every ``*.yaml`` below ``root`` (default: the bundled formulas)."""
    if isinstance(root, (list, tuple)):  # several roots: bundled + the user's (libsource)
        from .libsource import load_many
        return load_many(root)
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
        from . import libcache  # the disk cache (a record of a library built before)
        lib = libcache.load(raw, digest=key[1][:16], root=str(root_path))
        if lib is None:
            lib = build_library(raw, digest=key[1][:16], root=str(root_path))
            libcache.save(lib)
        _CACHE[key] = lib
    return lib


def raw_digest(raw: list[tuple[str, str, str]]) -> str:
    """Hash of ``(shown_path, topic, text)`` triples: what a built library depends on."""
    h = hashlib.sha256()
    for shown, topic, text in raw:
        h.update(f"{shown}\0{topic}\0{text}\0".encode())
    return h.hexdigest()


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
    lib = Library(files, inputs, nodes, digest, root)
    lib.digest_full = raw_digest(raw)
    return lib


def _check_cycles(nodes: dict[str, Node]) -> None:
    import networkx as nx
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


__all__ = ["Library", "Input", "Node", "FormulaFile", "load_library", "build_library",
           "number_value", "check_value", "FlopsheetError"]
