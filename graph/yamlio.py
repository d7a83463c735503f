"""Safe YAML reading with line numbers, duplicate-key detection and resource bounds.

Formula, scenario and preset files are shared between people, so each is read
as untrusted: its size, nesting depth and alias expansion are bounded before
the document is built (deep nesting overflows the C stack of libyaml's
composer, and a few aliases of aliases expand to billions of nodes), a key
given twice in any mapping is an error naming both lines (loaders silently
keep the last), and a file that is not UTF-8 is a one-line error.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .errors import DuplicateNameError, ResourceLimitError, YamlSyntaxError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # C loader: ~7x faster, still safe

MAX_FILE_BYTES = 2_000_000  #: largest YAML file read (the bundled ones are < 60 kB)
MAX_DEPTH = 64  #: deepest nesting of mappings and lists (the bundled files nest < 8)
MAX_ALIASES = 256  #: `*alias` uses per file (the bundled files use none)
MAX_NODES = 200_000  #: nodes of the document with every alias expanded

_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def read_text(path: str | Path, shown: str | None = None) -> str:
    """A YAML file's text: bounded in size, decoded as UTF-8, each failure one line."""
    p = Path(path)
    shown = shown or str(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ResourceLimitError(f"file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}",
                                     file=shown)
        with open(p, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise YamlSyntaxError(f"cannot read: {e.strerror or e}", file=shown) from None
    if len(data) > MAX_FILE_BYTES:  # grew while we looked, or not a regular file
        raise ResourceLimitError(f"file is over the limit of {MAX_FILE_BYTES:,} bytes",
                                 file=shown)
    return decode(data, shown)


def decode(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise YamlSyntaxError(f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
                              file=shown, line=line) from None


def _syntax_error(e: yaml.YAMLError, shown: str) -> YamlSyntaxError:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return YamlSyntaxError(f"invalid YAML: {problem}", file=shown,
                           line=mark.line + 1 if mark is not None else None)


def _prescan(text: str, shown: str) -> None:
    """Bound depth and aliases from the event stream (libyaml's parser keeps its own
    stack; only the composer recurses), stopping at the first excess."""
    loader = _Loader(text)
    depth = aliases = 0
    try:
        while loader.check_event():
            ev = loader.get_event()
            if isinstance(ev, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ResourceLimitError(f"nesting deeper than {MAX_DEPTH} levels",
                                             file=shown, line=ev.start_mark.line + 1)
            elif isinstance(ev, _CLOSE):
                depth -= 1
            elif isinstance(ev, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise ResourceLimitError(f"more than {MAX_ALIASES} aliases (*name)",
                                             file=shown, line=ev.start_mark.line + 1)
    except yaml.YAMLError as e:
        raise _syntax_error(e, shown) from None
    finally:
        loader.dispose()


def _walk(root: yaml.Node, shown: str) -> None:
    """Every mapping of the document: no key twice; the alias-expanded size is bounded."""
    size: dict[int, int] = {}
    path: dict[int, str] = {id(root): ""}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            if isinstance(node, yaml.MappingNode):
                n = 1 + sum(size[id(k)] + size[id(v)] for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                n = 1 + sum(size[id(c)] for c in node.value)
            else:
                n = 1
            if n > MAX_NODES:
                raise ResourceLimitError(f"aliases expand the document to more than "
                                         f"{MAX_NODES:,} nodes", file=shown,
                                         line=node.start_mark.line + 1)
            size[nid] = n
            continue
        if nid in size:
            continue
        stack.append((node, True))
        if isinstance(node, yaml.MappingNode):
            seen: dict[tuple, int] = {}
            here = path.get(nid, "")
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    key = (k.tag, k.value)
                    ln = k.start_mark.line + 1
                    if key in seen and k.value != "<<":
                        under = f" under `{here}`" if here else ""
                        raise DuplicateNameError(
                            f"key `{k.value}` is given twice{under} (lines {seen[key]} and "
                            f"{ln})", file=shown, line=ln, node=str(k.value))
                    seen[key] = ln
                    path.setdefault(id(v), f"{here}.{k.value}" if here else str(k.value))
                for c in (k, v):
                    if id(c) not in size:
                        stack.append((c, False))
        elif isinstance(node, yaml.SequenceNode):
            for i, c in enumerate(node.value):
                path.setdefault(id(c), f"{path.get(nid, '')}[{i}]")
                if id(c) not in size:
                    stack.append((c, False))


def read_mapping(text: str, shown: str, what: str) -> tuple[dict, dict[tuple, int]]:
    """Parse a YAML mapping; return (data, lines).

    ``lines`` maps ``(key,)`` and ``(key, subkey)`` of the first two levels to
    1-based line numbers. A key repeated within any mapping is an error (YAML
    loaders silently keep the last one); size, depth and aliases are bounded.
    """
    if len(text) > MAX_FILE_BYTES:
        raise ResourceLimitError(f"text is {len(text):,} characters; the limit is "
                                 f"{MAX_FILE_BYTES:,}", file=shown)
    _prescan(text, shown)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _walk(root, shown)
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as e:
        raise _syntax_error(e, shown) from None
    except RecursionError:  # belt and braces: the pre-scan bounds depth
        raise ResourceLimitError("nesting too deep", file=shown) from None
    except (ValueError, OverflowError) as e:  # e.g. an integer of more than 4300 digits
        raise YamlSyntaxError(f"a value cannot be read: {str(e).split(';')[0]}",
                              file=shown) from None
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise YamlSyntaxError(f"a {what} must be a YAML mapping", file=shown, line=1)
    lines: dict[tuple, int] = {}
    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            lines[(k.value,)] = k.start_mark.line + 1
            if isinstance(v, yaml.MappingNode):
                for kk, _ in v.value:
                    lines[(k.value, kk.value)] = kk.start_mark.line + 1
    return data, lines


__all__ = ["read_mapping", "read_text", "decode", "MAX_FILE_BYTES", "MAX_DEPTH", "MAX_ALIASES",
           "MAX_NODES"]
