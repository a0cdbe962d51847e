"""The Mooncake paper's length-aware eviction policy (``policy="length_aware"``).

Rule (inferasim.reuse.replay docstring): evict the block with the fewest
uses since insertion; among those the deepest in its prompt (largest
position in the request that touched it last); among those the least
recently touched. A new block is always inserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import id_workloads
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.reuse import hit_rate_curve, infinite_hit_ratio, replay_cache

BS = 4


def wl_of(ids: list[list[int]]) -> Workload:
    n = len(ids)
    return Workload.from_requests(list(range(n)), [len(r) for r in ids], [1] * n, ids, block_size=1)


def hits(wl: Workload, cap: int, policy: str) -> list[int]:
    return replay_cache(wl, cap, policy=policy)["hit_blocks"].tolist()


# Capacity 2, tail-first touches (uses, position, last touch):
# R0 [1]:    1 = (1, 0, t1).
# R1 [2, 3]: touch 3 (position 1): 3 = (1, 1, t2). Touch 2 (position 0): full;
#            length_aware: 1 and 3 both used once, 3 sits deeper -> evict 3.
#            LRU / LFU (LRU among equal uses): evict 1.
# R2 [1]:    length_aware hits 1; LRU and LFU miss.
def test_deeper_block_goes_first() -> None:
    wl = wl_of([[1], [2, 3], [1]])
    assert hits(wl, 2, "length_aware") == [0, 0, 1]
    assert hits(wl, 2, "lru") == [0, 0, 0]
    assert hits(wl, 2, "lfu") == [0, 0, 0]


# Capacity 2. Uses come first, depth second:
# R0 [1, 2]: 2 = (1, 1), 1 = (1, 0).
# R1 [1, 2]: both hit (2 blocks); 2 = (2, 1), 1 = (2, 0).
# R2 [3]:    both used twice; 2 deeper -> evict 2. Cache 1 (2 uses), 3 (1 use).
# R3 [4, 5]: touch 5: evict 3 (fewest uses) -> 1, 5 = (1, 1).
#            touch 4: evict 5 (one use, vs 1 with two) -> 1, 4.
# R4 [1, 2]: 1 hits, 2 misses -> 1.
# LRU: after R1 the order is 2, 1 (1 most recent); 3 evicts 2; 5 evicts 1; 4
# evicts 3; R4 misses.
def test_uses_before_depth() -> None:
    wl = wl_of([[1, 2], [1, 2], [3], [4, 5], [1, 2]])
    assert hits(wl, 2, "length_aware") == [0, 2, 0, 0, 1]
    assert hits(wl, 2, "lru") == [0, 2, 0, 0, 0]


# Position is taken in the request that touched the block last (R1 moves
# block 1 from position 1 to position 0): capacity 2. R0 [5, 1]: 1 = (1, 1), 5 = (1, 0).  R1 [1]: hit; 1 = (2, 0).
# R2 [2]: evict 5 (1 use vs 2) -> 1, 2 = (1, 0).  R3 [3]: evict 2 -> 1, 3.
# R4 [5, 1]: 5 missed -> 0 hits, although 1 is cached (prefix rule).
# Capacity 3: R2 fits (1, 5, 2). R3 [3]: 5 = (1, 0, t2) and 2 = (1, 0, t4) tie
# on uses and position -> the least recently touched, 5, goes. R4 misses 5.
# Capacity 4: nothing is evicted, R4 hits 5 and 1.
def test_position_of_last_touch_and_prefix_rule() -> None:
    wl = wl_of([[5, 1], [1], [2], [3], [5, 1]])
    assert hits(wl, 2, "length_aware") == [0, 1, 0, 0, 0]
    assert hits(wl, 3, "length_aware") == [0, 1, 0, 0, 0]
    assert hits(wl, 4, "length_aware") == [0, 1, 0, 0, 2]


def naive_length_aware(ids: list[list[int]], capacity: int, touch: str) -> list[int]:
    """Linear scan over a dict id -> [uses, position, last touch]."""
    cache: dict[int, list[int]] = {}
    clock = 0
    out = []
    for request in ids:
        h = 0
        for x in request:
            if x not in cache:
                break
            h += 1
        out.append(h)
        first = {}
        for p, x in enumerate(request):
            first.setdefault(x, p)
        order = list(first) if touch == "head_first" else list(first)[::-1]
        for x in order:
            clock += 1
            if x in cache:
                cache[x] = [cache[x][0] + 1, first[x], clock]
                continue
            if capacity == 0:
                continue
            if len(cache) >= capacity:
                victim = min(cache, key=lambda y: (cache[y][0], -cache[y][1], cache[y][2]))
                del cache[victim]
            cache[x] = [1, first[x], clock]
    return out


def workloads() -> st.SearchStrategy[Workload]:
    return id_workloads(max_n=10, max_id=7)


@settings(max_examples=80, deadline=None)
@given(workloads(), st.integers(0, 7), st.sampled_from(["tail_first", "head_first"]))
def test_matches_naive_scan(wl: Workload, cap: int, touch: str) -> None:
    ids = [wl.block_ids(i).tolist() for i in range(len(wl))]
    got = replay_cache(wl, cap, policy="length_aware", touch=touch)["hit_blocks"].tolist()
    assert got == naive_length_aware(ids, cap, touch)
    ceiling = infinite_hit_ratio(wl).per_request["hit_blocks"].tolist()
    assert all(g <= c for g, c in zip(got, ceiling, strict=True))


def test_curve_accepts_the_policy() -> None:
    wl = wl_of([[1, 2], [1, 2], [3], [4, 5], [1, 2]])
    curve = hit_rate_curve(wl, [2, 5], policy="length_aware")
    # capacity 2: the hand case above (2 + 1); 5 = every distinct id: the
    # ceiling, R1 hits 2 blocks and R4 hits 2
    assert curve["hit_blocks"].tolist() == [3, 4]
    assert (curve["policy"] == "length_aware").all()


def test_conversation_trace_between_lfu_and_the_ceiling(conversation_path: Path) -> None:
    wl = Workload.from_mooncake(conversation_path)
    caps = [1_000, 10_000]
    la = hit_rate_curve(wl, caps, policy="length_aware")["hit_blocks"].to_numpy()
    assert (la > 0).all() and (la <= infinite_hit_ratio(wl).hit_blocks).all()
    assert la[1] >= la[0]
    big = hit_rate_curve(wl, [182_790], policy="length_aware")
    assert big["hit_blocks"].iloc[0] == infinite_hit_ratio(wl).hit_blocks
    with pytest.raises(ValueError, match="length_aware"):
        replay_cache(wl, 10, policy="length-aware")
