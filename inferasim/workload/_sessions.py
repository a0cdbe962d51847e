"""Session columns of workload sources: ``session_id`` and ``turn``.

A source may say which requests form one conversation: a ``session_id``
column (aliases below, case-insensitive) and optionally a 1-based ``turn``.
With ``session_id`` alone, turns are numbered by arrival within each
session (ties by source order). With both, turn numbers must be distinct
within a session and follow arrival order. A ``turn`` without
``session_id`` is an error, as is a missing value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inferasim.errors import WorkloadError
from inferasim.workload._parse import excerpt

__all__ = ["SESSION_ALIASES", "canonical_session_key", "session_columns", "explicit_parents"]

SESSION_ALIASES: dict[str, tuple[str, ...]] = {
    # (not "session": a plain extra column of that name keeps its meaning)
    "session_id": ("session_id", "conversation_id", "conversation", "chat_id"),
    "turn": ("turn", "turn_id", "turn_index", "round"),
}
_ALIAS = {alias: canon for canon, aliases in SESSION_ALIASES.items() for alias in aliases}


def canonical_session_key(name: object) -> str | None:
    """``"session_id"`` or ``"turn"`` when ``name`` is one of their aliases, else None.

    Examples
    --------
    >>> canonical_session_key("Conversation_ID"), canonical_session_key("isl")
    ('session_id', None)
    """
    return _ALIAS.get(str(name).strip().lower())


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and not v.strip())


def session_columns(
    session: list[Any] | None,
    turn: list[Any] | None,
    arrival: np.ndarray,
    lines: np.ndarray,
    source: str,
    unit: str = "line",
) -> dict[str, np.ndarray]:
    """Validated ``session_id`` and ``turn`` columns (empty dict when the source has neither).

    Parameters
    ----------
    session, turn : list or None
        The raw values (source order), or None when the column is absent.
    arrival : numpy.ndarray
        Arrival times (source order).
    lines : numpy.ndarray
        Source line (or record) of each request, for messages.
    source : str
        The file, for messages.
    unit : str, default "line"
        ``"line"`` or ``"record"``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``session_id`` (int64 when every value is a whole number, else the
        values as strings) and ``turn`` (int64, 1-based).

    Raises
    ------
    WorkloadError
        Naming the line and field of a missing value, a turn that is not a
        whole number >= 1, a repeated turn in a session, a turn arriving
        before a lower turn of its session, or a turn without session ids.

    Examples
    --------
    >>> cols = session_columns(["a", "b", "a"], None, np.array([0.0, 1, 2]), np.array([2, 3, 4]), "f")
    >>> cols["session_id"].tolist(), cols["turn"].tolist()
    (['a', 'b', 'a'], [1, 1, 2])
    """
    if session is None:
        if turn is not None:
            raise WorkloadError(
                "a turn column needs a session_id column (accepted: "
                + ", ".join(SESSION_ALIASES["session_id"]) + ")",
                source=source, field="turn",
            )
        return {}
    for i, v in enumerate(session):
        if _missing(v) or isinstance(v, list | dict | bool):
            raise WorkloadError(
                f"must be a session id (a number or a string), got {excerpt(v)}",
                source=source, line=int(lines[i]), field="session_id", unit=unit,
            )
    ints = all(
        (isinstance(v, int | np.integer) and not isinstance(v, bool))
        or (isinstance(v, float | np.floating) and float(v).is_integer())
        for v in session
    )
    if ints:
        for i, v in enumerate(session):
            if not -(2**63) <= int(v) < 2**63:
                raise WorkloadError(
                    f"session id {excerpt(v)} is outside the 64-bit integer range",
                    source=source, line=int(lines[i]), field="session_id", unit=unit,
                )
    sid = np.asarray([int(v) for v in session], dtype=np.int64) if ints else np.asarray(
        [str(v) for v in session], dtype=object
    )
    n = len(session)
    _, code = np.unique(sid.astype(str) if not ints else sid, return_inverse=True)
    code = code.ravel()
    order = np.lexsort((np.arange(n), arrival, code))  # by session, then arrival, then source
    if turn is None:
        rank = np.empty(n, dtype=np.int64)
        starts = np.r_[True, code[order][1:] != code[order][:-1]]
        group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
        rank[order] = np.arange(n) - group_start + 1
        return {"session_id": sid, "turn": rank}
    values = np.empty(n, dtype=np.int64)
    for i, v in enumerate(turn):
        ok = (isinstance(v, int | np.integer) and not isinstance(v, bool)) or (
            isinstance(v, float | np.floating) and np.isfinite(v) and float(v).is_integer()
        )
        if not ok or int(v) < 1 or int(v) >= 2**62:
            raise WorkloadError(
                f"must be a whole number >= 1, got {excerpt(v)}",
                source=source, line=int(lines[i]), field="turn", unit=unit,
            )
        values[i] = int(v)
    by_turn = np.lexsort((values, code))
    same = code[by_turn][1:] == code[by_turn][:-1]
    dup = np.flatnonzero(same & (values[by_turn][1:] == values[by_turn][:-1]))
    if dup.size:
        a, b = by_turn[dup[0]], by_turn[dup[0] + 1]
        raise WorkloadError(
            f"turn {values[b]} of session {excerpt(sid[b].item() if isinstance(sid[b], np.generic) else sid[b])} repeats {unit} {int(lines[a])}",
            source=source, line=int(lines[b]), field="turn", unit=unit,
        )
    late = np.flatnonzero(same & (arrival[by_turn][1:] < arrival[by_turn][:-1]))
    if late.size:
        a, b = by_turn[late[0]], by_turn[late[0] + 1]
        raise WorkloadError(
            f"turn {values[b]} of session {excerpt(sid[b].item() if isinstance(sid[b], np.generic) else sid[b])} arrives before its turn "
            f"{values[a]} ({unit} {int(lines[a])})",
            source=source, line=int(lines[b]), field="turn", unit=unit,
        )
    return {"session_id": sid, "turn": values}


def explicit_parents(frame: Any) -> np.ndarray | None:
    """Row of each request's parent from ``chat_id`` / ``parent_chat_id`` columns, else None.

    The explicit session tree of a Bailian trace
    (:mod:`inferasim.workload.bailian`): ``-1`` for a root and for a request
    whose ``parent_chat_id`` is not among the rows.

    Parameters
    ----------
    frame : pandas.DataFrame
        A workload's request table.

    Raises
    ------
    ValueError
        When a ``chat_id`` repeats.

    Examples
    --------
    >>> import pandas as pd
    >>> explicit_parents(pd.DataFrame({"chat_id": [4, 9, 5], "parent_chat_id": [-1, 4, 4]})).tolist()
    [-1, 0, 0]
    >>> explicit_parents(pd.DataFrame({"session_id": [1]})) is None
    True
    """
    if "chat_id" not in frame.columns or "parent_chat_id" not in frame.columns:
        return None
    chat = frame["chat_id"].to_numpy().astype(np.int64)
    want = frame["parent_chat_id"].to_numpy().astype(np.int64)
    order = np.argsort(chat, kind="stable")
    ranked = chat[order]
    if ranked.size and np.any(ranked[1:] == ranked[:-1]):
        v = int(ranked[1:][ranked[1:] == ranked[:-1]][0])
        raise ValueError(f"chat_id {v} appears twice; the parent_chat_id links are ambiguous")
    pos = np.minimum(np.searchsorted(ranked, want), max(chat.size - 1, 0))
    found = (want >= 0) & (ranked[pos] == want) if chat.size else np.zeros(0, bool)
    return np.where(found, order[pos], -1).astype(np.int64)
