"""Recalculate workbooks in headless LibreOffice, from flopsheet's own interpreter.

LibreOffice's Python bridge (``uno``) belongs to the system interpreter
(Debian's ``python3-uno`` for ``/usr/bin/python3``), not to flopsheet's
environment, so the work happens in a helper process, ``_uno_worker.py``, run
under that interpreter. The helper starts ``soffice --headless`` once, with a
private profile in a temporary folder, and then recalculates as many
workbooks as asked (load, set values, ``calculateAll()``, read every defined
name back, close) over a line-based JSON protocol on its stdin/stdout.

:class:`LibreOffice` owns the helper: it starts it in a new process group, so
closing it (or a timeout) ends the helper and soffice together by that
group's id, and removes the temporary profile. :func:`shared` returns one
instance per process (started on first use, closed at exit), so a test
session starts soffice once.

Environment: ``FLOPSHEET_SOFFICE`` (the soffice program), ``FLOPSHEET_UNO_PYTHON``
(the interpreter with ``uno``; default ``/usr/bin/python3``, then ``python3``
on PATH).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from flopsheet.errors import FlopsheetError

WORKER = Path(__file__).with_name("_uno_worker.py")
START_TIMEOUT = 120.0
REQUEST_TIMEOUT = 180.0


def _end_group(proc) -> None:
    """SIGKILL the process group ``proc`` leads (the helper and its soffice) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class RecalcError(FlopsheetError):
    """LibreOffice is missing, did not start, or failed to recalculate a workbook."""


@dataclass
class Cell:
    """One recalculated cell: a number, a text, an error, or empty."""

    value: float | None = None
    text: str | None = None
    error: int | None = None
    formula: str | None = None  # as LibreOffice shows it (when asked for)

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def empty(self) -> bool:
        return self.value is None and self.text is None and self.error is None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"Cell(error={self.error} {self.text!r})"
        return f"Cell({self.value!r})" if self.text is None else f"Cell({self.text!r})"


class Recalculated(dict):
    """Defined name -> :class:`Cell`; ``sheets`` maps a sheet name to its rows of values."""

    def __init__(self):
        super().__init__()
        self.sheets: dict[str, list[list[Any]]] = {}


def find_soffice() -> str | None:
    env = os.environ.get("FLOPSHEET_SOFFICE")
    if env:
        return env if (os.path.isfile(env) or shutil.which(env)) else None
    for name in ("soffice", "libreoffice"):
        p = shutil.which(name)
        if p:
            return p
    for p in ("/usr/bin/soffice", "/usr/lib/libreoffice/program/soffice",
              "/opt/libreoffice/program/soffice",
              "/Applications/LibreOffice.app/Contents/MacOS/soffice"):
        if os.path.isfile(p):
            return p
    return None


def _has_uno(python: str) -> bool:
    try:
        r = subprocess.run([python, "-c", "import uno"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


_UNO_PYTHON: list[str | None] = []


def find_uno_python() -> str | None:
    """An interpreter that can ``import uno`` (cached)."""
    if _UNO_PYTHON:
        return _UNO_PYTHON[0]
    env = os.environ.get("FLOPSHEET_UNO_PYTHON")
    cands = [env] if env else ["/usr/bin/python3", shutil.which("python3") or ""]
    found = next((c for c in cands if c and os.path.exists(c) and _has_uno(c)), None)
    _UNO_PYTHON.append(found)
    return found


def availability() -> tuple[bool, str]:
    """(True, "") when LibreOffice and a ``uno`` interpreter are present, else (False, why)."""
    if find_soffice() is None:
        return False, ("LibreOffice (soffice) is not installed; apt-get install "
                       "libreoffice-calc-nogui python3-uno")
    if find_uno_python() is None:
        return False, ("no Python interpreter with LibreOffice's `uno` module "
                       "(apt-get install python3-uno, or set FLOPSHEET_UNO_PYTHON)")
    return True, ""


class LibreOffice:
    """One headless LibreOffice, driven through the helper process."""

    def __init__(self, *, start_timeout: float = START_TIMEOUT,
                 request_timeout: float = REQUEST_TIMEOUT):
        ok, why = availability()
        if not ok:
            raise RecalcError(why)
        self.request_timeout = request_timeout
        self._lock = threading.Lock()
        self._profile = tempfile.mkdtemp(prefix="flopsheet-lo-")
        self._stderr = tempfile.TemporaryFile()
        pipe = f"flopsheet_{os.getpid()}_{uuid.uuid4().hex[:12]}"
        env = dict(os.environ, FLOPSHEET_LO_START_TIMEOUT=str(start_timeout))
        env.pop("PYTHONPATH", None)  # the system interpreter must not see our venv's packages
        env.pop("PYTHONHOME", None)
        self._proc = subprocess.Popen(
            [find_uno_python(), str(WORKER), find_soffice(), self._profile, pipe],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            start_new_session=True, env=env, cwd=self._profile)
        self._buf = b""
        try:
            hello = self._receive(start_timeout + 10)
        except RecalcError:
            self.close()
            raise
        if not hello.get("ok"):
            self.close()
            raise RecalcError(f"LibreOffice did not start: {hello.get('error')}")

    # ------------------------------------------------------------ protocol
    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        out = self._proc.stdout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise RecalcError(f"LibreOffice did not answer within {timeout:.0f} s "
                                  f"(stopped it){self._tail()}")
            r, _, _ = select.select([out], [], [], min(left, 1.0))
            if not r:
                continue
            chunk = os.read(out.fileno(), 1 << 20)
            if not chunk:
                self._kill()
                raise RecalcError(f"the LibreOffice helper exited{self._tail()}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _tail(self) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        return f": {text[-600:]}" if text else ""

    def recalculate(self, path: str | os.PathLike, set_values: Mapping[str, Any] | None = None,
                    *, save_as: str | os.PathLike | None = None, formulas: bool = False,
                    sheets: list[str] | None = None) -> Recalculated:
        """Load ``path``, write ``set_values`` into the named cells, recalculate everything
        (``calculateAll``), and return every defined name's cell (a mapping name -> Cell;
        ``.sheets`` holds the used area of each sheet in ``sheets`` as rows of values, with
        error cells as Cell(error=...)). With ``save_as``, the recalculated workbook is also
        stored there as .xlsx (with cached values)."""
        req = {"cmd": "recalc", "path": os.fspath(Path(path).resolve()),
               "set": {k: (v if isinstance(v, str) else float(v))
                       for k, v in (set_values or {}).items()},
               "formulas": formulas, "sheets": list(sheets or [])}
        if save_as is not None:
            req["save_as"] = os.fspath(Path(save_as).resolve())
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                raise RecalcError("LibreOffice is not running" + self._tail())
            try:
                self._proc.stdin.write((json.dumps(req) + "\n").encode())
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self._kill()
                raise RecalcError("the LibreOffice helper went away" + self._tail()) from None
            resp = self._receive(self.request_timeout)
        if not resp.get("ok"):
            raise RecalcError(f"LibreOffice could not recalculate {path}: {resp.get('error')}")
        cells = Recalculated()
        for name, c in resp["values"].items():
            cells[name] = Cell(value=c.get("v"), text=c.get("s"), error=c.get("err"),
                               formula=c.get("f"))
        for title, rows in (resp.get("sheets") or {}).items():
            cells.sheets[title] = [[Cell(error=v["err"]) if isinstance(v, dict) else v
                                    for v in line] for line in rows]
        return cells

    # ------------------------------------------------------------ shutdown
    def _kill(self) -> None:
        if self._proc is not None:
            _end_group(self._proc)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.poll() is None:
                    try:
                        proc.stdin.write(b'{"cmd": "quit"}\n')
                        proc.stdin.flush()
                        proc.stdin.close()
                    except (BrokenPipeError, OSError):
                        pass
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        pass
            finally:
                _end_group(proc)  # soffice runs in the helper's group: end any survivor
                for f in (proc.stdout, proc.stdin):
                    try:
                        if f:
                            f.close()
                    except OSError:
                        pass
        try:
            self._stderr.close()
        except OSError:
            pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "LibreOffice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: list[LibreOffice] = []


def shared() -> LibreOffice:
    """The process-wide instance (started on first use, closed at interpreter exit)."""
    if _SHARED and _SHARED[0]._proc is not None and _SHARED[0]._proc.poll() is None:
        return _SHARED[0]
    _SHARED.clear()
    lo = LibreOffice()
    _SHARED.append(lo)
    return lo


@atexit.register
def _close_shared() -> None:
    while _SHARED:
        _SHARED.pop().close()


__all__ = ["LibreOffice", "Cell", "Recalculated", "RecalcError", "availability", "shared", "find_soffice",
           "find_uno_python"]
