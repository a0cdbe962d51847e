"""Mooncake traces: JSON lines (or a JSON array) of requests with block hash ids.

Each record is ``{"timestamp": ms, "input_length": n, "output_length": m,
"hash_ids": [...]}``; each hash id names one ``block_size``-token prefix
block and everything before it. Field names are case-insensitive, with the
aliases ``arrival``/``time`` for ``timestamp`` and ``block_hashes``/
``blocks`` for ``hash_ids`` (and ``input_len``/``isl``,
``output_len``/``osl`` for the lengths). Files may be gzip-compressed.
Optional extra fields ``session_id`` and ``turn`` (and their aliases, see
:mod:`inferasim.workload._sessions`) group requests into conversations;
other extra fields are ignored.
"""

from __future__ import annotations

from itertools import chain
from os import PathLike, fspath
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from inferasim.errors import WorkloadError
from inferasim.workload._columns import Columns
from inferasim.workload._parse import (
    arrival_column,
    excerpt,
    fits_int64,
    length_column,
    parse_json_records,
    read_bytes,
)
from inferasim.workload._sessions import canonical_session_key, session_columns

__all__ = ["read_mooncake", "write_mooncake"]

_FIELDS = {
    "timestamp": ("timestamp", "arrival", "time", "arrival_ms"),
    "input_length": ("input_length", "input_len", "isl"),
    "output_length": ("output_length", "output_len", "osl"),
    "hash_ids": ("hash_ids", "block_hashes", "blocks"),
}
_ALIAS = {alias: canon for canon, aliases in _FIELDS.items() for alias in aliases}


def _columns_fast(records: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
    """Columns by exact canonical keys, or None when any record differs.

    Also None when any record carries another spelling of a field (an alias
    or another case) next to the canonical key: the slow path names the clash.
    """
    try:
        cols = {key: [r[key] for r in records] for key in _FIELDS}
    except KeyError:
        return None
    keys = set().union(*records)
    if any(key not in _FIELDS and _ALIAS.get(str(key).lower()) for key in keys):
        return None
    return cols


def _columns_slow(
    records: list[dict[str, Any]], lines: np.ndarray, source: str, unit: str
) -> dict[str, list[Any]]:
    """Columns with case-insensitive keys and aliases; names the first missing field."""
    cols: dict[str, list[Any]] = {key: [] for key in _FIELDS}
    for i, rec in enumerate(records):
        found: dict[str, Any] = {}
        seen: dict[str, str] = {}
        for key, value in rec.items():
            canon = _ALIAS.get(str(key).lower())
            if canon is None:
                continue
            if canon in found:
                raise WorkloadError(
                    f"keys {excerpt(seen[canon])} and {excerpt(key)} both give {canon}; keep one",
                    source=source, line=int(lines[i]), field=canon, unit=unit,
                )
            found[canon] = value
            seen[canon] = key
        for canon in _FIELDS:
            if canon not in found:
                names = "/".join(_FIELDS[canon])
                raise WorkloadError(
                    f"missing required field (accepted names: {names})",
                    source=source,
                    line=int(lines[i]),
                    field=canon,
                    unit=unit,
                )
            cols[canon].append(found[canon])
    return cols


def _session_fields(
    records: list[dict[str, Any]], lines: np.ndarray, source: str, unit: str
) -> tuple[list[Any] | None, list[Any] | None]:
    """Raw ``session_id`` / ``turn`` values (extra fields, aliases case-insensitive).

    A field present in some records must be in all of them (a line's
    meaning never depends on other lines); two aliases in one record clash.
    """
    keys = {k for rec in records for k in rec if canonical_session_key(k) is not None}
    if not keys:
        return None, None
    out: dict[str, list[Any]] = {"session_id": [], "turn": []}
    present: dict[str, bool] = {}
    for i, rec in enumerate(records):
        found: dict[str, str] = {}
        for key in rec:
            canon = canonical_session_key(key)
            if canon is None:
                continue
            if canon in found:
                raise WorkloadError(
                    f"keys {excerpt(found[canon])} and {excerpt(key)} both give {canon}; keep one",
                    source=source, line=int(lines[i]), field=canon, unit=unit,
                )
            found[canon] = key
        for canon in ("session_id", "turn"):
            has = canon in found
            if present.setdefault(canon, has) != has:
                raise WorkloadError(
                    f"{'has' if has else 'lacks'} {canon}, unlike {unit} {int(lines[0])}; give it "
                    "on every line or on none",
                    source=source, line=int(lines[i]), field=canon, unit=unit,
                )
            if has:
                out[canon].append(rec[found[canon]])
    return (
        out["session_id"] if present["session_id"] else None,
        out["turn"] if present["turn"] else None,
    )


def _hash_id_arrays(
    hids: list[Any], lines: np.ndarray, source: str, unit: str
) -> tuple[np.ndarray, np.ndarray]:
    if not all(type(h) is list for h in hids):
        i = next(i for i, h in enumerate(hids) if type(h) is not list)
        raise WorkloadError(
            f"must be a list of integers, got {excerpt(hids[i])}",
            source=source, line=int(lines[i]), field="hash_ids", unit=unit,
        )
    lengths = np.fromiter(map(len, hids), dtype=np.int64, count=len(hids))
    flat = list(chain.from_iterable(hids))
    if set(map(type, flat)) - {int}:
        for i, h in enumerate(hids):
            bad = [v for v in h if type(v) is not int]
            if bad:
                # JSON parsers read integers beyond 64 bits as floats
                v = bad[0]
                big = type(v) is float and np.isfinite(v) and abs(v) >= 2**63 and v == int(v)
                raise WorkloadError(
                    "hash id outside the 64-bit integer range"
                    if big
                    else f"must be a list of integers, found {excerpt(bad[0])}",
                    source=source, line=int(lines[i]), field="hash_ids", unit=unit,
                )
    try:
        ids = np.array(flat, dtype=np.int64)
    except OverflowError:
        for i, h in enumerate(hids):
            if not fits_int64(h):
                raise WorkloadError(
                    "hash id outside the 64-bit integer range",
                    source=source, line=int(lines[i]), field="hash_ids", unit=unit,
                ) from None
        raise
    return ids, np.concatenate(([0], np.cumsum(lengths)))


def read_mooncake(
    path_or_name: str | PathLike[str] | IO[Any], *, block_size: int = 512, verify: bool = True
) -> Columns:
    """Read a Mooncake trace into :class:`~inferasim.workload._columns.Columns`.

    :meth:`Workload.from_mooncake <inferasim.Workload.from_mooncake>` builds
    the workload from them (sorting by arrival, checking id counts).

    Parameters
    ----------
    path_or_name : str, path or file-like
        A JSON-lines or JSON-array file (optionally gzip-compressed), an
        open file or buffer, or the name of a FAST'25 trace
        (``"conversation"``, ``"synthetic"``, ``"toolagent"``, ``"arxiv"``), found or
        fetched by :func:`inferasim.workload.traces.find_trace`.
    block_size : int, default 512
        Tokens per hash id (512 in the FAST'25 traces).
    verify : bool, default True
        For a trace name: check the file found against its pinned sha256
        (:func:`inferasim.workload.traces.verify_trace`).

    Returns
    -------
    Columns
        In file order. Arrivals replay the trace's own timestamps, shifted
        so the earliest request arrives at 0 ms. The ``line`` column keeps
        each request's 1-based source line (record number for a JSON array).

    Raises
    ------
    WorkloadError
        On malformed JSON, a missing field, a non-numeric, negative or
        fractional length, a non-finite timestamp, ``hash_ids`` that is not a
        list of integers, or an empty file; the message names the file, the
        line and the field.

    Examples
    --------
    >>> import io
    >>> text = ('{"timestamp": 5, "input_length": 1024, "output_length": 2, "hash_ids": [0, 1]}\\n'
    ...         '{"timestamp": 9, "input_length": 700, "output_length": 4, "hash_ids": [0, 2]}\\n')
    >>> cols = read_mooncake(io.StringIO(text))
    >>> cols.arrival_ms, cols.input_len, cols.extra["line"]
    (array([0., 4.]), array([1024,  700]), array([1, 2]))
    >>> cols.hash_ids, cols.offsets
    (array([0, 1, 0, 2]), array([0, 2, 4]))
    """
    from inferasim.workload.traces import resolve_source

    # a folder named like a trace does not shadow it
    path_or_name = resolve_source(path_or_name, "mooncake", verify=verify)
    data, source = read_bytes(path_or_name)
    records, lines, unit = parse_json_records(data, source)
    cols = _columns_fast(records) or _columns_slow(records, lines, source, unit)
    arrival = arrival_column(cols["timestamp"], "timestamp", lines, source, unit)
    input_len = length_column(cols["input_length"], "input_length", lines, source, unit)
    output_len = length_column(cols["output_length"], "output_length", lines, source, unit)
    ids, offsets = _hash_id_arrays(cols["hash_ids"], lines, source, unit)
    session, turn = _session_fields(records, lines, source, unit)
    extra = session_columns(session, turn, arrival, lines, source, unit)
    return Columns(
        arrival,
        input_len,
        output_len,
        ids,
        offsets,
        {**extra, "line": lines},
        block_size=block_size,
        source=_label(path_or_name, source),
        where=source,
    )


def _label(path_or_name: Any, source: str) -> str:
    return Path(source).name if not hasattr(path_or_name, "read") else source


def write_mooncake(
    workload: Columns, path: str | PathLike[str] | IO[Any], *, exact: bool = False
) -> None:
    """Write a workload as Mooncake JSON lines, by default as NVIDIA AIPerf reads them.

    The default file is what AIPerf's Mooncake-trace loader reads as it is
    (``aiperf profile --input-file F --custom-dataset-type mooncake_trace``).
    Checked against its source, ai-dynamo/aiperf 0.1.1 (commit db4f639,
    October 2025): ``aiperf/dataset/loader/models.py`` ``MooncakeTrace``, a
    pydantic model with ``input_length: int``, ``output_length: int``,
    ``hash_ids: list[int]``, ``timestamp: int`` (ms), ``session_id: str``
    and ``type`` reserved for the dataset kind, extra fields allowed
    (``AIPerfBaseModel``: ``extra="allow"``); read line by line by
    ``loader/mooncake_trace.py`` with ``model_validate_json``, a session's
    turns in file order. Pydantic rejects a float with a fraction for an
    ``int`` and an integer for a ``str``, so timestamps are written as whole
    ms (rounded to the nearest, half to even, when an arrival has a
    fraction) and session ids as strings; ``turn`` is written as an extra
    field (AIPerf keeps it unread; this package reads it back); no request
    ``type``. Rows are in the workload's (arrival) order. The PyPI wheel
    ``aiperf==0.1.1`` carries an older ``MooncakeTrace`` (``input_length``,
    ``output_length``, ``hash_ids``, ``timestamp`` required, other fields
    ignored, no sessions); it validates these lines too (checked with that
    wheel in a separate environment, December 2026).

    ``exact=True`` writes the exact round-trip format instead: timestamps as
    integers when every arrival is a whole number of ms, else as shortest
    round-trip floats, and session ids with their own types, so
    :func:`read_mooncake` gives back the same workload for every workload
    whose first request arrives at 0 ms (readers rebase arrivals to the
    first). The default is that same round trip whenever every arrival is a
    whole ms and session ids (if any) are strings.

    Only the four Mooncake fields are written, plus ``session_id`` and
    ``turn`` when the workload has them (extra columns such as
    ``prefix_id`` are not part of the format). A path ending in ``.gz`` is
    gzip-compressed.

    Parameters
    ----------
    workload : Columns
        A workload's columns (``Workload.to_mooncake`` passes them); must
        carry hash ids.
    path : str, path or writable file-like
    exact : bool, default False
        Keep sub-ms arrivals and session-id types (see above); AIPerf then
        rejects a line with a fractional timestamp or a non-string session id.

    Examples
    --------
    >>> import io
    >>> cols = Columns(np.array([0, 2.5]), np.array([600, 10]), np.array([3, 1]),
    ...                np.array([0, 1, 0]), np.array([0, 2, 3]))
    >>> buf = io.StringIO()
    >>> write_mooncake(cols, buf)  # AIPerf's whole ms (2.5 rounds half to even)
    >>> print(buf.getvalue(), end="")
    {"timestamp":0,"input_length":600,"output_length":3,"hash_ids":[0,1]}
    {"timestamp":2,"input_length":10,"output_length":1,"hash_ids":[0]}
    >>> buf = io.StringIO()
    >>> write_mooncake(cols, buf, exact=True)
    >>> _ = buf.seek(0)
    >>> read_mooncake(buf).arrival_ms
    array([0. , 2.5])
    """
    if not workload.has_hash_ids:
        raise ValueError("this workload has no hash ids; write it with to_csv instead")
    arrival = workload.arrival_ms
    whole = bool(np.all(arrival == np.round(arrival)))
    ts: list[Any] = (
        np.round(arrival).astype(np.int64).tolist() if whole or not exact else arrival.tolist()
    )
    ids = workload.hash_id_lists()
    opt = orjson.OPT_APPEND_NEWLINE
    chunks = [
        orjson.dumps(
            {"timestamp": t, "input_length": i, "output_length": o, "hash_ids": h}, option=opt
        )
        for t, i, o, h in zip(
            ts, workload.input_len.tolist(), workload.output_len.tolist(), ids, strict=True
        )
    ]
    if "session_id" in workload.extra:  # conversations survive the round trip
        sessions = workload.extra["session_id"].tolist()
        if not exact:
            sessions = [v if isinstance(v, str) else str(v) for v in sessions]
        tail = [b',"session_id":' + orjson.dumps(sid) for sid in sessions]
        if "turn" in workload.extra:
            tail = [t + b',"turn":' + orjson.dumps(u)
                    for t, u in zip(tail, workload.extra["turn"].tolist(), strict=True)]
        chunks = [c[:-2] + t + b"}\n" for c, t in zip(chunks, tail, strict=True)]
    write_bytes(path, b"".join(chunks))


def write_bytes(path: str | PathLike[str] | IO[Any], data: bytes) -> None:
    """Write a trace file's bytes to a path (gzip-compressed when it ends in
    ``.gz``) or to an open binary or text buffer.

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO(); write_bytes(buf, b'{"a":1}'); buf.getvalue()
    '{"a":1}'
    """
    if hasattr(path, "write"):
        try:
            path.write(data)  # type: ignore[union-attr]
        except TypeError:
            path.write(data.decode())  # type: ignore[union-attr]
        return
    target = fspath(path)
    if target.endswith(".gz"):
        import gzip

        data = gzip.compress(data, mtime=0)
    with open(target, "wb") as fh:
        fh.write(data)
