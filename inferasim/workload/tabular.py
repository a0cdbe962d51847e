"""Length-and-arrival files: CSV with a header row, or JSON (array or lines) of objects.

Column names are case-insensitive, with aliases:

========  ==================================================
arrival   ``arrival``, ``arrival_ms``, ``time``, ``step``, ``timestamp``
          (numbers in ``time_unit``, ms by default, or date-time strings)
input     ``isl``, ``input_len``, ``input_length``, ``prompt_len``,
          ``ContextTokens`` (Azure), ``Request tokens`` (BurstGPT)
output    ``osl``, ``output_len``, ``output_length``,
          ``GeneratedTokens`` (Azure), ``Response tokens`` (BurstGPT)
hash ids  ``hash_ids``, ``block_hashes``, ``blocks`` (optional; in CSV a
          space-separated list of integers)
========  ==================================================

An arrival column of date-time strings (``2023-11-16 18:17:03.9799600``,
the Azure LLM inference traces' ``TIMESTAMP``) is read exactly, to the
nanosecond, as ms after the earliest request; values without a time zone
are taken as written (one unstated zone, no conversion), values with an
offset are converted to UTC (see :func:`~inferasim.workload._parse.datetime_column`).
The Azure traces load by name: ``Workload.from_csv("azure_conv_2023")``.

Session columns (optional): ``session_id`` (aliases
``conversation_id``, ``conversation``, ``chat_id``) and ``turn``
(``turn_id``, ``turn_index``, ``round``); see
:mod:`inferasim.workload._sessions`.

A column absent from the whole file takes a default (arrival 0, lengths 1)
with a warning; a value missing in one row is an error naming its line.
Other columns are kept as they are (numeric when every value is).

A column whose name is close to an accepted one (:func:`closest_alias`:
``output_lne``, ``hash_id``) is a misspelling until shown otherwise. When
the field it resembles is a required one missing from the file, reading
fails with "did you mean output_len?" instead of silently using the default
for every request (a file that has no output lengths at all still reads,
with the default and a warning). Otherwise the column is kept as an extra
column with a warning naming the close match, and
:meth:`Workload.describe <inferasim.Workload.describe>` repeats it as a note.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
import warnings
from os import PathLike, fspath
from typing import IO, Any

import numpy as np
import pandas as pd

from inferasim.errors import WorkloadError
from inferasim.workload._columns import Columns
from inferasim.workload._parse import (
    arrival_column,
    datetime_column,
    excerpt,
    fits_int64,
    is_datetime_column,
    length_column,
    parse_json_records,
    read_bytes,
)
from inferasim.workload._sessions import canonical_session_key, session_columns

__all__ = ["read_table", "write_table", "ALIASES", "closest_alias"]

ALIASES: dict[str, tuple[str, ...]] = {
    "arrival_ms": ("arrival", "arrival_ms", "time", "step", "timestamp"),
    "input_len": ("isl", "input_len", "input_length", "prompt_len", "contexttokens", "request tokens"),
    "output_len": ("osl", "output_len", "output_length", "generatedtokens", "response tokens"),
    "hash_ids": ("hash_ids", "block_hashes", "blocks"),
}
_DEFAULTS = {"arrival_ms": 0.0, "input_len": 1, "output_len": 1}
_RESERVED = {"line", "request_id"}
_ALIAS = {alias: canon for canon, aliases in ALIASES.items() for alias in aliases}
#: A CSV number: ASCII digits only, no digit-group underscores (``int("1_000")``
#: and ``int("١٢")`` would accept them).
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?|nan|inf|infinity)", re.ASCII | re.IGNORECASE
)


#: How alike (``difflib`` ratio) a column name must be to an accepted name to be
#: read as its misspelling.
CLOSE_MATCH_RATIO = 0.8
#: Names never taken for misspellings: ``session`` is a plain extra column on
#: purpose (see :mod:`inferasim.workload._sessions`).
_NOT_MISSPELT = {"session", *_RESERVED}


def _accepted_names() -> dict[str, str]:
    """Every accepted column name -> the field it gives."""
    from inferasim.workload._sessions import SESSION_ALIASES

    return {a: canon for canon, names in {**ALIASES, **SESSION_ALIASES}.items() for a in names}


def closest_alias(name: object) -> str | None:
    """The accepted column name ``name`` looks like a misspelling of, or None.

    Accepted names (:data:`ALIASES` and the session aliases) themselves,
    ``session``, reserved names and names not alike to any (``difflib`` ratio
    below :data:`CLOSE_MATCH_RATIO`) give None.

    Examples
    --------
    >>> closest_alias("output_lne"), closest_alias("Hash_Id"), closest_alias("arival_ms")
    ('output_len', 'hash_ids', 'arrival_ms')
    >>> closest_alias("output_len"), closest_alias("priority"), closest_alias("session")
    (None, None, None)
    """
    key = str(name).strip().lower()
    accepted = _accepted_names()
    if key in accepted or key in _NOT_MISSPELT or key.startswith("user_"):
        return None
    match = difflib.get_close_matches(key, list(accepted), n=1, cutoff=CLOSE_MATCH_RATIO)
    return match[0] if match else None


def misspelt_columns(names: list[str]) -> dict[str, str]:
    """Column name -> the accepted name it resembles, for the columns :func:`closest_alias` flags.

    Examples
    --------
    >>> misspelt_columns(["time", "isl", "output_lne", "priority"])
    {'output_lne': 'output_len'}
    """
    return {str(n).strip(): m for n in names if (m := closest_alias(n)) is not None}


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
                    f"columns {excerpt(found[canon])} and {excerpt(lower[alias])} both give {canon}; keep one",
                    source=source,
                    line=1,
                )
            found[canon] = lower[alias]
    if not found:
        known = ", ".join(a for aliases in ALIASES.values() for a in aliases)
        close = "".join(f"; did you mean {m} for {c!r}?" for c, m in misspelt_columns(names).items())
        raise WorkloadError(
            f"header {excerpt(list(names), 80)} matches no known column (known: {known}){close}",
            source=source, line=1,
        )
    return found


def _parse_id_list(text: Any, line: int, source: str, field: str) -> list[int]:
    if isinstance(text, list):
        values = text
    elif isinstance(text, str):
        cleaned = text.strip().strip("[]").replace(",", " ")
        try:
            tokens = cleaned.split()
            if not all(tok.isascii() and "_" not in tok for tok in tokens):
                raise ValueError
            values = [int(tok) for tok in tokens]
        except ValueError:
            raise WorkloadError(
                f"must be space-separated integers, got {excerpt(text)}",
                source=source, line=line, field=field,
            ) from None
    else:
        raise WorkloadError(f"must be a list of integers, got {excerpt(text)}", source=source, line=line, field=field)
    if any(type(v) is not int for v in values):
        raise WorkloadError(f"must be a list of integers, got {excerpt(values)}", source=source, line=line, field=field)
    if not fits_int64(values):
        raise WorkloadError("hash id outside the 64-bit integer range", source=source, line=line, field=field)
    return values


def _records_to_columns(
    records: list[dict[str, Any]], source: str, unit: str, lines: np.ndarray
) -> tuple[dict[str, list[Any]], list[str]]:
    """Columns of JSON records; every record is read on its own.

    Each key is matched case-insensitively against the aliases, so one
    record's spelling (``isl``) and another's (``input_len``) give the same
    field; two keys of one record giving the same field are an error.
    Columns are named by the first spelling seen.
    """
    shown: dict[str, str] = {}  # field -> first spelling (the column name)
    normalised: list[dict[str, Any]] = []
    for i, rec in enumerate(records):
        row: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for key, value in rec.items():
            name = str(key).strip()
            field = _ALIAS.get(name.lower(), name)
            if field in row:
                raise WorkloadError(
                    f"keys {excerpt(spelled[field])} and {excerpt(key)} both give {field}; keep one",
                    source=source, line=int(lines[i]), field=field, unit=unit,
                )
            row[field] = value
            spelled[field] = key
            shown.setdefault(field, name)
        normalised.append(row)
    columns: dict[str, list[Any]] = {}
    for field, name in shown.items():
        values = []
        for i, row in enumerate(normalised):
            if field not in row:
                raise WorkloadError("missing value", source=source, line=int(lines[i]), field=name, unit=unit)
            values.append(row[field])
        columns[name] = values
    return columns, list(shown.values())


_TIME_UNITS = {"ms": 1.0, "s": 1000.0}


def read_table(
    path_or_buffer: str | PathLike[str] | IO[Any],
    *,
    block_size: int = 512,
    time_unit: str = "ms",
    verify: bool = True,
) -> Columns:
    """Read a CSV or JSON length-and-arrival file into :class:`~inferasim.workload._columns.Columns`.

    :meth:`Workload.from_csv <inferasim.Workload.from_csv>` builds the
    workload from them (sorting by arrival, checking id counts).

    Parameters
    ----------
    path_or_buffer : str, path or file-like
        CSV with a header row, or JSON: an array of objects or JSON lines
        (detected from the first character). May be gzip-compressed. Or the
        name of a known trace in this format (``"azure_code_2023"``,
        ``"azure_conv_2023"``, ``"azure_code_2024"``, ``"azure_conv_2024"``),
        found or fetched by :func:`inferasim.workload.traces.find_trace`.
    block_size : int, default 512
        Tokens per hash id.
    time_unit : {"ms", "s"}, default "ms"
        Unit of a numeric arrival column (a date-time column has its own).
    verify : bool, default True
        For a trace name: check the file found against its pinned sha256.

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
    >>> azure = "TIMESTAMP,ContextTokens,GeneratedTokens\\r\\n2023-11-16 18:15:46.6805900,374,44\\r\\n"
    >>> read_table(io.StringIO(azure + "2023-11-16 18:15:50.9951690,396,109\\r\\n")).arrival_ms
    array([   0.   , 4314.579])
    >>> read_table(io.StringIO("time,isl,osl\\n0,100,5\\n1,-3,7\\n"))
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: <buffer>, line 3, field 'isl': must be >= 0, got -3
    """
    from inferasim.workload.traces import resolve_source

    if time_unit not in _TIME_UNITS:
        raise ValueError(f"time_unit must be 'ms' or 's', got {time_unit!r}")
    path_or_buffer = resolve_source(path_or_buffer, "azure", verify=verify)
    data, source = read_bytes(path_or_buffer)
    if data.lstrip().removeprefix(b"\xef\xbb\xbf")[:1] in (b"[", b"{"):
        records, lines, unit = parse_json_records(data, source)
        columns, names = _records_to_columns(records, source, unit, lines)
    else:
        unit = "line"
        columns, names, lines = _read_csv(data, source)
    mapping = _canonical(names, source)
    misspelt = misspelt_columns(names)
    accepted = _accepted_names()
    for column, match in misspelt.items():
        canon = accepted[match]
        if canon in _DEFAULTS and canon not in mapping:
            # A required field missing and a column named almost like it: the
            # default (every output 1 token) would silently misread the file.
            raise WorkloadError(
                f"column {column!r} is not an accepted name (did you mean {match}?) and there is "
                f"no {canon} column; rename it to one of {', '.join(ALIASES[canon])}",
                source=source, line=1 if unit == "line" else None,
            )
    for column, match in misspelt.items():
        warnings.warn(
            f"{source}: column {column!r} is not an accepted name (did you mean {match}?); "
            f"kept as an extra column, not read as {accepted[match]}",
            UserWarning,
            stacklevel=3,
        )
    n = len(lines)
    out: dict[str, Any] = {}
    for canon in ("arrival_ms", "input_len", "output_len"):
        if canon not in mapping:
            others = [str(x).strip() for x in names if str(x).strip().lower() not in accepted]
            warnings.warn(
                f"{source}: no {canon} column (accepted: {', '.join(ALIASES[canon])}); "
                f"using {_DEFAULTS[canon]} for every request"
                + (f" (other columns, kept as they are: {', '.join(others)})" if others else ""),
                UserWarning,
                stacklevel=3,
            )
            out[canon] = np.full(n, _DEFAULTS[canon], dtype=np.float64 if canon == "arrival_ms" else np.int64)
            continue
        name = mapping[canon]
        values = _csv_values(columns[name], name, lines, source)
        if canon != "arrival_ms":
            out[canon] = length_column(values, name, lines, source, unit)
        elif is_datetime_column(values):
            out[canon] = datetime_column(values, name, lines, source, unit)
        else:
            out[canon] = arrival_column(values, name, lines, source, unit) * _TIME_UNITS[time_unit]
    extras = {}
    session_raw: dict[str, tuple[str, list[Any]]] = {}
    for name in names:
        if name in mapping.values():
            continue
        key = str(name).strip()
        canon = canonical_session_key(key)
        if canon is not None:
            if canon in session_raw:
                raise WorkloadError(
                    f"columns {excerpt(session_raw[canon][0])} and {excerpt(key)} both give "
                    f"{canon}; keep one",
                    source=source, line=1 if unit == "line" else None,
                )
            session_raw[canon] = (key, _csv_values(columns[name], name, lines, source))
            continue
        if key.lower() in _RESERVED:
            renamed = f"user_{key}"
            if any(str(other).strip().lower() == renamed.lower() for other in names):
                raise WorkloadError(
                    f"column {excerpt(key)} is reserved and {renamed!r} is taken; rename one",
                    source=source, line=1 if unit == "line" else None,
                )
            warnings.warn(
                f"{source}: column {key!r} is a reserved name (inferasim's "
                f"{'source line' if key.lower() == 'line' else 'request index'}); kept as {renamed!r}",
                UserWarning,
                stacklevel=3,
            )
            key = renamed
        extras[key] = _maybe_numeric(_csv_values(columns[name], name, lines, source))
    extras.update(
        session_columns(
            session_raw.get("session_id", (None, None))[1],
            session_raw.get("turn", (None, None))[1],
            out["arrival_ms"], lines, source, unit,
        )
    )
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
    reader = csv.reader(io.StringIO(text), skipinitialspace=True, strict=True)
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    start = 1  # the physical line the next row starts on
    try:
        for row in reader:
            first, start = start, reader.line_num + 1
            if not row or all(not cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                if header[0][:1] in ("{", "["):
                    raise WorkloadError(
                        "this is JSON, not CSV; read a Mooncake trace with Workload.from_mooncake",
                        source=source, line=first,
                    )
                by_lower: dict[str, str] = {}
                for h in header:
                    if h.lower() in by_lower:
                        raise WorkloadError(
                            f"duplicate column: {excerpt(by_lower[h.lower()])} and {excerpt(h)} "
                            "(names are case-insensitive); keep one",
                            source=source, line=first,
                        )
                    by_lower[h.lower()] = h
                continue
            if len(row) != len(header):
                raise WorkloadError(
                    f"malformed CSV: {len(row)} fields, but the header has {len(header)}",
                    source=source,
                    line=first,
                )
            rows.append(row)
            lines.append(first)
    except csv.Error as exc:
        # a quote left open runs to the end of the file: blame the line it opened on
        raise WorkloadError(f"malformed CSV: {exc}", source=source, line=start) from None
    if header is None:
        raise WorkloadError("empty file: no header row", source=source)
    if not rows:
        raise WorkloadError("header row but no requests", source=source)
    columns = {name: [row[j].strip() for row in rows] for j, name in enumerate(header)}
    return columns, header, np.asarray(lines, dtype=np.int64)


def _csv_values(values: list[Any], field: str, lines: np.ndarray, source: str) -> list[Any]:
    """CSV cells as Python numbers where they are plain ASCII numbers, else as given.

    Cells that are not numbers stay strings, so the validators name them;
    a non-zero number that float64 reads as 0 (``1e-400``) is an error here.
    """
    out: list[Any] = []
    for i, v in enumerate(values):
        if not isinstance(v, str) or _NUMBER.fullmatch(v) is None:
            out.append(v)
            continue
        try:
            out.append(int(v))
        except ValueError:
            f = float(v)
            if f == 0.0 and v.lower().split("e")[0].strip("+-0.") != "":
                raise WorkloadError(
                    f"the number {excerpt(v)} underflows to 0 in float64; write 0 or a larger value",
                    source=source, line=int(lines[i]), field=field,
                ) from None
            out.append(f)
    return out


def session_columns_as_csv(
    session: list[Any] | None, turn: list[Any] | None, arrival: np.ndarray, source: str
) -> dict[str, np.ndarray]:
    """``session_id`` / ``turn`` of per-request values (``Workload.from_requests``),
    checked as a CSV's are and refused unless :func:`write_table` writes them as
    text that :func:`read_table` reads back as the same ids.

    Messages name the 0-based request (``request i``) and the field. A string
    id that reads back as something else (``"01"`` and ``"1"`` both read as
    the number 1, ``" a"`` as ``"a"``, ``"nan"`` as a missing value) is an
    error here, at the first step of the round trip, not at ``from_csv``.

    Examples
    --------
    >>> cols = session_columns_as_csv(["a", "b", "a"], None, np.array([0.0, 1, 2]), "t")
    >>> cols["session_id"].tolist(), cols["turn"].tolist()
    (['a', 'b', 'a'], [1, 1, 2])
    >>> session_columns_as_csv(["1", "01"], None, np.array([0.0, 1]), "t")
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: t, request 0, field 'session_id': the session id '1' is written to CSV as 1, which from_csv reads back as the number 1: give session ids as numbers, or as strings that do not read as numbers and have no surrounding spaces
    """
    index = np.arange(arrival.size, dtype=np.int64)
    cols = session_columns(session, turn, arrival, index, source, unit="request")
    if not cols:
        return cols
    sid = cols["session_id"]
    if sid.dtype != object:
        return cols  # (whole numbers: written as digits, read back as the same ints)
    texts = [str(v) for v in sid.tolist()]
    back = session_columns(_csv_values([t.strip() for t in texts], "session_id", index, source),
                           None, arrival, index, source, unit="request")["session_id"]
    for i, (a, b) in enumerate(zip(sid.tolist(), back.tolist(), strict=True)):
        if a != b:
            shown = f"the number {b}" if isinstance(b, int) or not isinstance(b, str) else repr(b)
            raise WorkloadError(
                f"the session id {a!r} is written to CSV as {texts[i].strip() or '(nothing)'}, "
                f"which from_csv reads back as {shown}: give session ids as numbers, or as "
                "strings that do not read as numbers and have no surrounding spaces",
                source=source, line=i, field="session_id", unit="request",
            )
    return cols


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
