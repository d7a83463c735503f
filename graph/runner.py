"""Run a job's chunks in-process or on Dask, with progress; tables out; atomic writes.

In-process and Dask use the same :func:`flopsheet.chunks.run_chunk` on the same
row spans and concatenate in row order, so both give identical tables.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .chunks import CHUNK_ROWS, Job, concat, run_chunk, spans
from .errors import FlopsheetError


def execute(job: Job, *, dask: str | None = None, quiet: bool = False,
            chunk: int = CHUNK_ROWS, label: str = "evaluating") -> dict[str, np.ndarray]:
    """Every row of the job: axis columns, outputs, ``reason`` (0 = kept), ``row``."""
    parts = spans(job.size, chunk)
    if dask is not None:
        return _execute_dask(job, parts, dask, quiet, label)
    out = []
    with progress(len(parts), job.size, quiet, label) as tick:
        for s, e in parts:
            out.append(run_chunk(job, s, e))
            tick(e - s)
    return concat(out)


def _execute_dask(job, parts, address, quiet, label):
    from dask.distributed import as_completed
    with _cluster(address) as client:
        fut_job = client.scatter(job, broadcast=True)
        futs = [client.submit(run_chunk, fut_job, s, e, pure=False) for s, e in parts]
        index = {f.key: i for i, f in enumerate(futs)}
        results: list = [None] * len(futs)
        with progress(len(parts), job.size, quiet, label + " (dask)") as tick:
            for f in as_completed(futs):
                i = index[f.key]
                results[i] = f.result()
                tick(parts[i][1] - parts[i][0])
    return concat(results)


@contextmanager
def _cluster(address: str):
    from dask.distributed import Client, LocalCluster
    if address in ("", "local"):
        with tempfile.TemporaryDirectory(prefix="flopsheet-dask-") as tmp:
            n = max(1, min(os.cpu_count() or 1, 4))
            import logging
            logging.getLogger("distributed").setLevel(logging.ERROR)  # shutdown chatter
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                              local_directory=tmp, dashboard_address=None,
                              silence_logs=logging.ERROR) as cl, \
                    Client(cl) as client:
                yield client
    else:
        with Client(address, timeout="10s") as client:
            yield client


@contextmanager
def progress(n_chunks: int, n_rows: int, quiet: bool, label: str):
    """A rich progress bar on a terminal for work of more than one chunk; silent otherwise."""
    show = not quiet and n_chunks > 1 and sys.stderr.isatty()
    if not show:
        yield lambda k: None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn)
    t0 = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), transient=True, console=None,
                  disable=False) as bar:
        task = bar.add_task(label, total=n_rows, visible=False)

        def tick(k):
            bar.update(task, advance=k, visible=time.monotonic() - t0 > 1.0)
        yield tick


# ------------------------------------------------------------------- tables
def to_frame(lib, job: Job, cols: dict[str, np.ndarray], *, keep_masked: bool = True):
    """A pandas DataFrame: choices as their names, ``reason`` as text ('' where kept)."""
    import pandas as pd
    reasons = np.asarray([""] + job.reasons, dtype=object)
    data = {}
    for k, v in cols.items():
        if k == "reason":
            continue
        if k in lib.inputs and lib.inputs[k].is_choice:
            data[k] = pd.Categorical.from_codes(v.astype(int), lib.inputs[k].choices)
        elif k == "row" or (k in lib.inputs and lib.inputs[k].integer
                            and np.array_equal(v, np.round(v))):
            data[k] = v.astype(np.int64)
        elif k in lib and getattr(lib.item(k), "is_bool", False):
            data[k] = v.astype(bool)
        else:
            data[k] = v
    data["reason"] = reasons[cols["reason"]] if len(cols.get("reason", [])) else []
    df = pd.DataFrame(data)
    if not keep_masked:
        df = df[df["reason"] == ""].reset_index(drop=True)
    return df


def write_table(df, path: str) -> str:
    """Write CSV, Parquet or JSON by the file's extension, atomically (flopsheet.atomic)."""
    from .atomic import atomic_write
    ext = Path(path).suffix.lower()
    if ext not in (".csv", ".parquet", ".json"):
        raise FlopsheetError(f"`{path}`: the output must end in .csv, .parquet or .json")

    def write(tmp: Path) -> None:
        if ext == ".csv":
            df.to_csv(tmp, index=False)
        elif ext == ".json":
            tmp.write_text(df.to_json(orient="records", indent=1), encoding="utf-8")
        else:
            out = df.copy()
            for c in out.columns:  # categoricals round-trip as text
                if str(out[c].dtype) == "category":
                    out[c] = out[c].astype(str)
            out.to_parquet(tmp, index=False)
    atomic_write(path, write)
    return str(path)


def print_rows(lib, df, columns: list[str], *, top: int, file=None, fmt: str = "table") -> None:
    """The first ``top`` rows of ``df``: an aligned table or Markdown with values formatted
    with units, or CSV of the plain values (SI base units, choices by name)."""
    from .audit import show
    from .fmt import csv_text, markdown, table
    rows = []
    for _, r in df.head(top).iterrows():
        line = []
        for c in columns:
            v = r[c]
            if isinstance(v, (bool, np.bool_)):
                line.append("yes" if v else "no")
            elif c in lib and not (c in lib.inputs and lib.inputs[c].is_choice):
                line.append(_plain_number(float(v)) if fmt == "csv" else show(lib, c, float(v)))
            else:
                line.append(str(v))
        rows.append(line)
    out = file or sys.stdout
    if fmt == "csv":
        out.write(csv_text(rows, columns))
        return
    right = set(range(len(columns)))
    print(markdown(rows, columns, right) if fmt == "markdown" else table(rows, columns, right),
          file=out)


def _plain_number(x: float) -> int | float:
    """Whole numbers (degrees, batch sizes) as integers in CSV; the rest as they are."""
    return int(x) if x.is_integer() and abs(x) < 2**53 else x
