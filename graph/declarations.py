"""What a formula file declares: inputs, nodes and files as records, and the readers that
check each declaration's fields (keys, units, bounds, defaults) before any formula is parsed."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from . import units
from .errors import InputValueError, SchemaError
from .names import suggest
from .parser import Parsed, parse

FILE_KEYS = {"doc", "inputs", "nodes"}
INPUT_KEYS = {"unit", "default", "doc", "source", "choices", "bounds", "integer", "display"}
NODE_KEYS = {"expr", "unit", "doc", "source", "display", "labels"}
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
    _parsed: Parsed | None = None
    display: str | None = None  # unit to show values in, e.g. h for GPU-hours
    labels: dict[int, str] | None = None  # names of whole-number codes (1: ring, 2: tree)
    # from the disk cache: the formula's text and names, parsed again only when needed
    _text: str | None = None
    _names: list[str] | None = None
    _context: Any = None  # (choices, bool_names) to parse with

    @property
    def parsed(self) -> Parsed:
        if self._parsed is None:
            choices, bool_names = self._context
            self._parsed = parse(self.expr_text, file=self.file, line=self.line, node=self.name,
                                 choices=choices, bool_names=bool_names)
        return self._parsed

    @parsed.setter
    def parsed(self, p: Parsed) -> None:
        self._parsed = p

    @property
    def expr(self):
        return self.parsed.expr

    @property
    def deps(self) -> list[str]:
        return self._names if self._parsed is None else self._parsed.names

    @property
    def text(self) -> str:
        """The formula as parsed (whitespace normalised)."""
        return self._text if self._parsed is None else self._parsed.text

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
                display=_display(body, dim, file, line, name),
                labels=_labels(body.get("labels"), dim, file, line, name))


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


def _labels(raw, dim, file, line, name) -> dict[int, str] | None:
    """``labels: {1: ring, 2: tree}`` names the codes of a dimensionless index node."""
    if raw is None:
        return None
    if (dim != units.DIMENSIONLESS or not isinstance(raw, dict) or not raw
            or not all(isinstance(k, int) and not isinstance(k, bool) and isinstance(v, str)
                       and v.strip() for k, v in raw.items())):
        raise SchemaError("`labels:` maps whole numbers to names ({1: ring, 2: tree}) on a "
                          "dimensionless node", file=file, line=line, node=name)
    return {int(k): str(v).strip() for k, v in raw.items()}


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
