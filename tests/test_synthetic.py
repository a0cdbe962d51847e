"""Tests of the seeded synthetic generator (``Workload.from_synthetic``)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload

# ---------------------------------------------------------------- hand cases


def test_deterministic_arrivals_and_fixed_lengths():
    wl = Workload.from_synthetic(5, rate=4.0, arrival="deterministic", input_len=100,
                                 output_len=7, block_size=64)
    # 4 requests/s -> one every 250 ms, first at 0
    assert wl.arrival_ms.tolist() == [0, 250, 500, 750, 1000]
    assert wl.input_len.tolist() == [100] * 5
    assert wl.output_len.tolist() == [7] * 5
    # no prefix pool: ceil(100/64) = 2 fresh ids each, numbered in order, never shared
    assert wl.hash_ids.tolist() == list(range(10))
    assert wl.offsets.tolist() == [0, 2, 4, 6, 8, 10]
    assert "prefix_id" not in wl.frame.columns
    d = wl.describe()
    assert d["infinite_block_hit_ratio"] == 0 and d["blocks_unique"] == 10


def test_one_prefix_hand_case():
    wl = Workload.from_synthetic(3, rate=2.0, arrival="deterministic", input_len=1024,
                                 output_len=8, num_prefixes=1, prefix_len=1024, block_size=512)
    # prompt = 1024 prefix tokens + 1024 own tokens = 2048 = 4 blocks;
    # the prefix's 2 blocks are ids 0, 1 (pool of 1 x 2 blocks), fresh ids start at 2.
    assert wl.input_len.tolist() == [2048] * 3
    assert [wl.block_ids(i).tolist() for i in range(3)] == [[0, 1, 2, 3], [0, 1, 4, 5], [0, 1, 6, 7]]
    assert wl.frame["prefix_id"].tolist() == [0, 0, 0]
    # infinite cache: requests 1 and 2 hit their 2 prefix blocks: 4 of 12 blocks
    assert wl.describe()["infinite_block_hit_ratio"] == pytest.approx(4 / 12)


def test_partial_prefix_block_gets_a_fresh_id():
    wl = Workload.from_synthetic(2, rate=1.0, arrival="deterministic", input_len=100,
                                 output_len=1, num_prefixes=1, prefix_len=700, block_size=512)
    # prompt 700 + 100 = 800 tokens = 2 blocks; only 700 // 512 = 1 block is the prefix's (id 0);
    # the second block mixes prefix and own tokens -> fresh ids 1 and 2.
    assert wl.input_len.tolist() == [800, 800]
    assert [wl.block_ids(i).tolist() for i in range(2)] == [[0, 1], [0, 2]]


def test_prefix_shorter_than_a_block_shares_nothing():
    wl = Workload.from_synthetic(20, rate=1.0, input_len=64, output_len=1, num_prefixes=2,
                                 prefix_len=100, block_size=512, seed=4)
    assert wl.input_len.tolist() == [164] * 20
    assert wl.describe()["infinite_block_hit_ratio"] == 0
    assert len(np.unique(wl.hash_ids)) == 20


def test_length_range_bounds_and_clamp():
    wl = Workload.from_synthetic(5000, rate=10.0, input_len=100, output_len=40, range_ratio=0.3,
                                 seed=1)
    # input in [round(70), round(130)] = [70, 130]; output in [28, 52]
    assert wl.input_len.min() == 70 and wl.input_len.max() == 130
    assert wl.output_len.min() == 28 and wl.output_len.max() == 52
    assert len(np.unique(wl.input_len)) == 61  # every integer of the range occurs
    assert wl.input_len.mean() == pytest.approx(100, abs=1.0)
    assert wl.output_len.mean() == pytest.approx(40, abs=0.5)
    tiny = Workload.from_synthetic(500, rate=1.0, input_len=2, output_len=2, range_ratio=0.9, seed=1)
    # [round(0.2), round(3.8)] = [0, 4], clamped to at least 1 -> [1, 4]
    assert tiny.input_len.min() == 1 and tiny.input_len.max() == 4


def test_range_with_prefix_adds_prefix_len():
    wl = Workload.from_synthetic(2000, rate=10.0, input_len=200, output_len=10, range_ratio=0.5,
                                 num_prefixes=3, prefix_len=512, block_size=256, seed=2)
    own = wl.input_len - 512
    assert own.min() == 100 and own.max() == 300


def test_zero_and_one_requests():
    assert len(Workload.from_synthetic(0, rate=1.0)) == 0
    one = Workload.from_synthetic(1, rate=1.0, arrival="gamma", burstiness=0.3)
    assert one.arrival_ms.tolist() == [0.0]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(rate=0), dict(rate=-1), dict(rate=float("nan")), dict(arrival="uniform"),
        dict(arrival="gamma", burstiness=0), dict(input_len=0), dict(output_len=1.5),
        dict(range_ratio=1.0), dict(range_ratio=-0.1), dict(num_prefixes=-1),
        dict(num_prefixes=2, prefix_len=0), dict(prefix_zipf=-1.0), dict(block_size=0),
        dict(num_requests=-1), dict(num_requests=2.5),
    ],
)
def test_parameter_errors(kwargs):
    args = {"num_requests": 10, "rate": 1.0, **kwargs}
    with pytest.raises(ValueError):
        Workload.from_synthetic(args.pop("num_requests"), args.pop("rate"), **args)


# -------------------------------------------------------------- statistics


@pytest.mark.parametrize("arrival", ["poisson", "gamma", "deterministic"])
def test_mean_rate(arrival):
    wl = Workload.from_synthetic(20000, rate=25.0, arrival=arrival, burstiness=0.5, seed=7)
    gaps = np.diff(wl.arrival_ms)
    assert gaps.mean() == pytest.approx(40.0, rel=0.05)  # 1000 ms / 25
    assert wl.describe()["offered_rate_rps"] == pytest.approx(25.0, rel=0.05)


@pytest.mark.parametrize(("arrival", "shape", "cv"), [
    ("poisson", 1.0, 1.0),
    ("gamma", 0.25, 2.0),   # CV = 1 / sqrt(0.25)
    ("gamma", 1.0, 1.0),
    ("gamma", 4.0, 0.5),    # CV = 1 / sqrt(4)
    ("deterministic", 1.0, 0.0),
])
def test_interarrival_cv(arrival, shape, cv):
    wl = Workload.from_synthetic(30000, rate=10.0, arrival=arrival, burstiness=shape, seed=11)
    gaps = np.diff(wl.arrival_ms)
    assert gaps.mean() == pytest.approx(100.0, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08, abs=1e-9)


@pytest.mark.parametrize("s", [0.0, 0.8, 1.5])
def test_zipf_rank_frequencies(s):
    k = 8
    n = 40000
    wl = Workload.from_synthetic(n, rate=100.0, input_len=16, output_len=1, num_prefixes=k,
                                 prefix_len=16, prefix_zipf=s, block_size=16, seed=5)
    counts = np.bincount(wl.frame["prefix_id"].to_numpy(), minlength=k)
    assert counts.size == k
    expected = np.arange(1, k + 1, dtype=float) ** -s
    expected /= expected.sum()
    np.testing.assert_allclose(counts / n, expected, atol=0.01)
    # the pool shares exactly the one prefix block per request: ids of prefix p are [p]
    for p in range(k):
        rows = np.flatnonzero(wl.frame["prefix_id"].to_numpy() == p)[:3]
        assert all(wl.block_ids(int(r))[0] == p for r in rows)


# ------------------------------------------------------------ determinism


def test_same_seed_same_workload_different_seed_differs():
    kw = dict(arrival="gamma", burstiness=0.5, input_len=300, output_len=30, range_ratio=0.5,
              num_prefixes=5, prefix_len=256, prefix_zipf=1.0, block_size=64)
    a = Workload.from_synthetic(300, 5.0, seed=3, **kw)
    b = Workload.from_synthetic(300, 5.0, seed=3, **kw)
    c = Workload.from_synthetic(300, 5.0, seed=4, **kw)
    assert a == b
    assert a.frame.equals(b.frame)
    assert a != c
    assert not np.array_equal(a.arrival_ms, c.arrival_ms)


# ------------------------------------------------------------ invariants


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 60),
    rate=st.floats(0.1, 1000),
    arrival=st.sampled_from(["poisson", "deterministic", "gamma"]),
    burstiness=st.floats(0.1, 10),
    input_len=st.integers(1, 3000),
    output_len=st.integers(1, 500),
    range_ratio=st.sampled_from([0.0, 0.1, 0.5, 0.9]),
    num_prefixes=st.integers(0, 6),
    prefix_len=st.integers(1, 2000),
    prefix_zipf=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    block_size=st.sampled_from([16, 64, 256, 512]),
    seed=st.integers(0, 2**31),
)
def test_generator_invariants(n, rate, arrival, burstiness, input_len, output_len, range_ratio,
                              num_prefixes, prefix_len, prefix_zipf, block_size, seed):
    kw = dict(arrival=arrival, burstiness=burstiness, input_len=input_len, output_len=output_len,
              range_ratio=range_ratio, num_prefixes=num_prefixes, prefix_len=prefix_len,
              prefix_zipf=prefix_zipf, block_size=block_size)
    wl = Workload.from_synthetic(n, rate, seed=seed, **kw)
    assert len(wl) == n and wl.block_size == block_size
    arr = wl.arrival_ms
    assert arr[0] == 0 and np.all(np.diff(arr) >= 0) and np.all(np.isfinite(arr))

    # lengths in range (own part for input when a pool exists)
    def bounds(mean):
        if range_ratio == 0:
            return mean, mean
        low = max(round(mean * (1 - range_ratio)), 1)
        return low, max(round(mean * (1 + range_ratio)), low)

    pre = prefix_len if num_prefixes else 0
    lo, hi = bounds(input_len)
    assert np.all((wl.input_len - pre >= lo) & (wl.input_len - pre <= hi))
    lo, hi = bounds(output_len)
    assert np.all((wl.output_len >= lo) & (wl.output_len <= hi))

    # ids count == ceil(input_len / block_size), so describe finds no inconsistency
    assert wl.num_blocks.tolist() == [-(-int(x) // block_size) for x in wl.input_len]
    assert not wl.inconsistent_mask().any()

    k = prefix_len // block_size if num_prefixes else 0
    rows = [wl.block_ids(i).tolist() for i in range(n)]
    owners: dict[int, int] = {}
    fresh: list[int] = []
    by_prefix: dict[int, tuple[int, ...]] = {}
    if num_prefixes:
        pid = wl.frame["prefix_id"].tolist()
        assert all(0 <= p < num_prefixes for p in pid)
    for i, row in enumerate(rows):
        head, tail = row[:k], row[k:]
        fresh += tail
        if num_prefixes:
            p = pid[i]
            # same prefix id -> same leading blocks
            assert by_prefix.setdefault(p, tuple(head)) == tuple(head)
            for h in head:  # a prefix block belongs to one prefix only
                assert owners.setdefault(h, p) == p
    # fresh ids unique across the workload and disjoint from every prefix block
    assert len(fresh) == len(set(fresh))
    assert not set(fresh) & set(owners)

    # determinism by seed; a different seed gives a different workload
    assert wl == Workload.from_synthetic(n, rate, seed=seed, **kw)
    if n >= 3 and arrival != "deterministic":
        assert wl != Workload.from_synthetic(n, rate, seed=seed + 1, **kw)


def test_prefix_popularity_order_is_by_rank():
    wl = Workload.from_synthetic(5000, rate=50.0, input_len=32, output_len=1, num_prefixes=4,
                                 prefix_len=32, prefix_zipf=2.0, block_size=16, seed=0)
    counts = collections.Counter(wl.frame["prefix_id"].tolist())
    # rank 1 (prefix 0) most popular: weights 1, 1/4, 1/9, 1/16
    assert counts[0] > counts[1] > counts[2] > counts[3]
