"""Tests of the ragged-array helpers in ``inferasim._ragged``.

Each helper is checked on small cases worked out by hand, then against a
plain-Python reference (one loop per row) on hypothesis-generated rows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import _ragged

# ---------------------------------------------------------------- references


def to_flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    flat = np.array([v for r in rows for v in r], dtype=np.int64)
    offsets = np.array([0] + list(np.cumsum([len(r) for r in rows])), dtype=np.int64)
    return flat, offsets


def ref_block_tokens(input_len: list[int], rows: list[list[int]], bs: int) -> list[int]:
    """Tokens per block: full blocks while tokens last, the last block takes the rest."""
    out = []
    for length, row in zip(input_len, rows, strict=True):
        n = len(row)
        for j in range(n):
            if j == n - 1:
                out.append(max(length - bs * (n - 1), 0))
            else:
                out.append(min(max(length - bs * j, 0), bs))
    return out


def ref_leading_run(mask: list[bool], rows: list[list[int]]) -> list[bool]:
    out, k = [], 0
    for row in rows:
        alive = True
        for _ in row:
            alive = alive and mask[k]
            out.append(alive)
            k += 1
    return out


def ref_first_seen_earlier(rows: list[list[int]]) -> list[bool]:
    seen: set[int] = set()
    out = []
    for row in rows:
        out += [v in seen for v in row]
        seen.update(row)
    return out


rows_strategy = st.lists(st.lists(st.integers(0, 12), max_size=7), max_size=15)

# ---------------------------------------------------------------- hand cases


def test_row_of_and_position_hand_case():
    # rows: [a, b], [], [c, d, e]  -> rows 0,0,2,2,2 ; positions 0,1,0,1,2
    offsets = np.array([0, 2, 2, 5])
    assert _ragged.row_of(offsets).tolist() == [0, 0, 2, 2, 2]
    assert _ragged.position_in_row(offsets).tolist() == [0, 1, 0, 1, 2]


def test_row_of_empty():
    assert _ragged.row_of(np.array([0])).tolist() == []
    assert _ragged.position_in_row(np.array([0, 0, 0])).tolist() == []


def test_block_tokens_consistent_rows():
    # 1100 tokens in 512-blocks: 512, 512, 1100 - 1024 = 76 ; 512 tokens: one full block.
    got = _ragged.block_tokens(np.array([1100, 512]), np.array([0, 3, 4]), 512)
    assert got.tolist() == [512, 512, 76, 512]


def test_block_tokens_last_block_takes_the_rest_when_ids_too_few():
    # 1100 tokens but only 2 ids: first block 512, last holds 1100 - 512 = 588 (> block_size).
    got = _ragged.block_tokens(np.array([1100]), np.array([0, 2]), 512)
    assert got.tolist() == [512, 588]


def test_block_tokens_never_negative_when_ids_too_many():
    # 600 tokens, 4 ids of 512: 512, 88, then 0 and 0 (never negative), sum still 600.
    got = _ragged.block_tokens(np.array([600]), np.array([0, 4]), 512)
    assert got.tolist() == [512, 88, 0, 0]
    assert got.sum() == 600


def test_block_tokens_skips_rows_without_blocks():
    got = _ragged.block_tokens(np.array([5, 0, 7]), np.array([0, 1, 1, 2]), 4)
    # row 0: one block with 5 tokens (> 4: too few ids); row 1 none; row 2: one block, 7 tokens
    assert got.tolist() == [5, 7]


def test_leading_run_hand_case():
    mask = np.array([True, False, True, True, True, False, True])
    offsets = np.array([0, 3, 5, 5, 7])
    # row 0: T F T -> T F F ; row 1: T T ; row 2 empty ; row 3: F T -> F F
    assert _ragged.leading_run(mask, offsets).tolist() == [True, False, False, True, True, False, False]


def test_first_seen_earlier_ignores_repeats_in_same_row():
    # row 0 = [7, 8, 7]: the second 7 repeats inside the row -> not "earlier";
    # row 1 = [9, 7, 8]: 9 new, 7 and 8 seen in row 0.
    flat = np.array([7, 8, 7, 9, 7, 8])
    got = _ragged.first_seen_earlier(flat, np.array([0, 3, 6]))
    assert got.tolist() == [False, False, False, False, True, True]


def test_first_seen_earlier_empty():
    assert _ragged.first_seen_earlier(np.zeros(0, np.int64), np.array([0, 0])).tolist() == []


# ------------------------------------------------------------ property tests


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy)
def test_row_of_and_position_match_reference(rows):
    _, offsets = to_flat(rows)
    assert _ragged.row_of(offsets).tolist() == [r for r, row in enumerate(rows) for _ in row]
    assert _ragged.position_in_row(offsets).tolist() == [j for row in rows for j in range(len(row))]


@settings(max_examples=80, deadline=None)
@given(
    rows=rows_strategy,
    bs=st.sampled_from([1, 2, 3, 16]),
    data=st.data(),
)
def test_block_tokens_match_reference(rows, bs, data):
    lengths = data.draw(st.lists(st.integers(0, 10 * bs), min_size=len(rows), max_size=len(rows)))
    _, offsets = to_flat(rows)
    got = _ragged.block_tokens(np.array(lengths, dtype=np.int64), offsets, bs)
    assert got.tolist() == ref_block_tokens(lengths, rows, bs)
    # every row with at least one block covers exactly its input_len
    rows_idx = _ragged.row_of(offsets)
    sums = np.bincount(rows_idx, weights=got, minlength=len(rows))
    for r, row in enumerate(rows):
        if row:
            assert sums[r] == lengths[r]


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy, data=st.data())
def test_leading_run_matches_reference(rows, data):
    flat, offsets = to_flat(rows)
    mask = data.draw(st.lists(st.booleans(), min_size=flat.size, max_size=flat.size))
    got = _ragged.leading_run(np.array(mask, dtype=bool), offsets)
    assert got.tolist() == ref_leading_run(mask, rows)


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy)
def test_first_seen_earlier_matches_reference(rows):
    flat, offsets = to_flat(rows)
    assert _ragged.first_seen_earlier(flat, offsets).tolist() == ref_first_seen_earlier(rows)
