"""Structural checks of a parsed JSON source that orjson does not make.

orjson resolves a key given twice in one object silently (the last value
wins), and the JSON-lines fast path parses the whole file as one array, so
two lines that are invalid on their own (``{"a": 1}, {"b": [1`` then
``2]}``) could be joined into valid records. Both are checked here on the
bytes, vectorised over the few structural positions (brackets, colons and
newlines outside strings), after a successful parse:

* :func:`lines_are_whole` -- every newline lies outside any object or array,
  so each line holds whole records;
* :func:`check_duplicate_keys` -- the colons of each record (one per key,
  nested objects included) match the keys its parsed dict kept; a record
  with more colons is parsed again keeping every key, which names the key
  given twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferasim.errors import WorkloadError

__all__ = ["Structure", "structure", "lines_are_whole", "check_duplicate_keys"]

_OPEN = np.frombuffer(b"{[", dtype=np.uint8)
_CLOSE = np.frombuffer(b"}]", dtype=np.uint8)
_TABLE = np.zeros(256, dtype=bool)
_TABLE[np.frombuffer(b'{}[]:\n"', dtype=np.uint8)] = True


@dataclass
class Structure:
    """The structural bytes of a JSON text (from :func:`structure`)."""

    pos: np.ndarray  # positions of brackets, colons and newlines outside strings
    char: np.ndarray  # the byte at each
    depth: np.ndarray  # nesting depth after each (brackets) or at it (colons, newlines)
    newline_in_string: bool = False  # a raw newline inside a string (of the text as given)


def structure(data: bytes) -> Structure:
    """The structural bytes of valid JSON text ``data`` with their depths.

    Examples
    --------
    >>> s = structure(b'{"a:": [1]}')
    >>> bytes(s.char), s.depth.tolist()
    (b'{:[]}', [1, 1, 2, 1, 0])
    """
    b = np.frombuffer(data, dtype=np.uint8)
    pos = np.flatnonzero(_TABLE[b])  # (one pass over the bytes)
    is_quote = b[pos] == ord('"')
    quotes, pos = pos[is_quote], pos[~is_quote]
    if quotes.size:
        # a quote after an odd run of backslashes is escaped (inside a string)
        cand = quotes[(quotes > 0) & (b[np.maximum(quotes - 1, 0)] == ord("\\"))]
        escaped = []
        for q in cand.tolist():
            k = q - 1
            while k >= 0 and b[k] == ord("\\"):
                k -= 1
            if (q - 1 - k) % 2:
                escaped.append(q)
        if escaped:
            quotes = np.setdiff1d(quotes, np.asarray(escaped, dtype=np.int64))
    inside = (np.searchsorted(quotes, pos, side="right") % 2) == 1
    split = bool(np.any(b[pos[inside]] == ord("\n")))
    pos = pos[~inside]
    char = b[pos]
    delta = np.isin(char, _OPEN).astype(np.int64) - np.isin(char, _CLOSE).astype(np.int64)
    return Structure(pos, char, np.cumsum(delta), split)


def lines_are_whole(s: Structure) -> bool:
    """True when every newline of a JSON text (its :func:`structure`) lies
    outside any string, object or array (each line holds whole values).

    The text is the file as given; its lines joined without the newlines
    parsed as valid JSON.

    Examples
    --------
    >>> lines_are_whole(structure(b'{"a": 1}\\n{"b": [1, 2]}'))
    True
    >>> lines_are_whole(structure(b'{"a": 1}, {"b": [1\\n2]}'))
    False
    >>> lines_are_whole(structure(b'{"\\na": 1}'))  # (joined: the key "a")
    False
    """
    if s.newline_in_string:
        return False
    return not bool(np.any(s.depth[s.char == ord("\n")] != 0))


def check_duplicate_keys(
    data: bytes, records: list[dict[str, Any]], lines: np.ndarray, unit: str, source: str,
    s: Structure | None = None,
) -> None:
    """Raise a WorkloadError naming the line (or record) and key of a key given
    twice in one object of ``data``, parsed into ``records``.

    ``data`` holds one object per line (``unit="line"``) or a JSON array of
    objects (``unit="record"``); ``s`` is its :func:`structure` when known.

    Examples
    --------
    >>> data = b'{"a": 1}\\n{"a": 1, "b": 2, "a": 3}\\n'
    >>> check_duplicate_keys(data, [{"a": 1}, {"a": 3, "b": 2}], np.array([1, 2]), "line", "t")
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: t, line 2, field 'a': the key 'a' is given twice in one object (JSON readers would keep only one of them)
    """
    if not records:
        return
    s = structure(data) if s is None else s
    level = 1 if unit == "line" else 2
    opens = s.pos[(s.char == ord("{")) & (s.depth == level)]
    closes = s.pos[(s.char == ord("}")) & (s.depth == level - 1)]
    if opens.size != len(records) or closes.size != len(records):
        return  # (not one object per record: the loaders' own checks report it)
    colons = s.pos[(s.char == ord(":")) & (s.depth >= level)]
    owner = np.searchsorted(opens, colons, side="right") - 1
    counts = np.bincount(owner[owner >= 0], minlength=len(records))
    kept = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
    for i in np.flatnonzero(counts > kept).tolist():
        key = _repeated_key(data[int(opens[i]) : int(closes[i]) + 1])
        if key is not None:
            raise WorkloadError(
                f"the key {key!r} is given twice in one object (JSON readers would keep "
                "only one of them)",
                source=source, line=int(lines[i]), field=key, unit=unit,
            )


def _repeated_key(text: bytes) -> str | None:
    """The first key given twice in one object of ``text`` (any depth), or None."""
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for k, _ in items:
            if k in seen and not found:
                found.append(k)
            seen.add(k)
        return dict(items)

    try:
        json.loads(text, object_pairs_hook=pairs)
    except ValueError:
        return None
    return found[0] if found else None
