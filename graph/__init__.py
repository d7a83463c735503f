"""flopsheet: LLM training and inference performance and cost as an auditable calculation graph."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("flopsheet")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0+unknown"

from .errors import FlopsheetError  # noqa: E402
from .library import Library, load_library  # noqa: E402

__all__ = ["FlopsheetError", "Library", "load_library", "__version__"]
