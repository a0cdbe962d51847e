"""Length-and-arrival files: CSV with a header row, or JSON (array or lines) of objects.

Column names are case-insensitive, with aliases:

========  ==================================================
arrival   ``arrival``, ``arrival_ms``, ``time``, ``step``, ``timestamp`` (ms)
input     ``isl``, ``input_len``, ``input_length``, ``prompt_len``
output    ``osl``, ``output_len``, ``output_length``
hash ids  ``hash_ids``, ``block_hashes``, ``blocks`` (optional; in CSV a
          space-separated list of integers)
========  ==================================================

A column absent from the whole file takes a default (arrival 0, lengths 1)
with a warning; a value missing in one row is an error naming its line.
Other columns are kept as they are (numeric when every value is).
"""

from __future__ import annotations

import csv
import io
import warnings
from os import PathLike, fspath
from typing import IO, Any

import numpy as np
import pandas as pd

from inferasim.errors import WorkloadError
from inferasim.workload._columns import Columns
from inferasim.workload._parse import (
    fits_int64,
    length_column,
    number_column,
    parse_json_records,
    read_bytes,
)

__all__ = ["read_table", "write_table", "ALIASES"]

ALIASES: dict[str, tuple[str, ...]] = {
    "arrival_ms": ("arrival", "arrival_ms", "time", "step", "timestamp"),
    "input_len": ("isl", "input_len", "input_length", "prompt_len"),
    "output_len": ("osl", "output_len", "output_length"),
    "hash_ids": ("hash_ids", "block_hashes", "blocks"),
}
_DEFAULTS = {"arrival_ms": 0.0, "input_len": 1, "output_len": 1}
_RESERVED = {"line", "request_id"}


def _canonical(names: list[str], source: str) -> dict[str, str]:
    """Map canonical field -> the file's column name (first alias present wins)."""
    lower = {str(n).strip().lower(): n for n in names}
    found: dict[str, str] = {}
    for canon, aliases in ALIASES.items():
        for alias in aliases:
            if alias not in lower:
                continue
            if canon in found:
                raise WorkloadError(
                    f"columns {found[canon]!r} and {lower[alias]!r} both give {canon}; keep one",
                    source=source,
                    line=1,
                )
            found[canon] = lower[alias]
    if not found:
        known = ", ".join(a for aliases in ALIASES.values() for a in aliases)
        raise WorkloadError(
            f"header {list(names)} matches no known column (known: {known})", source=source, line=1
        )
    return found


def _parse_id_list(text: Any, line: int, source: str, field: str) -> list[int]:
    if isinstance(text, list):
        values = text
    elif isinstance(text, str):
        cleaned = text.strip().strip("[]").replace(",", " ")
        try:
            values = [int(tok) for tok in cleaned.split()]
        except ValueError:
            raise WorkloadError(
                f"must be space-separated integers, got {text[:60]!r}",
                source=source, line=line, field=field,
            ) from None
    else:
        raise WorkloadError(f"must be a list of integers, got {text!r}", source=source, line=line, field=field)
    if any(type(v) is not int for v in values):
        raise WorkloadError(f"must be a list of integers, got {values!r:.60}", source=source, line=line, field=field)
    if not fits_int64(values):
        raise WorkloadError("hash id outside the 64-bit integer range", source=source, line=line, field=field)
    return values


def _records_to_columns(
    records: list[dict[str, Any]], source: str, unit: str, lines: np.ndarray
) -> tuple[dict[str, list[Any]], list[str]]:
    keys: list[str] = []
    for rec in records:
        for k in rec:
            if k not in keys:
                keys.append(k)
    columns: dict[str, list[Any]] = {}
    for k in keys:
        values = []
        for i, rec in enumerate(records):
            if k not in rec:
                raise WorkloadError("missing value", source=source, line=int(lines[i]), field=k, unit=unit)
            values.append(rec[k])
        columns[k] = values
    return columns, keys


def read_table(
    path_or_buffer: str | PathLike[str] | IO[Any], *, block_size: int = 512
) -> Columns:
    """Read a CSV or JSON length-and-arrival file into :class:`~inferasim.workload._columns.Columns`.

    :meth:`Workload.from_csv <inferasim.Workload.from_csv>` builds the
    workload from them (sorting by arrival, checking id counts).

    Parameters
    ----------
    path_or_buffer : str, path or file-like
        CSV with a header row, or JSON: an array of objects or JSON lines
        (detected from the first character). May be gzip-compressed.
    block_size : int, default 512
        Tokens per hash id.

    Returns
    -------
    Columns
        In file order; ``arrival_ms`` shifted so the earliest request arrives at 0, a ``line``
        column with each request's 1-based source line (CSV: the header is
        line 1; JSON array: the record number). Without a hash-id column the
        workload has no content ids (``has_hash_ids`` is False).

    Raises
    ------
    WorkloadError
        A header that matches no known column, a missing, non-numeric,
        negative or fractional value, a malformed hash-id list, malformed
        JSON or an empty file; the message names the file, line and field.

    Examples
    --------
    >>> import io
    >>> cols = read_table(io.StringIO("TIME,ISL,OSL\\n10,100,5\\n30,300,7\\n"))
    >>> cols.arrival_ms, cols.input_len, cols.has_hash_ids
    (array([ 0., 20.]), array([100, 300]), False)
    >>> read_table(io.StringIO("time,isl,osl\\n0,100,5\\n1,-3,7\\n"))
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: <buffer>, line 3, field 'isl': must be >= 0, got -3
    """
    data, source = read_bytes(path_or_buffer)
    if data.lstrip()[:1] in (b"[", b"{"):
        records, lines, unit = parse_json_records(data, source)
        columns, names = _records_to_columns(records, source, unit, lines)
    else:
        unit = "line"
        columns, names, lines = _read_csv(data, source)
    mapping = _canonical(names, source)
    n = len(lines)
    out: dict[str, Any] = {}
    for canon in ("arrival_ms", "input_len", "output_len"):
        if canon not in mapping:
            warnings.warn(
                f"{source}: no {canon} column (accepted: {', '.join(ALIASES[canon])}); "
                f"using {_DEFAULTS[canon]} for every request",
                UserWarning,
                stacklevel=3,
            )
            out[canon] = np.full(n, _DEFAULTS[canon], dtype=np.float64 if canon == "arrival_ms" else np.int64)
            continue
        name = mapping[canon]
        check = number_column if canon == "arrival_ms" else length_column
        out[canon] = check(_csv_values(columns[name]), name, lines, source, unit)
    out["arrival_ms"] = out["arrival_ms"] - out["arrival_ms"].min()
    extras = {}
    for name in names:
        if name in mapping.values():
            continue
        key = str(name).strip()
        if key.lower() in _RESERVED:
            continue
        extras[key] = _maybe_numeric(_csv_values(columns[name]))
    if "hash_ids" in mapping:
        name = mapping["hash_ids"]
        lists = [_parse_id_list(v, int(lines[i]), source, name) for i, v in enumerate(columns[name])]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=n)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        flat = np.fromiter((v for h in lists for v in h), dtype=np.int64, count=int(offsets[-1]))
    else:
        flat, offsets = None, None
    label = source if hasattr(path_or_buffer, "read") else fspath(path_or_buffer).rsplit("/", 1)[-1]  # type: ignore[arg-type]
    return Columns(
        out["arrival_ms"],
        out["input_len"],
        out["output_len"],
        flat,
        offsets,
        {**extras, "line": lines},
        block_size=block_size,
        source=label,
        where=source,
    )


def _read_csv(data: bytes, source: str) -> tuple[dict[str, list[Any]], list[str], np.ndarray]:
    """CSV cells by column, the header names and each row's 1-based source line.

    The :mod:`csv` module tracks physical lines, so blank lines and quoted
    fields spanning lines keep the numbers right.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"not UTF-8 text: {exc}", source=source) from None
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                dupes = sorted({h for h in header if header.count(h) > 1})
                if dupes:
                    raise WorkloadError(f"duplicate column(s) {dupes}", source=source, line=reader.line_num)
                continue
            if len(row) != len(header):
                raise WorkloadError(
                    f"malformed CSV: {len(row)} fields, but the header has {len(header)}",
                    source=source,
                    line=reader.line_num,
                )
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise WorkloadError(f"malformed CSV: {exc}", source=source, line=reader.line_num) from None
    if header is None:
        raise WorkloadError("empty file: no header row", source=source)
    if not rows:
        raise WorkloadError("header row but no requests", source=source)
    columns = {name: [row[j].strip() for row in rows] for j, name in enumerate(header)}
    return columns, header, np.asarray(lines, dtype=np.int64)


def _csv_values(values: list[Any]) -> list[Any]:
    """CSV cells as Python numbers where they parse, else as given (for error messages)."""
    out: list[Any] = []
    for v in values:
        if not isinstance(v, str):
            out.append(v)
            continue
        try:
            out.append(int(v))
        except ValueError:
            try:
                out.append(float(v))
            except ValueError:
                out.append(v)
    return out


def _maybe_numeric(values: list[Any]) -> np.ndarray:
    arr = np.asarray(values, dtype=object)
    types = set(map(type, values))
    if types <= {int}:
        return arr.astype(np.int64)
    if types <= {int, float}:
        return arr.astype(np.float64)
    return arr.astype(str)


def write_table(workload: Columns, path: str | PathLike[str] | IO[Any]) -> None:
    """Write a workload's columns as CSV that :func:`read_table` reads back exactly.

    ``Workload.to_csv`` passes its columns here. Columns: the three core
    columns and every extra column but the provenance ``line``,
    then ``hash_ids`` as space-separated integers when the workload has ids.
    Arrival times are written with full float precision; as with
    :func:`~inferasim.workload.mooncake.write_mooncake` the round trip is exact when
    the first request arrives at 0 ms (readers rebase arrivals).

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> cols = Columns(np.array([0, 1.5]), np.array([600, 10]), np.array([3, 1]),
    ...                np.array([0, 1, 0]), np.array([0, 2, 3]))
    >>> write_table(cols, buf)
    >>> print(buf.getvalue(), end="")
    arrival_ms,input_len,output_len,hash_ids
    0.0,600,3,0 1
    1.5,10,1,0
    """
    frame = pd.DataFrame(
        {
            "arrival_ms": workload.arrival_ms,
            "input_len": workload.input_len,
            "output_len": workload.output_len,
            **{k: v for k, v in workload.extra.items() if k != "line"},
        }
    )
    if workload.has_hash_ids:
        frame["hash_ids"] = [" ".join(map(str, ids)) for ids in workload.hash_id_lists()]
    frame.to_csv(path, index=False)
