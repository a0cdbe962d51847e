"""Vectorised helpers for ragged arrays stored as (flat values, row offsets).

A workload keeps every request's block hash ids in one flat ``int64`` array
and an ``offsets`` array of length ``n + 1``: request ``i`` owns
``flat[offsets[i]:offsets[i + 1]]``. These helpers work on that layout
without Python loops per request.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "row_of",
    "position_in_row",
    "block_tokens",
    "leading_run",
    "first_seen_earlier",
]


def row_of(offsets: np.ndarray) -> np.ndarray:
    """Row index of every flat element.

    Examples
    --------
    >>> row_of(np.array([0, 2, 2, 5]))
    array([0, 0, 2, 2, 2])
    """
    lengths = np.diff(offsets)
    return np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)


def position_in_row(offsets: np.ndarray) -> np.ndarray:
    """0-based position of every flat element inside its row.

    Examples
    --------
    >>> position_in_row(np.array([0, 2, 2, 5]))
    array([0, 1, 0, 1, 2])
    """
    total = int(offsets[-1])
    lengths = np.diff(offsets)
    starts = np.repeat(offsets[:-1], lengths)
    return np.arange(total, dtype=np.int64) - starts


def block_tokens(input_len: np.ndarray, offsets: np.ndarray, block_size: int) -> np.ndarray:
    """Tokens covered by every block of every request.

    Every block but the last holds ``min(block_size, tokens left)`` tokens
    (never negative); the last block of a request with ``n`` blocks holds the
    rest, ``input_len - block_size * (n - 1)`` (at least 0). So a request's
    block tokens always add up to its ``input_len`` when it has any block,
    even on trace lines whose id count disagrees with their length.

    Examples
    --------
    >>> block_tokens(np.array([1100, 512]), np.array([0, 3, 4]), 512)
    array([512, 512,  76, 512])
    """
    lengths = np.diff(offsets)
    pos = position_in_row(offsets)
    left = np.repeat(np.asarray(input_len, dtype=np.int64), lengths) - pos * block_size
    tokens = np.clip(left, 0, block_size)
    is_last = pos == np.repeat(lengths - 1, lengths)
    tokens[is_last] = np.maximum(left[is_last], 0)
    return tokens


def leading_run(mask: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Keep ``mask`` only on each row's leading run of True values.

    Element ``k`` of row ``r`` stays True only when every element of row
    ``r`` before it (and itself) is True: the prefix-cache rule that a block
    can only be reused when its predecessor was.

    Examples
    --------
    >>> leading_run(np.array([True, False, True, True, True]), np.array([0, 3, 5]))
    array([ True, False, False,  True,  True])
    """
    misses = np.cumsum(~mask, dtype=np.int64)
    lengths = np.diff(offsets)
    before_row = np.concatenate(([0], misses))[offsets[:-1]]
    return (misses - np.repeat(before_row, lengths)) == 0


def first_seen_earlier(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """True where an id already appeared in an *earlier* row.

    Repeats inside the same row do not count: a request looks its blocks up
    before it inserts them.

    Examples
    --------
    >>> first_seen_earlier(np.array([7, 8, 7, 9, 7]), np.array([0, 2, 5]))
    array([False, False,  True, False,  True])
    """
    if flat.size == 0:
        return np.zeros(0, dtype=bool)
    _, first_pos, inverse = np.unique(flat, return_index=True, return_inverse=True)
    rows = row_of(offsets)
    first_row = rows[first_pos][inverse]
    return first_row < rows
