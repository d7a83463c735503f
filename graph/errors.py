"""Error classes for flopsheet.

Every error a user can cause carries where it happened (file, line, node) and
what is wrong (detail), and renders as one line ``file:line: node: detail``.
Each kind of error has its own class so callers and tests can tell them apart.
All are picklable (sweeps evaluate in worker processes and send errors back).
"""
from __future__ import annotations


class FlopsheetError(Exception):
    """Base class: a problem with the user's formulas, presets or inputs."""

    kind = "error"

    def __init__(self, detail: str, *, file: str | None = None, line: int | None = None,
                 node: str | None = None):
        self.detail = detail
        self.file = file
        self.line = line
        self.node = node
        super().__init__(self.render())

    def __reduce__(self):
        return (_rebuild, (type(self), self.detail, self.file, self.line, self.node))

    def render(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        who = f"{self.node}: " if self.node else ""
        # one line whatever a file held: control characters are shown escaped
        return f"{where}{who}{self.detail}".translate(_ESCAPES)

    def __str__(self) -> str:
        return self.render()


_ESCAPES = {c: repr(chr(c))[1:-1] for c in [*range(0x20), 0x7f, 0x85, 0x2028, 0x2029]
            if chr(c) != "\t"}


def _rebuild(cls, detail, file, line, node):
    return cls(detail, file=file, line=line, node=node)


class YamlSyntaxError(FlopsheetError):
    """A file is not valid YAML, or not the expected mapping shape."""


class SchemaError(FlopsheetError):
    """A key is missing, unknown, or of the wrong type."""


class ExpressionError(FlopsheetError):
    """A formula uses syntax or a function outside the allowed language."""


class NameRuleError(FlopsheetError):
    """A name breaks the naming rules (snake_case, Excel-safe, not reserved)."""


class DuplicateNameError(FlopsheetError):
    """The same name is defined twice (both places are named)."""


class UnknownNameError(FlopsheetError):
    """A formula, scenario or command names something that does not exist."""


class CycleError(FlopsheetError):
    """Formulas depend on each other in a loop (the whole loop is printed)."""


class UnitError(FlopsheetError):
    """A unit is unknown, or an expression's dimension does not match its declaration."""


class InputValueError(FlopsheetError):
    """An input value is out of bounds, not a valid choice, or not a number."""


class ScenarioError(FlopsheetError):
    """A scenario or preset file is malformed or names a missing preset."""


class EvaluationError(FlopsheetError):
    """A node evaluated to a non-finite number (the inputs responsible are named)."""


class OutputPathError(FlopsheetError):
    """An output file cannot be written (a folder, a missing or read-only folder, a full disk)."""


class ResourceLimitError(FlopsheetError):
    """A file asks for more than the engine will spend (size, nesting, aliases, expansions)."""
