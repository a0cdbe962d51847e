"""Alibaba Bailian (Qwen) traces: JSON lines with session trees and request types.

The format of alibaba-edu/qwen-bailian-usagetraces-anon (Apache-2.0; Wang
et al., "KVCache Cache in the Wild", USENIX ATC'25), one object a line:

==================  =====================================================
``chat_id``         integer id of the request
``parent_chat_id``  the request this one continues, ``-1`` for a root
``timestamp``       arrival in **seconds** from the trace start (float)
``input_length``    prompt tokens
``output_length``   generated tokens
``type``            request type: ``text``, ``search``, ``image``, ``file``
``turn``            1-based turn number in its conversation
``hash_ids``        salted SipHash of each **16-token** block, remapped to
                    integers (each id names its block and everything before)
==================  =====================================================

Sessions are the explicit ``parent_chat_id`` links, a tree (two requests
may continue the same one), never an inferred chain: the workload gets
``chat_id``, ``parent_chat_id``, ``session_id`` (the ``chat_id`` of the
tree's root), ``turn`` (as in the file) and ``type`` columns, and the
closed loop (:func:`inferasim.sim.closed_loop.session_links`) and
:func:`inferasim.reuse.sessions` follow the links. A request whose parent
is not in the file (a slice of a longer trace) is kept as the root of its
own session, with a warning counting them; it keeps its ``parent_chat_id``.
"""

from __future__ import annotations

import warnings
from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from inferasim.errors import WorkloadError
from inferasim.workload._columns import Columns
from inferasim.workload._parse import (
    arrival_column,
    excerpt,
    length_column,
    parse_json_records,
    read_bytes,
)
from inferasim.workload.mooncake import _hash_id_arrays, write_bytes

__all__ = ["read_bailian", "write_bailian", "FIELDS"]

#: The fields of a Bailian record, in the published order.
FIELDS = (
    "chat_id", "parent_chat_id", "timestamp", "input_length", "output_length", "type", "turn",
    "hash_ids",
)


def _int_column(values: list[Any], field: str, lines: np.ndarray, source: str, low: int) -> np.ndarray:
    for i, v in enumerate(values):
        if type(v) is not int or not low <= v < 2**63:
            raise WorkloadError(
                f"must be an integer >= {low}, got {excerpt(v)}",
                source=source, line=int(lines[i]), field=field,
            )
    return np.asarray(values, dtype=np.int64)


def _parents(
    chat: np.ndarray, parent_chat: np.ndarray, arrival: np.ndarray, lines: np.ndarray, source: str
) -> tuple[np.ndarray, int]:
    """Row of each request's parent (-1 for a root or a parent not in the file), and how many
    named a parent that is absent."""
    order = np.argsort(chat, kind="stable")
    sorted_chat = chat[order]
    dup = np.flatnonzero(sorted_chat[1:] == sorted_chat[:-1])
    if dup.size:
        a, b = sorted(order[dup[0] : dup[0] + 2])
        raise WorkloadError(
            f"chat_id {int(chat[b])} repeats line {int(lines[a])}",
            source=source, line=int(lines[b]), field="chat_id",
        )
    linked = parent_chat >= 0
    pos = np.searchsorted(sorted_chat, parent_chat)
    found = linked & (pos < chat.size) & (sorted_chat[np.minimum(pos, chat.size - 1)] == parent_chat)
    parent = np.where(found, order[np.minimum(pos, chat.size - 1)], -1)
    self_ref = np.flatnonzero(found & (parent == np.arange(chat.size)))
    if self_ref.size:
        j = int(self_ref[0])
        raise WorkloadError("a request cannot be its own parent", source=source, line=int(lines[j]),
                            field="parent_chat_id")
    late = np.flatnonzero(found & (arrival < arrival[np.maximum(parent, 0)]))
    if late.size:
        j = int(late[0])
        raise WorkloadError(
            f"arrives before its parent, chat_id {int(parent_chat[j])} (line "
            f"{int(lines[parent[j]])})",
            source=source, line=int(lines[j]), field="timestamp",
        )
    return parent, int((linked & ~found).sum())


def _roots(parent: np.ndarray, lines: np.ndarray, source: str) -> np.ndarray:
    """Row of each request's tree root, following parents (a cycle is an error)."""
    root = np.arange(parent.size)
    up = parent.copy()
    for _ in range(parent.size + 1):
        active = up >= 0
        if not active.any():
            return root
        root[active] = up[active]
        up[active] = parent[up[active]]
    j = int(np.flatnonzero(up >= 0)[0])
    raise WorkloadError("parent_chat_id links form a cycle", source=source, line=int(lines[j]),
                        field="parent_chat_id")


def read_bailian(
    path_or_name: str | PathLike[str] | IO[Any], *, block_size: int = 16, verify: bool = True
) -> Columns:
    """Read a Bailian trace into :class:`~inferasim.workload._columns.Columns`.

    :meth:`Workload.from_bailian <inferasim.Workload.from_bailian>` builds
    the workload from them.

    Parameters
    ----------
    path_or_name : str, path or file-like
        A JSON-lines file in the format of the module docstring (optionally
        gzip-compressed), an open file or buffer, or the name of a known
        Bailian trace (``"bailian_traceA"``, ``"bailian_traceB"``,
        ``"bailian_coder"``, ``"bailian_thinking"``), found or fetched by
        :func:`inferasim.workload.traces.find_trace`.
    block_size : int, default 16
        Tokens per hash id (16 in the published traces).
    verify : bool, default True
        For a trace name: check the file found against its pinned sha256.

    Returns
    -------
    Columns
        In file order; ``arrival_ms`` is ``timestamp * 1000`` shifted so the
        earliest request arrives at 0. Extra columns ``chat_id``,
        ``parent_chat_id``, ``session_id`` (root ``chat_id``), ``turn``,
        ``type`` and ``line``.

    Raises
    ------
    WorkloadError
        A missing field, a bad value, a repeated ``chat_id``, a request
        arriving before its parent or a cycle of links; the message names
        the file, the line and the field.

    Warns
    -----
    UserWarning
        When some requests name a parent that is not in the file.

    Examples
    --------
    >>> import io
    >>> text = ('{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 20, '
    ...         '"output_length": 4, "type": "text", "turn": 1, "hash_ids": [7, 8]}\\n'
    ...         '{"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.0, "input_length": 40, '
    ...         '"output_length": 2, "type": "search", "turn": 2, "hash_ids": [7, 8, 9]}\\n')
    >>> cols = read_bailian(io.StringIO(text))
    >>> cols.arrival_ms, cols.extra["session_id"], cols.extra["type"].tolist()
    (array([   0., 1500.]), array([1, 1]), ['text', 'search'])
    """
    from inferasim.workload.traces import resolve_source

    path_or_name = resolve_source(path_or_name, "bailian", verify=verify)
    data, source = read_bytes(path_or_name)
    records, lines, unit = parse_json_records(data, source)
    cols: dict[str, list[Any]] = {}
    for field in FIELDS:
        try:
            cols[field] = [r[field] for r in records]
        except KeyError:
            i = next(i for i, r in enumerate(records) if field not in r)
            raise WorkloadError(
                f"missing required field (a Bailian record has {', '.join(FIELDS)})",
                source=source, line=int(lines[i]), field=field, unit=unit,
            ) from None
    seconds = arrival_column(cols["timestamp"], "timestamp", lines, source, unit)
    arrival = seconds * 1000.0
    input_len = length_column(cols["input_length"], "input_length", lines, source, unit)
    output_len = length_column(cols["output_length"], "output_length", lines, source, unit)
    chat = _int_column(cols["chat_id"], "chat_id", lines, source, 0)
    parent_chat = _int_column(cols["parent_chat_id"], "parent_chat_id", lines, source, -1)
    turn = _int_column(cols["turn"], "turn", lines, source, 1)
    for i, t in enumerate(cols["type"]):
        if not isinstance(t, str) or not t:
            raise WorkloadError(f"must be a non-empty string, got {excerpt(t)}",
                                source=source, line=int(lines[i]), field="type", unit=unit)
    ids, offsets = _hash_id_arrays(cols["hash_ids"], lines, source, unit)
    parent, absent = _parents(chat, parent_chat, arrival, lines, source)
    if absent:
        warnings.warn(
            f"{source}: {absent} request(s) name a parent_chat_id that is not in the file; "
            "each is kept as the root of its own session",
            UserWarning,
            stacklevel=3,
        )
    root = _roots(parent, lines, source)
    extra = {
        "chat_id": chat,
        "parent_chat_id": parent_chat,
        "session_id": chat[root],
        "turn": turn,
        "type": np.asarray(cols["type"], dtype=object),
        "line": lines,
    }
    label = Path(source).name if not hasattr(path_or_name, "read") else source
    return Columns(arrival, input_len, output_len, ids, offsets, extra, block_size=block_size,
                   source=label, where=source)


def write_bailian(workload: Columns, path: str | PathLike[str] | IO[Any]) -> None:
    """Write a workload in the Bailian format that :func:`read_bailian` reads back.

    Needs hash ids and the ``chat_id``, ``parent_chat_id``, ``turn`` and
    ``type`` columns (a workload read by :func:`read_bailian` has them).
    Timestamps are written in seconds (``arrival_ms / 1000`` as the shortest
    round-trip float), so the round trip keeps sessions, turns and types
    exactly and arrivals to float rounding of the division.

    Parameters
    ----------
    workload : Columns
        A workload's columns (``Workload.to_bailian`` passes them).
    path : str, path or writable file-like

    Examples
    --------
    >>> import io
    >>> cols = Columns(np.array([0.0, 1500.0]), np.array([20, 40]), np.array([4, 2]),
    ...                np.array([7, 8, 7, 8, 9]), np.array([0, 2, 5]),
    ...                {"chat_id": np.array([1, 2]), "parent_chat_id": np.array([-1, 1]),
    ...                 "turn": np.array([1, 2]), "type": np.array(["text", "search"])})
    >>> buf = io.StringIO()
    >>> write_bailian(cols, buf)
    >>> print(buf.getvalue().splitlines()[1])
    {"chat_id":2,"parent_chat_id":1,"timestamp":1.5,"input_length":40,"output_length":2,"type":"search","turn":2,"hash_ids":[7,8,9]}
    """
    if not workload.has_hash_ids:
        raise ValueError("this workload has no hash ids; the Bailian format needs them")
    missing = [c for c in ("chat_id", "parent_chat_id", "turn", "type") if c not in workload.extra]
    if missing:
        raise ValueError(f"the Bailian format needs the columns {missing}; this workload lacks them")
    ex = workload.extra
    rows = zip(
        ex["chat_id"].tolist(), ex["parent_chat_id"].tolist(), (workload.arrival_ms / 1000.0).tolist(),
        workload.input_len.tolist(), workload.output_len.tolist(), [str(t) for t in ex["type"]],
        ex["turn"].tolist(), workload.hash_id_lists(), strict=True,
    )
    opt = orjson.OPT_APPEND_NEWLINE
    write_bytes(path, b"".join(
        orjson.dumps(dict(zip(FIELDS, row, strict=True)), option=opt) for row in rows
    ))
