"""Partitioned caches, with and without a shared pool, against plain references.

The references here are written with lists and dicts only and take the
request-to-cache assignment from the test itself (drawn by hypothesis and
passed as a callable, or ``i % parts`` for round-robin), never from the
implementation's helpers (``assign_parts``, ``replay_hits``, ...).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import hypothesis_settings, rows_of, tokens_of
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.reuse import (
    infinite_hit_ratio,
    partitioned_hit_rate,
    replay_cache,
    replay_tiered,
)

BS = 4
SETTINGS = hypothesis_settings(60)


def touch_order(ids: list[int], touch: str = "tail_first") -> list[int]:
    distinct: list[int] = []
    for x in ids:
        if x not in distinct:
            distinct.append(x)
    return distinct if touch == "head_first" else distinct[::-1]


def naive_cache(ids: list[list[int]], capacity: int, policy: str) -> list[int]:
    """One cache, linear scans: uses, last touch, insertion time, position."""
    cache: dict[int, list[int]] = {}
    clock = 0
    hits = []
    for request in ids:
        h = 0
        for x in request:
            if x not in cache:
                break
            h += 1
        hits.append(h)
        for x in touch_order(request):
            clock += 1
            pos = request.index(x)
            if x in cache:
                cache[x][0] += 1
                cache[x][1] = clock
                cache[x][3] = pos
                continue
            if capacity == 0:
                continue
            if policy in ("lfu", "length_aware") and len(cache) >= capacity:
                if policy == "lfu":
                    key = lambda y: (cache[y][0], cache[y][1])  # noqa: E731
                else:
                    key = lambda y: (cache[y][0], -cache[y][3], cache[y][1])  # noqa: E731
                del cache[min(cache, key=key)]
            cache[x] = [1, clock, clock, pos]
            if len(cache) > capacity:
                slot = 1 if policy == "lru" else 2
                del cache[min(cache, key=lambda y: cache[y][slot])]
    return hits


def naive_pool(
    ids: list[list[int]], where: list[int], caps: list[int], pool: int, exclusive: bool = True
) -> list[tuple[int, int]]:
    """Local LRU lists (most recent last) over one LRU pool list.

    Returns (local hits, pool hits) per request, as documented in
    partitioned_hit_rate.
    """
    local: list[list[int]] = [[] for _ in caps]
    shared: list[int] = []
    out = []
    for request, k in zip(ids, where, strict=True):
        mine = local[k]
        n_local = n_pool = 0
        for x in request:
            if x in mine:
                n_local += 1
            elif x in shared:
                n_pool += 1
            else:
                break
        out.append((n_local, n_pool))
        for x in touch_order(request):
            if x in mine:
                mine.remove(x)
                mine.append(x)
                continue
            if x in shared:
                shared.remove(x)
                if not exclusive:
                    shared.append(x)  # the pool keeps its copy, now most recent
            mine.append(x)
            if len(mine) > caps[k]:
                victim = mine.pop(0)
                if victim in shared:
                    shared.remove(victim)
                shared.append(victim)
                if len(shared) > pool:
                    shared.pop(0)
    return out


@st.composite
def assigned(draw: st.DrawFn, parts_max: int = 4) -> tuple[Workload, int, list[int]]:
    n = draw(st.integers(1, 10))
    ids = draw(st.lists(st.lists(st.integers(0, 7), max_size=6), min_size=n, max_size=n))
    rems = draw(st.lists(st.integers(1, BS), min_size=n, max_size=n))
    lens = [BS * (len(r) - 1) + m if r else 0 for r, m in zip(ids, rems, strict=True)]
    wl = Workload.from_requests(list(range(n)), lens, [1] * n, ids, block_size=BS)
    parts = draw(st.integers(1, parts_max))
    where = draw(st.lists(st.integers(0, parts - 1), min_size=n, max_size=n))
    return wl, parts, where


def split_caps(total: int, parts: int) -> list[int]:
    # documented: the first total % parts caches get one block more
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


# --------------------------------------------------------------- no pool
@SETTINGS
@given(
    assigned(),
    st.integers(0, 8),
    st.sampled_from(["lru", "fifo", "lfu", "length_aware", "opt"]),
)
def test_partition_equals_plain_replay_of_each_part(
    case: tuple[Workload, int, list[int]], total: int, policy: str
) -> None:
    wl, parts, where = case
    df = partitioned_hit_rate(wl, total, parts, assign=lambda w: np.array(where), policy=policy)
    ids = rows_of(wl)
    caps = split_caps(total, parts)
    expected = 0
    for k in range(parts):
        rows = [r for r in range(len(wl)) if where[r] == k]
        assert df.loc[f"part {k}", "capacity_blocks"] == caps[k]
        assert df.loc[f"part {k}", "requests"] == len(rows)
        if not rows:
            continue
        sub = [ids[r] for r in rows]
        if policy == "opt":  # no plain reference: replay_cache's OPT is checked
            # against exhaustive search in test_reuse_properties
            sub_wl = Workload.from_requests(
                rows, wl.input_len[rows], wl.output_len[rows], sub, block_size=BS
            )
            got = int(replay_cache(sub_wl, caps[k], policy="opt")["hit_blocks"].sum())
        else:
            got = sum(naive_cache(sub, caps[k], policy))
        assert df.loc[f"part {k}", "hit_blocks"] == got
        expected += got
    assert df.loc["partitioned", "hit_blocks"] == expected
    if policy != "opt":
        assert df.loc["pooled", "hit_blocks"] == sum(naive_cache(ids, total, policy))
    assert (df["pool_hit_blocks"] == 0).all()


@settings(max_examples=30, deadline=None)
@given(assigned(), st.integers(0, 8))
def test_round_robin_is_i_mod_parts(case: tuple[Workload, int, list[int]], total: int) -> None:
    wl, parts, _ = case
    rr = partitioned_hit_rate(wl, total, parts, assign="round_robin")
    mod = [i % parts for i in range(len(wl))]
    explicit = partitioned_hit_rate(wl, total, parts, assign=lambda w: np.array(mod))
    assert rr["hit_blocks"].tolist() == explicit["hit_blocks"].tolist()


# ------------------------------------------------------------ shared pool
# Block size 1, two caches of 1 block, a pool of 2, round-robin.
# R0 [1, 2] (cache 0): miss. Touch 2: local0 (2). Touch 1: local0 (2, 1) over
#   capacity -> 2 demoted: pool (2); local0 (1).
# R1 [3] (cache 1): miss; local1 (3).
# R2 [1, 2] (cache 0): 1 local, 2 in the pool -> 2 hits, 1 from the pool.
#   Touch 2: out of the pool into local0 (1, 2) -> 1 demoted: pool (1).
#   Touch 1: out of the pool into local0 (2, 1) -> 2 demoted: pool (2).
# R3 [2] (cache 1): 2 in the pool -> 1 pool hit.
# Partitioned: 3 hits, 2 from the pool (tokens: 1 each). Without the pool only
# R2's block 1 hits. Pooled row: one LRU of 2 + 2 = 4 blocks: R2 hits 2, R3 1.
POOL_CASE = [[1, 2], [3], [1, 2], [2]]


def test_pool_by_hand() -> None:
    wl = Workload.from_requests([0, 1, 2, 3], [2, 1, 2, 1], [1] * 4, POOL_CASE, block_size=1)
    df = partitioned_hit_rate(wl, 2, 2, assign="round_robin", pool=2)
    assert df.loc["partitioned", ["hit_blocks", "pool_hit_blocks", "pool_hit_tokens"]].tolist() == [
        3,
        2,
        2,
    ]
    assert df.loc["part 0", ["hit_blocks", "pool_hit_blocks"]].tolist() == [2, 1]
    assert df.loc["part 1", ["hit_blocks", "pool_hit_blocks"]].tolist() == [1, 1]
    assert df.loc["pooled", ["capacity_blocks", "hit_blocks"]].tolist() == [4, 3]
    assert df.attrs["pool_blocks"] == 2
    assert partitioned_hit_rate(wl, 2, 2, assign="round_robin").loc["partitioned", "hit_blocks"] == 1
    # a pool of 1: R2's touches leave the pool holding 2 (the last demotion)
    # so the result is the same; a pool of 0 drops every demoted block.
    assert partitioned_hit_rate(wl, 2, 2, assign="round_robin", pool=1).loc[
        "partitioned", "hit_blocks"
    ] == 3
    assert naive_pool(POOL_CASE, [0, 1, 0, 1], [1, 1], 2) == [(0, 0), (0, 0), (1, 1), (0, 1)]


@SETTINGS
@given(assigned(), st.integers(0, 8), st.integers(1, 6), st.booleans())
def test_pool_equals_plain_replay(
    case: tuple[Workload, int, list[int]], total: int, pool: int, exclusive: bool
) -> None:
    wl, parts, where = case
    df = partitioned_hit_rate(
        wl, total, parts, assign=lambda w: np.array(where), pool=pool, pool_exclusive=exclusive
    )
    caps = split_caps(total, parts)
    ref = naive_pool(rows_of(wl), where, caps, pool, exclusive)
    toks = tokens_of(wl)
    hit_blocks = sum(a + b for a, b in ref)
    pool_blocks = sum(b for _, b in ref)
    hit_tokens = sum(sum(t[: a + b]) for t, (a, b) in zip(toks, ref, strict=True))
    assert df.loc["partitioned", "hit_blocks"] == hit_blocks
    assert df.loc["partitioned", "pool_hit_blocks"] == pool_blocks
    assert df.loc["partitioned", "hit_tokens"] == hit_tokens
    for k in range(parts):
        mine = [r for r in range(len(wl)) if where[r] == k]
        assert df.loc[f"part {k}", "hit_blocks"] == sum(sum(ref[r]) for r in mine)
    # the pooled row is one LRU of total + pool
    assert df.loc["pooled", "hit_blocks"] == sum(naive_cache(rows_of(wl), total + pool, "lru"))
    # a pool never hurts, and nothing beats the ceiling
    without = partitioned_hit_rate(wl, total, parts, assign=lambda w: np.array(where))
    assert df.loc["partitioned", "hit_blocks"] >= without.loc["partitioned", "hit_blocks"]
    assert df.loc["partitioned", "hit_blocks"] <= infinite_hit_ratio(wl).hit_blocks


@SETTINGS
@given(assigned(parts_max=1), st.integers(0, 6), st.integers(0, 6))
def test_one_cache_and_a_pool_is_a_two_tier_hierarchy(
    case: tuple[Workload, int, list[int]], local: int, pool: int
) -> None:
    wl, _, _ = case
    df = partitioned_hit_rate(wl, local, 1, pool=pool)
    tiers = replay_tiered(wl, [local, pool])
    assert df.loc["partitioned", "hit_blocks"] == tiers["hit_blocks"].sum()
    assert df.loc["partitioned", "pool_hit_blocks"] == tiers["tier1_hit_blocks"].sum()
    assert df.loc["partitioned", "pool_hit_tokens"] == tiers["tier1_hit_tokens"].sum()


# Copy semantics, same case: R2's touch of 2 refreshes 2 in the pool and
# takes it into local0 (1, 2) -> 1 demoted: pool (2, 1). Touch 1: the pool
# keeps 1 (refreshed: pool (2, 1)), local0 (2, 1) -> 2 demoted, already in the
# pool: refreshed -> pool (1, 2). R3 finds 2 in the pool: same hits as the
# exclusive pool here. With a pool of 1 block: after R2 the pool went
# (2) -> (1) (inserting 1 drops 2) -> 1 refreshed -> 2 demoted, inserted,
# drops 1 -> (2): R3 still hits.
def test_pool_copy_by_hand() -> None:
    wl = Workload.from_requests([0, 1, 2, 3], [2, 1, 2, 1], [1] * 4, POOL_CASE, block_size=1)
    for pool in (1, 2):
        df = partitioned_hit_rate(wl, 2, 2, assign="round_robin", pool=pool, pool_exclusive=False)
        assert df.loc["partitioned", ["hit_blocks", "pool_hit_blocks"]].tolist() == [3, 2]
    # R0 [1], R1 [2], R2 [1], R3 [1] on caches 0, 0, 1, 0 of 1 block, pool 1:
    # R1 demotes 1 to the pool. R2 (cache 1) finds 1 in the pool. Exclusive:
    # 1 leaves the pool, R3 (cache 0: holds 2) misses. Copy: the pool keeps 1
    # and R3 finds it there.
    wl2 = Workload.from_requests([0, 1, 2, 3], [1] * 4, [1] * 4, [[1], [2], [1], [1]], block_size=1)
    where = np.array([0, 0, 1, 0])
    ex = partitioned_hit_rate(wl2, 2, 2, assign=lambda w: where, pool=1)
    cp = partitioned_hit_rate(wl2, 2, 2, assign=lambda w: where, pool=1, pool_exclusive=False)
    assert ex.loc["partitioned", "pool_hit_blocks"] == 1
    assert cp.loc["partitioned", "pool_hit_blocks"] == 2


def test_pool_needs_lru() -> None:
    wl = Workload.from_requests([0], [2], [1], [[1, 2]], block_size=1)
    with pytest.raises(ValueError, match="pool needs policy='lru'"):
        partitioned_hit_rate(wl, 2, 2, policy="lfu", pool=4)
    with pytest.raises(ValueError, match="capacity"):
        partitioned_hit_rate(wl, 2, 2, pool=-1)


def test_pool_on_conversation_trace(conversation_path: Path) -> None:
    wl = Workload.from_mooncake(conversation_path)
    kw = dict(assign="hash_first_block", unit="tokens")
    local = partitioned_hit_rate(wl, 8 * 1_000_000, 8, **kw)
    pooled = partitioned_hit_rate(wl, 8 * 1_000_000, 8, pool=4_000_000, **kw)
    assert pooled.loc["partitioned", "hit_tokens"] > local.loc["partitioned", "hit_tokens"]
    assert pooled.loc["partitioned", "pool_hit_tokens"] > 0
    assert pooled.loc["partitioned", "token_hit_ratio"] <= infinite_hit_ratio(wl).token_hit_ratio
