"""flopsheet: LLM training and inference performance and cost as an auditable calculation graph."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("flopsheet")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0+unknown"

from .errors import FlopsheetError  # noqa: E402
from .library import Library, load_library  # noqa: E402

__all__ = ["FlopsheetError", "Library", "load_library", "sweep", "search", "__version__"]


def __getattr__(name):  # the exploration API loads pandas only when it is used
    if name == "sweep":
        from .sweeps import sweep
        return sweep
    if name == "search":
        from .layout_search import search
        return search
    raise AttributeError(f"module 'flopsheet' has no attribute {name!r}")
