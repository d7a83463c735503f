"""Validation points: reading the family files of ``templates/validation/`` (format in
:mod:`flopsheet.validate`) into :class:`Point` records, checked key by key."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ScenarioError
from .names import suggest
from .scenario import bundled_templates
from .yamlio import read_mapping, read_text

CATEGORIES = ["training", "inference", "memory", "collective", "cost"]
FAMILY_KEYS = {"doc", "source", "category", "tolerance", "points"}
POINT_KEYS = {"description", "source", "category", "use", "values", "gpus", "expect",
              "not_compared", "unsupported", "note"}
EXPECT_KEYS = {"metric", "node", "value", "unit", "tolerance", "counted", "values", "note"}
DEFAULT_TOLERANCE = 0.10


def validation_dir() -> Path:
    return bundled_templates() / "validation"


# ----------------------------------------------------------------------------- loading
@dataclass
class Expect:
    metric: str
    node: str | None
    value: Any
    unit: str
    tolerance: float
    counted: bool = True
    values: dict = field(default_factory=dict)
    note: str = ""


@dataclass
class Point:
    id: str
    family: str
    file: str  # shown path, e.g. templates/validation/sc21-table1.yaml
    line: int | None
    category: str
    description: str
    source: str
    use: list[str]
    values: dict
    expects: list[Expect]
    gpus: int | None = None
    not_compared: dict = field(default_factory=dict)
    unsupported: str | None = None
    note: str = ""
    near: Path | None = None  # folder `use:` references are looked up beside (the family's)

    @property
    def supported(self) -> bool:
        return self.unsupported is None


def _err(msg, file, line=None, node=None):
    return ScenarioError(msg, file=file, line=line, node=node)


def _check_keys(d: dict, allowed: set, what: str, file, line, node=None):
    for k in d:
        if k not in allowed:
            raise _err(f"unknown key `{k}` in {what}" + suggest(str(k), allowed)
                       + f" (allowed: {', '.join(sorted(allowed))})", file, line, node)


def _shown(path: Path) -> str:
    try:
        return "templates/" + path.resolve().relative_to(bundled_templates().resolve()).as_posix()
    except ValueError:
        return str(path)


def load_family(path: Path) -> list[Point]:
    """The points of one family file (see the module docstring for its format)."""
    path = Path(path)
    shown = _shown(path)
    data, lines = read_mapping(read_text(path, shown), shown, "validation family")
    _check_keys(data, FAMILY_KEYS, "a validation family", shown, 1)
    family = path.stem
    category = data.get("category")
    tol = float(data.get("tolerance", DEFAULT_TOLERANCE))
    fsource = str(data.get("source") or "").strip()
    points = data.get("points")
    if not isinstance(points, dict) or not points:
        raise _err("`points:` must be a mapping of point id -> point", shown, lines.get(("points",)))
    out = []
    for pid, body in points.items():
        line = lines.get(("points", pid))
        if not isinstance(body, dict):
            raise _err("a point is a mapping (use, values, expect, ...)", shown, line, str(pid))
        _check_keys(body, POINT_KEYS, f"point `{pid}`", shown, line, str(pid))
        cat = body.get("category", category)
        if cat not in CATEGORIES:
            raise _err(f"category `{cat}` is not one of {', '.join(CATEGORIES)}", shown, line, str(pid))
        unsupported = body.get("unsupported")
        if unsupported is not None:
            unsupported = str(unsupported).strip()
            if not unsupported:
                raise _err("`unsupported:` needs a reason", shown, line, str(pid))
        raw_expects = body.get("expect") or []
        if not isinstance(raw_expects, list) or not all(isinstance(e, dict) for e in raw_expects):
            raise _err("`expect:` must be a list of {metric, node, value, unit}", shown, line, str(pid))
        expects = []
        for e in raw_expects:
            _check_keys(e, EXPECT_KEYS, f"an `expect` row of `{pid}`", shown, line, str(pid))
            for k in ("metric", "value", "unit") + (() if unsupported else ("node",)):
                if e.get(k) is None:
                    raise _err(f"an `expect` row needs `{k}`", shown, line, str(pid))
            vals = e.get("values") or {}
            if not isinstance(vals, dict):
                raise _err("`values:` of an `expect` row must be a mapping", shown, line, str(pid))
            expects.append(Expect(metric=str(e["metric"]), node=e.get("node"), value=e["value"],
                                  unit=str(e["unit"]), tolerance=float(e.get("tolerance", tol)),
                                  counted=bool(e.get("counted", True)), values=vals,
                                  note=str(e.get("note") or "")))
        if unsupported is None and not any(e.counted for e in expects):
            raise _err("a supported point needs at least one counted `expect` row", shown, line,
                       str(pid))
        if not isinstance(body.get("values") or {}, dict):
            raise _err("`values:` must be a mapping of name -> value", shown, line, str(pid))
        gpus = body.get("gpus")
        if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1):
            raise _err("`gpus:` must be a whole number of GPUs", shown, line, str(pid))
        nc = body.get("not_compared") or {}
        if not isinstance(nc, dict):
            raise _err("`not_compared:` must map a reported metric to the reason it is left out",
                       shown, line, str(pid))
        use = body.get("use") or []
        out.append(Point(id=str(pid), family=family, file=shown, line=line, category=cat,
                         description=str(body.get("description") or "").strip(),
                         source=str(body.get("source") or fsource).strip(),
                         use=[use] if isinstance(use, str) else list(use),
                         values=body.get("values") or {}, expects=expects,
                         gpus=gpus, not_compared={str(k): str(v) for k, v in nc.items()},
                         unsupported=unsupported, note=str(body.get("note") or "").strip(),
                         near=path.parent))
    return out


def load_points(root: Path | None = None) -> list[Point]:
    """Every validation point of the bundled family files, in file order."""
    root = root or validation_dir()
    points: list[Point] = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*.yaml")):
        for p in load_family(path):
            if p.id in seen:
                raise _err(f"point `{p.id}` is also in {seen[p.id]}", p.file, p.line, p.id)
            seen[p.id] = p.file
            points.append(p)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return sorted(points, key=lambda p: order[p.category])  # stable: file order within a category
