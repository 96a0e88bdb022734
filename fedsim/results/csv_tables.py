"""A run's CSV tables (``metrics.csv``, ``clients.csv``): written whole and atomically, or appended to, and read back.

An empty cell is a value not measured (NaN in the rows). Appending writes only the new rows, so
that a table that grows by a thousand clients' rows each round is not rewritten whole each
round; a line cut short by a kill mid-append is not read back (a resumed run rewrites the table
up to its checkpoint).
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path

from partitions._io import write_atomic


def csv_text(columns, rows: list[dict], *, header: bool = True) -> str:
    """Return ``rows`` as CSV text with ``columns`` (and their header line); NaN and ``None`` as empty cells."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(row.get(key)) for key in columns})
    return buffer.getvalue()


def write_table(path: Path, columns, rows: list[dict]) -> None:
    """Write ``rows`` as the CSV file ``path``, atomically."""
    write_atomic(path, csv_text(columns, rows))


def append_table(path: Path, columns, rows: list[dict]) -> None:
    """Add ``rows`` at the end of the CSV file ``path`` (written with ``columns``), or write it when absent."""
    if not path.exists():
        write_table(path, columns, rows)
        return
    with open(path, "a", encoding="utf-8", newline="") as stream:
        stream.write(csv_text(columns, rows, header=False))
        stream.flush()
        os.fsync(stream.fileno())


def read_rows(path) -> list[dict]:
    """Read a ``metrics.csv`` back, numbers as floats (ints for round and counters).

    An empty cell (a value not measured that round) reads as NaN, in files of every version. A
    last line without its line end (an append cut short) is left out.
    """
    with open(path, encoding="utf-8", newline="") as stream:
        text = stream.read()
    text = text[: text.rfind("\n") + 1]
    return [{key: _parse(key, value) for key, value in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def _parse(key, value):
    if key == "strategy":
        return value
    if value == "":
        return math.nan
    if key in ("round", "samples_seen", "bytes_communicated", "bytes_up", "bytes_down", "client", "n"):
        return int(value)
    return float(value)
