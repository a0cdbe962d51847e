"""Tests of the core :class:`Workload` table.

Builders, accessors, block semantics, ``describe()`` (checked by hand and
against a brute-force set replay), selections, time transforms, combination,
equality and display.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload, WorkloadError

# -------------------------------------------------------------- references


def ref_block_tokens(length: int, n: int, bs: int) -> list[int]:
    """Tokens per block of one request (last block takes the rest, never negative)."""
    out = []
    for j in range(n):
        if j == n - 1:
            out.append(max(length - bs * (n - 1), 0))
        else:
            out.append(min(max(length - bs * j, 0), bs))
    return out


def replay(wl: Workload) -> tuple[float, float]:
    """Infinite-cache hit ratios (blocks, tokens) by a plain set replay in arrival order.

    A request looks up its ids before inserting them; a block hits only when
    every block before it in the request hit too (prefix matching).
    """
    seen: set[int] = set()
    hit_blocks = total_blocks = hit_tokens = 0
    total_tokens = int(sum(int(x) for x in wl.input_len))
    for i in range(len(wl)):
        ids = [int(x) for x in wl.block_ids(i)]
        tokens = ref_block_tokens(int(wl.input_len[i]), len(ids), wl.block_size)
        total_blocks += len(ids)
        for h, t in zip(ids, tokens, strict=True):
            if h not in seen:
                break
            hit_blocks += 1
            hit_tokens += t
        seen.update(ids)
    return (
        hit_blocks / total_blocks if total_blocks else 0.0,
        hit_tokens / total_tokens if total_tokens else 0.0,
    )


@st.composite
def workloads(draw, consistent: bool | None = None, max_requests: int = 25):
    """Small random workloads with heavily shared ids (ids drawn from 0..9)."""
    bs = draw(st.sampled_from([1, 2, 4, 16]))
    n = draw(st.integers(0, max_requests))
    arrivals, inputs, outputs, ids = [], [], [], []
    for _ in range(n):
        arrivals.append(draw(st.floats(0, 1e6, allow_nan=False, allow_infinity=False)))
        outputs.append(draw(st.integers(0, 5000)))
        k = draw(st.integers(0, 6))
        row = draw(st.lists(st.integers(0, 9), min_size=k, max_size=k))
        ok = consistent if consistent is not None else draw(st.booleans())
        if ok:
            length = 0 if k == 0 else draw(st.integers(bs * (k - 1) + 1, bs * k))
        else:
            length = draw(st.integers(0, bs * 8))
        inputs.append(length)
        ids.append(row)
    return Workload.from_requests(arrivals, inputs, outputs, ids, block_size=bs)


def six_requests() -> Workload:
    """The hand-worked example of test_describe_hand_example (block_size 4)."""
    return Workload.from_requests(
        arrival_ms=[0, 1000, 2000, 3000, 4000, 4000],
        input_len=[8, 10, 6, 7, 13, 5],
        output_len=[2, 4, 6, 8, 10, 1],
        hash_ids=[[1, 2], [1, 2, 3], [1, 4], [5, 2], [1, 2, 3, 5], [1]],
        block_size=4,
    )


# ------------------------------------------------------------------ builders


def test_from_requests_sorts_stably_and_moves_ids_with_rows():
    wl = Workload.from_requests(
        [5, 0, 5, 1], [10, 20, 30, 40], [1, 2, 3, 4], [[1], [2], [3], [4]], block_size=16,
        session=["a", "b", "c", "d"],
    )
    # arrival order 0 (row 1), 1 (row 3), then the tie at 5 keeps input order rows 0, 2
    assert wl.arrival_ms.tolist() == [0, 1, 5, 5]
    assert wl.input_len.tolist() == [20, 40, 10, 30]
    assert wl.output_len.tolist() == [2, 4, 1, 3]
    assert wl.frame["session"].tolist() == ["b", "d", "a", "c"]
    assert [wl.block_ids(i).tolist() for i in range(4)] == [[2], [4], [1], [3]]
    assert wl.frame.index.name == "request_id"
    assert wl.frame.index.tolist() == [0, 1, 2, 3]


def test_from_requests_dtypes():
    wl = Workload.from_requests([0, 1], [10, 20], [1, 2], [[1], [2, 3]])
    assert wl.frame["arrival_ms"].dtype == np.float64
    assert wl.frame["input_len"].dtype == np.int64
    assert wl.frame["output_len"].dtype == np.int64
    assert wl.hash_ids.dtype == np.int64 and wl.offsets.dtype == np.int64
    assert wl.block_size == 512 and wl.has_hash_ids


def test_from_requests_without_hash_ids():
    wl = Workload.from_requests([0, 1], [10, 20], [1, 2])
    assert not wl.has_hash_ids
    assert wl.hash_ids.size == 0
    assert wl.offsets.tolist() == [0, 0, 0]
    assert wl.num_blocks.tolist() == [0, 0]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(arrival_ms=[0, 1], input_len=[1], output_len=[1, 1]),
        dict(arrival_ms=[0, 1], input_len=[1, 1], output_len=[1, 1], hash_ids=[[1]]),
        dict(arrival_ms=[0, 1], input_len=[1, 1], output_len=[1, 1], session=["a"]),
        dict(arrival_ms=[0], input_len=[1], output_len=[1], block_size=0),
    ],
)
def test_from_requests_shape_errors(kwargs):
    with pytest.raises(WorkloadError):
        Workload.from_requests(**kwargs)


def test_constructor_checks_offsets():
    frame = pd.DataFrame({"arrival_ms": [0.0], "input_len": [1], "output_len": [1]})
    with pytest.raises(WorkloadError, match="offsets"):
        Workload(frame, np.array([1, 2]), np.array([0, 1]))
    with pytest.raises(WorkloadError, match="required columns"):
        Workload(frame.drop(columns="output_len"), np.array([1]), np.array([0, 1]))


def test_empty_workload():
    wl = Workload.from_requests([], [], [], [])
    assert len(wl) == 0
    d = wl.describe()
    assert d["requests"] == 0 and d["duration_ms"] == 0
    assert math.isnan(d["offered_rate_rps"])


# ----------------------------------------------------------------- accessors


def test_accessors_flat_layout():
    wl = Workload.from_requests([0, 1, 2], [4, 1, 6], [1, 1, 1], [[1, 2], [], [3, 4, 5]], block_size=2)
    assert wl.hash_ids.tolist() == [1, 2, 3, 4, 5]
    assert wl.offsets.tolist() == [0, 2, 2, 5]
    assert wl.num_blocks.tolist() == [2, 0, 3]
    assert wl.block_ids(0).tolist() == [1, 2]
    assert wl.block_ids(1).tolist() == []
    assert wl.block_ids(-1).tolist() == [3, 4, 5]
    with pytest.raises(IndexError):
        wl.block_ids(3)
    with pytest.raises(IndexError):
        wl.block_ids(-4)
    assert len(wl) == 3


def test_arrays_are_read_only():
    wl = Workload.from_requests([0, 1], [4, 4], [1, 1], [[1, 2], [3]], block_size=2)
    for arr in (wl.hash_ids, wl.offsets, wl.block_ids(0), wl.arrival_ms, wl.input_len, wl.output_len):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 99
    assert wl.hash_ids.tolist() == [1, 2, 3]


def test_block_tokens_hand_case():
    # block_size 512: 1100 tokens -> 512, 512, 76 ; 512 -> 512 ; 1 -> 1
    wl = Workload.from_requests([0, 1, 2], [1100, 512, 1], [1, 1, 1], [[1, 2, 3], [4], [5]])
    assert wl.block_tokens().tolist() == [512, 512, 76, 512, 1]


def test_block_tokens_on_inconsistent_rows():
    # 1100 tokens with 2 ids: 512, then the last block holds 1100 - 512 = 588 ;
    # 600 tokens with 3 ids: 512, the middle holds the remaining 88, the last
    # max(600 - 2 * 512, 0) = 0.
    wl = Workload.from_requests([0, 1], [1100, 600], [1, 1], [[1, 2], [3, 4, 5]])
    assert wl.block_tokens().tolist() == [512, 588, 512, 88, 0]
    assert wl.inconsistent_mask().tolist() == [True, True]


def test_inconsistent_mask():
    # ceil(1024/512)=2, ceil(1025/512)=3, ceil(0/512)=0
    wl = Workload.from_requests(
        [0, 1, 2, 3], [1024, 1025, 1025, 0], [1] * 4, [[1, 2], [1, 2], [1, 2, 3], []]
    )
    assert wl.inconsistent_mask().tolist() == [False, True, False, False]
    assert not Workload.from_requests([0], [5], [1]).inconsistent_mask().any()


# ------------------------------------------------------------------ describe


def test_describe_hand_example():
    d = six_requests().describe()
    # block_size 4; requests in order (ids, tokens per block, hits by replay):
    #  r0 [1,2]      tokens 4,4      nothing seen           -> 0 hits
    #  r1 [1,2,3]    tokens 4,4,2    1,2 seen, 3 new        -> 2 hits, 8 tokens
    #  r2 [1,4]      tokens 4,2      1 seen, 4 new          -> 1 hit, 4 tokens
    #  r3 [5,2]      tokens 4,3      5 new (2 is after a miss)-> 0 hits
    #  r4 [1,2,3,5]  tokens 4,4,4,1  all seen               -> 4 hits, 13 tokens
    #  r5 [1]        5 tokens, ceil(5/4)=2 ids expected: inconsistent; 1 seen -> 1 hit, 5 tokens
    # blocks 14, hits 8 ; tokens 49, hit tokens 25 + 5 = 30 ; unique ids {1..5}
    assert d["requests"] == 6
    assert d["duration_ms"] == 4000
    assert d["offered_rate_rps"] == pytest.approx(6 / 4.0)
    # inputs sorted 5,6,7,8,10,13: mean 49/6, median (7+8)/2, p99 at rank 4.95 -> 10 + .95*3
    assert d["input_mean"] == pytest.approx(49 / 6)
    assert d["input_p50"] == pytest.approx(7.5)
    assert d["input_p99"] == pytest.approx(12.85)
    assert d["input_max"] == 13
    # outputs sorted 1,2,4,6,8,10: mean 31/6, median 5, p99 8 + .95*2
    assert d["output_mean"] == pytest.approx(31 / 6)
    assert d["output_p50"] == pytest.approx(5)
    assert d["output_p99"] == pytest.approx(9.9)
    assert d["output_max"] == 10
    assert d["blocks_total"] == 14
    assert d["blocks_unique"] == 5
    assert d["inconsistent_blocks"] == 1
    assert d["infinite_block_hit_ratio"] == pytest.approx(8 / 14)
    assert d["infinite_token_hit_ratio"] == pytest.approx(30 / 49)
    assert replay(six_requests()) == pytest.approx((8 / 14, 30 / 49))


def test_describe_is_float_series_with_all_entries():
    d = six_requests().describe()
    assert isinstance(d, pd.Series) and d.dtype == np.float64
    expected = {
        "requests", "duration_ms", "offered_rate_rps",
        *(f"{w}_{s}" for w in ("input", "output") for s in ("mean", "p50", "p99", "max")),
        "blocks_total", "blocks_unique", "inconsistent_blocks",
        "infinite_block_hit_ratio", "infinite_token_hit_ratio",
    }
    assert set(d.index) == expected


def test_describe_repeat_inside_one_request_is_not_a_hit():
    # r0 [7, 7]: the second 7 is looked up before r0 inserts anything -> miss.
    # r1 [7, 8]: 7 hits, 8 misses. blocks 4, hits 1.
    wl = Workload.from_requests([0, 1], [8, 8], [1, 1], [[7, 7], [7, 8]], block_size=4)
    assert wl.describe()["infinite_block_hit_ratio"] == pytest.approx(1 / 4)
    assert replay(wl)[0] == pytest.approx(1 / 4)


def test_describe_without_hash_ids_gives_nan_block_stats():
    wl = Workload.from_requests([0, 500], [10, 30], [1, 3])
    d = wl.describe()
    assert not wl.has_hash_ids
    for key in ("blocks_total", "blocks_unique", "inconsistent_blocks",
                "infinite_block_hit_ratio", "infinite_token_hit_ratio"):
        assert math.isnan(d[key]), key
    assert d["requests"] == 2 and d["offered_rate_rps"] == pytest.approx(4.0)
    assert d["input_mean"] == 20


def test_describe_single_request_has_nan_rate():
    d = Workload.from_requests([3], [10], [1], [[1]], block_size=16).describe()
    assert d["duration_ms"] == 0 and math.isnan(d["offered_rate_rps"])
    assert d["infinite_block_hit_ratio"] == 0


@settings(max_examples=80, deadline=None)
@given(wl=workloads())
def test_describe_hit_ratios_match_brute_force_replay(wl):
    d = wl.describe()
    blocks, tokens = replay(wl)
    assert d["infinite_block_hit_ratio"] == pytest.approx(blocks, abs=1e-12)
    assert d["infinite_token_hit_ratio"] == pytest.approx(tokens, abs=1e-12)
    flat = [int(x) for i in range(len(wl)) for x in wl.block_ids(i)]
    assert d["blocks_total"] == len(flat)
    assert d["blocks_unique"] == len(set(flat))
    expected_bad = sum(
        len(wl.block_ids(i)) != -(-int(wl.input_len[i]) // wl.block_size) for i in range(len(wl))
    )
    assert d["inconsistent_blocks"] == expected_bad


@settings(max_examples=50, deadline=None)
@given(wl=workloads())
def test_block_tokens_sum_to_input_len(wl):
    tokens = wl.block_tokens()
    for i in range(len(wl)):
        part = tokens[wl.offsets[i] : wl.offsets[i + 1]]
        expected = ref_block_tokens(int(wl.input_len[i]), len(part), wl.block_size)
        assert part.tolist() == expected
        if len(part):
            assert part.sum() == wl.input_len[i]


# ---------------------------------------------------------------- selections


def ten() -> Workload:
    """Ten requests at 0, 10, ..., 90 ms; request i has input 100+i and ids [i, 100+i]."""
    return Workload.from_requests(
        [10.0 * i for i in range(10)],
        [100 + i for i in range(10)],
        [i + 1 for i in range(10)],
        [[i, 100 + i] for i in range(10)],
        block_size=64,
        source="ten",
    )


def test_head():
    wl = ten()
    h = wl.head(3)
    assert len(h) == 3 and h.input_len.tolist() == [100, 101, 102]
    assert h.hash_ids.tolist() == [0, 100, 1, 101, 2, 102]
    assert len(wl.head()) == 5
    assert len(wl.head(100)) == 10
    assert len(wl.head(0)) == 0
    assert h.block_size == 64 and h.source == "ten"


def test_window_half_open_and_rebased():
    wl = ten()
    w = wl.window(20, 50)  # arrivals 20, 30, 40 (50 excluded)
    assert w.input_len.tolist() == [102, 103, 104]
    assert w.arrival_ms.tolist() == [0, 10, 20]
    assert [w.block_ids(i).tolist() for i in range(3)] == [[2, 102], [3, 103], [4, 104]]
    raw = wl.window(20, 50, rebase=False)
    assert raw.arrival_ms.tolist() == [20, 30, 40]
    assert len(wl.window(1000, 2000)) == 0


def test_sample_keeps_order_and_ids_and_is_seeded():
    wl = ten()
    s = wl.sample(4, seed=3)
    assert len(s) == 4
    assert np.all(np.diff(s.arrival_ms) > 0)
    for i in range(4):
        k = int(s.input_len[i]) - 100  # the original request index
        assert s.block_ids(i).tolist() == [k, 100 + k]
        assert s.arrival_ms[i] == 10.0 * k
    assert s == wl.sample(4, seed=3)
    assert len({tuple(wl.sample(4, seed=k).input_len) for k in range(10)}) > 1
    assert wl.sample(10) == wl
    with pytest.raises(ValueError):
        wl.sample(11)
    with pytest.raises(ValueError):
        wl.sample(-1)


def test_scale_time_and_shift_time():
    wl = ten()
    fast = wl.scale_time(0.5)
    assert fast.arrival_ms.tolist() == [5.0 * i for i in range(10)]
    # twice the offered rate: 10 requests over 45 ms instead of 90 ms
    assert fast.describe()["offered_rate_rps"] == pytest.approx(2 * wl.describe()["offered_rate_rps"])
    assert fast.hash_ids.tolist() == wl.hash_ids.tolist()
    assert fast.input_len.tolist() == wl.input_len.tolist()
    shifted = wl.shift_time(7.5)
    assert shifted.arrival_ms.tolist() == [7.5 + 10 * i for i in range(10)]
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            wl.scale_time(bad)


def test_methods_return_new_workloads_and_leave_the_original_alone():
    wl = ten()
    before = (wl.arrival_ms.copy(), wl.hash_ids.copy(), wl.frame.copy())
    for out in (wl.head(2), wl.window(0, 30), wl.sample(3), wl.scale_time(2), wl.shift_time(5),
                wl + wl, Workload.concat([wl], how="append")):
        assert out is not wl
    assert wl.arrival_ms.tolist() == before[0].tolist()
    assert wl.hash_ids.tolist() == before[1].tolist()
    assert wl.frame.equals(before[2])


def rows_of(w: Workload) -> list[tuple]:
    return [
        (float(w.arrival_ms[i]), int(w.input_len[i]), int(w.output_len[i]),
         tuple(w.block_ids(i).tolist()))
        for i in range(len(w))
    ]


@settings(max_examples=60, deadline=None)
@given(wl=workloads(), k=st.integers(0, 30), seed=st.integers(0, 100),
       a=st.floats(0, 1e6), width=st.floats(0, 1e6))
def test_selections_keep_each_request_with_its_ids(wl, k, seed, a, width):
    rows = rows_of(wl)
    assert rows_of(wl.head(k)) == rows[:k]
    assert rows_of(wl.window(a, a + width, rebase=False)) == [r for r in rows if a <= r[0] < a + width]
    m = min(k, len(wl))
    picked = rows_of(wl.sample(m, seed=seed))
    assert len(picked) == m
    it = iter(rows)  # a sample is a subsequence of the workload (arrival order kept)
    assert all(any(r == q for q in it) for r in picked)
    scaled = rows_of(wl.scale_time(2.0))
    assert [r[1:] for r in scaled] == [r[1:] for r in rows]
    assert [r[0] for r in scaled] == [2.0 * r[0] for r in rows]


# --------------------------------------------------------------- combination


def test_concat_merge_interleaves_by_arrival_stably():
    a = Workload.from_requests([0, 20], [1, 2], [1, 1], [[1], [2]], block_size=4)
    b = Workload.from_requests([10, 20], [3, 4], [1, 1], [[3], [4]], block_size=4)
    m = Workload.concat([a, b])
    # 0(a), 10(b), 20(a first: tie keeps input order), 20(b)
    assert m.arrival_ms.tolist() == [0, 10, 20, 20]
    assert m.input_len.tolist() == [1, 3, 2, 4]
    assert m.hash_ids.tolist() == [1, 3, 2, 4]
    assert (a + b) == m


def test_concat_append_starts_where_previous_ended():
    a = Workload.from_requests([0, 20], [1, 2], [1, 1], [[1], [2]], block_size=4)
    b = Workload.from_requests([5, 15], [3, 4], [1, 1], [[3], [4]], block_size=4)
    m = Workload.concat([a, b], how="append")
    # b is moved to start at a's last arrival (20): 20, 30
    assert m.arrival_ms.tolist() == [0, 20, 20, 30]
    assert m.input_len.tolist() == [1, 2, 3, 4]


def test_concat_disjoint_ids():
    a = Workload.from_requests([0, 1], [8, 8], [1, 1], [[5, 6], [5, 7]], block_size=4)
    same = Workload.concat([a, a])
    assert same.describe()["blocks_unique"] == 3  # 5, 6, 7 shared
    apart = Workload.concat([a, a], disjoint_ids=True)
    assert apart.describe()["blocks_unique"] == 6
    # each copy keeps its internal sharing: request pairs still share their first id
    firsts = [int(apart.block_ids(i)[0]) for i in range(4)]
    assert len(set(firsts)) == 2


def test_concat_errors_and_no_hash_ids():
    a = Workload.from_requests([0], [8], [1], [[1]], block_size=4)
    with pytest.raises(ValueError):
        Workload.concat([])
    with pytest.raises(ValueError):
        Workload.concat([a, Workload.from_requests([0], [8], [1], [[1]], block_size=8)])
    with pytest.raises(ValueError):
        Workload.concat([a], how="zip")
    mixed = a + Workload.from_requests([1], [8], [1], block_size=4)
    assert len(mixed) == 2 and not mixed.has_hash_ids
    with pytest.raises(TypeError):
        a + 1


@settings(max_examples=50, deadline=None)
@given(a=workloads(max_requests=10), b=workloads(max_requests=10))
def test_concat_keeps_every_request_with_its_ids(a, b):
    b = Workload.from_requests(b.arrival_ms, b.input_len, b.output_len,
                               [b.block_ids(i).tolist() for i in range(len(b))],
                               block_size=a.block_size)
    m = a + b
    assert len(m) == len(a) + len(b)
    assert np.all(np.diff(m.arrival_ms) >= 0)

    assert sorted(rows_of(m)) == sorted(rows_of(a) + rows_of(b))


@settings(max_examples=50, deadline=None)
@given(a=workloads(max_requests=8), b=workloads(max_requests=8))
def test_concat_disjoint_ids_separates_sources_and_keeps_structure(a, b):
    b = Workload.from_requests(b.arrival_ms, b.input_len, b.output_len,
                               [b.block_ids(i).tolist() for i in range(len(b))],
                               block_size=a.block_size)
    m = Workload.concat([a, b], how="append", disjoint_ids=True)
    assert len(m) == len(a) + len(b)
    # with "append" the order is a's requests then b's (b starts at a's last arrival)
    ids_a = [m.block_ids(i).tolist() for i in range(len(a))]
    ids_b = [m.block_ids(len(a) + i).tolist() for i in range(len(b))]
    assert not {h for r in ids_a for h in r} & {h for r in ids_b for h in r}
    for part, ids in ((a, ids_a), (b, ids_b)):
        orig = [part.block_ids(i).tolist() for i in range(len(part))]
        assert [len(r) for r in ids] == [len(r) for r in orig]
        flat_o = [h for r in orig for h in r]
        flat_n = [h for r in ids for h in r]
        # same equality pattern: ids are renamed one-to-one
        assert len(set(zip(flat_o, flat_n, strict=True))) == len(set(flat_o)) == len(set(flat_n))


# ------------------------------------------------------------------ equality


def test_equality():
    base = dict(arrival_ms=[0, 1], input_len=[4, 4], output_len=[1, 1], hash_ids=[[1], [2]], block_size=4)
    a = Workload.from_requests(**base)
    assert a == Workload.from_requests(**base)
    assert a != Workload.from_requests(**{**base, "hash_ids": [[1], [3]]})
    assert a != Workload.from_requests(**{**base, "hash_ids": [[1, 2], []]})
    assert a != Workload.from_requests(**{**base, "block_size": 8})
    assert a != Workload.from_requests(**{**base, "output_len": [1, 2]})
    assert a != Workload.from_requests(**{k: v for k, v in base.items() if k != "hash_ids"})
    assert a != Workload.from_requests(**base, session=[0, 0])
    # the provenance column "line" is ignored
    assert a == Workload.from_requests(**base, line=[7, 9])
    assert a != "not a workload"
    with pytest.raises(TypeError):
        hash(a)


# ------------------------------------------------------------------- display


def test_repr_and_html():
    wl = Workload.from_requests([0, 1], [4, 4000], [1, 1], [[1], list(range(8))], block_size=512,
                                source="hand")
    text = repr(wl)
    assert text.splitlines()[0] == "Workload from hand: 2 requests, block_size=512"
    assert "[1]" in text
    assert "[0, 1, ... 7] (8)" in text  # long id lists are abbreviated with their count
    html = wl._repr_html_()
    assert "<table" in html and "2 requests" in html and "block_size=512" in html
    plain = Workload.from_requests([0], [4], [1])
    assert "no hash ids" in repr(plain)
    assert "hash_ids" not in repr(plain).splitlines()[1]


def test_repr_truncates_long_workloads():
    wl = Workload.from_requests(list(range(1000)), [7] * 1000, [1] * 1000)
    text = repr(wl)
    assert "1,000 requests" in text
    assert len(text.splitlines()) < 20
    assert "999" in text  # the last rows are shown too


def test_to_frame_has_list_column():
    wl = Workload.from_requests([0, 1], [4, 4], [1, 1], [[1, 2], [3]], block_size=2)
    f = wl.to_frame()
    assert f["hash_ids"].tolist() == [[1, 2], [3]]
    assert "hash_ids" not in wl.frame.columns
    assert "hash_ids" not in Workload.from_requests([0], [4], [1]).to_frame().columns


# --------------------------------------------- value checks (bugs 7, 8, 11)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(arrival_ms=[0, 1], input_len=[3, 1.5], output_len=[1, 1]),   # was truncated to 1
         "request 1, field 'input_len'"),
        (dict(arrival_ms=[0], input_len=[-5], output_len=[1]), "field 'input_len'"),
        (dict(arrival_ms=[0], input_len=[5], output_len=[-1]), "field 'output_len'"),
        (dict(arrival_ms=[0, float("nan")], input_len=[1, 1], output_len=[1, 1]),
         "request 1, field 'arrival_ms'"),
        (dict(arrival_ms=[0], input_len=[1], output_len=[1], hash_ids=[[1.7]]),  # was id 1
         "field 'hash_ids'"),
        (dict(arrival_ms=[0], input_len=[1], output_len=[1], hash_ids=[[True]]),
         "field 'hash_ids'"),
    ],
)
def test_from_requests_rejects_bad_values(kwargs, words):
    with pytest.raises(WorkloadError, match=re.escape(words)):
        Workload.from_requests(**kwargs)


@pytest.mark.parametrize("ids", [[2**63], [2**64 - 1], [1, 2**63], [2**70], [-(2**63) - 1]])
def test_from_requests_rejects_ids_beyond_int64(ids):
    # used to wrap around silently (bug 11): [2**63] -> [-2**63], [2**64 - 1] -> [-1]
    with pytest.raises(WorkloadError, match=re.escape("request 1, field 'hash_ids'")):
        Workload.from_requests([0, 1], [1, 1], [1, 1], [[5], ids])


def test_from_requests_accepts_the_int64_bounds():
    wl = Workload.from_requests([0], [1], [1], [[2**63 - 1, -(2**63)]])
    assert wl.hash_ids.tolist() == [2**63 - 1, -(2**63)]


def test_mutating_the_frame_does_not_change_the_workload():
    wl = Workload.from_requests([0, 1], [5, 5], [1, 1])
    f = wl.frame
    f.loc[0, "input_len"] = 99
    assert wl.input_len.tolist() == [5, 5]
    assert wl.describe()["input_max"] == 5


@pytest.mark.parametrize("offset", [float("nan"), float("inf")])
def test_shift_time_rejects_non_finite_offset(offset):
    with pytest.raises(ValueError):
        Workload.from_requests([0, 1], [1, 1], [1, 1]).shift_time(offset)
