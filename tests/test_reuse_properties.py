"""Property tests: one-pass LRU == direct replay, OPT is optimal, curves are monotone."""

from __future__ import annotations

import itertools

import numpy as np
from helpers import hypothesis_settings, id_workloads, partial_block_workload
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.reuse import hit_rate_curve, infinite_hit_ratio, replay_cache
from inferasim.reuse._refs import block_refs
from inferasim.reuse.replay import replay_hits

BS = 4
TOUCHES = ("tail_first", "head_first")
SETTINGS = hypothesis_settings(60)


def workloads() -> st.SearchStrategy[Workload]:
    """Any ids, repeats inside a request included."""
    return id_workloads(max_n=9, max_id=7)


@st.composite
def prefix_closed(draw: st.DrawFn, full: bool = False, max_nodes: int = 12) -> Workload:
    """Requests are root-to-node paths of a random forest: every id always
    has the same predecessor, as in the Mooncake traces."""
    k = draw(st.integers(1, max_nodes))
    parent = [-1] + [draw(st.integers(-1, i - 1)) for i in range(1, k)]
    n = draw(st.integers(1, 9))
    ends = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    ids = []
    for node in ends:
        path = []
        while node != -1:
            path.append(node)
            node = parent[node]
        ids.append(path[::-1])
    rems = [BS] * n if full else draw(st.lists(st.integers(1, BS), min_size=n, max_size=n))
    return partial_block_workload(ids, rems)


def _unique(wl: Workload) -> int:
    return int(np.unique(wl.hash_ids).size)


@SETTINGS
@given(workloads(), st.sampled_from(TOUCHES), st.booleans())
def test_one_pass_equals_replay(wl: Workload, touch: str, full: bool) -> None:
    caps = list(range(_unique(wl) + 2))
    curve = hit_rate_curve(wl, caps, touch=touch, full_blocks_only=full)
    for c, hb, ht in zip(caps, curve["hit_blocks"], curve["hit_tokens"], strict=True):
        r = replay_cache(wl, c, policy="lru", touch=touch, full_blocks_only=full)
        assert r["hit_blocks"].sum() == hb
        assert r["hit_tokens"].sum() == ht


@SETTINGS
@given(workloads(), st.sampled_from(TOUCHES), st.booleans())
def test_curve_bounds_and_monotone(wl: Workload, touch: str, full: bool) -> None:
    u = _unique(wl)
    curve = hit_rate_curve(wl, list(range(u + 3)), touch=touch, full_blocks_only=full)
    ceiling = infinite_hit_ratio(wl, full_blocks_only=full)
    for col in ("block_hit_ratio", "token_hit_ratio"):
        values = curve[col].to_numpy()
        assert (values >= 0).all() and (values <= 1).all()
        assert (np.diff(values) >= 0).all()  # LRU inclusion property
    assert curve["hit_blocks"].iloc[0] == 0
    at_u = curve[curve["capacity_blocks"] >= u]
    assert (at_u["hit_blocks"] == ceiling.hit_blocks).all()
    assert (at_u["hit_tokens"] == ceiling.hit_tokens).all()
    assert (at_u["token_hit_ratio"] == ceiling.token_hit_ratio).all()


@SETTINGS
@given(workloads(), st.sampled_from(("lru", "fifo", "lfu", "opt")), st.integers(0, 8))
def test_no_policy_beats_the_ceiling_per_request(wl: Workload, policy: str, cap: int) -> None:
    ceiling = infinite_hit_ratio(wl).per_request
    r = replay_cache(wl, cap, policy=policy)
    assert (r["hit_blocks"] <= ceiling["hit_blocks"]).all()
    assert (r["hit_blocks"] >= 0).all()
    assert ((r["token_hit_ratio"].fillna(0) >= 0) & (r["token_hit_ratio"].fillna(0) <= 1)).all()
    assert r.index.tolist() == list(range(len(wl)))


@SETTINGS
@given(prefix_closed(), st.sampled_from(TOUCHES))
def test_opt_beats_online_policies(wl: Workload, touch: str) -> None:
    refs = block_refs(wl)
    previous = -1
    for cap in range(_unique(wl) + 1):
        best = replay_hits(refs, cap, "opt", touch).sum()
        for policy in ("lru", "fifo", "lfu"):
            assert best >= replay_hits(refs, cap, policy, touch).sum(), (policy, cap)
        assert best >= previous  # the optimum grows with capacity
        previous = best


@SETTINGS
@given(prefix_closed(full=True), st.sampled_from(TOUCHES))
def test_opt_beats_online_policies_in_tokens_when_blocks_are_full(wl: Workload, touch: str) -> None:
    for cap in range(_unique(wl) + 1):
        best = replay_cache(wl, cap, policy="opt", touch=touch)["hit_tokens"].sum()
        for policy in ("lru", "fifo", "lfu"):
            assert best >= replay_cache(wl, cap, policy=policy, touch=touch)["hit_tokens"].sum()


def brute_force_optimum(ids: list[list[int]], capacity: int) -> int:
    """Most prefix-hit blocks any cache of ``capacity`` can get: after each
    request the cache may become any subset of (cache | request blocks) of
    at most ``capacity`` blocks. Exhaustive dynamic programming over states."""
    states = {frozenset(): 0}
    for request in ids:
        nxt: dict[frozenset[int], int] = {}
        for cache, score in states.items():
            hit = 0
            for x in request:
                if x not in cache:
                    break
                hit += 1
            pool = sorted(cache | set(request))
            for size in range(min(capacity, len(pool)) + 1):
                for keep in itertools.combinations(pool, size):
                    key = frozenset(keep)
                    if nxt.get(key, -1) < score + hit:
                        nxt[key] = score + hit
        states = nxt
    return max(states.values())


@settings(max_examples=40, deadline=None)
@given(prefix_closed(full=True, max_nodes=6), st.integers(1, 3))
def test_opt_equals_exhaustive_optimum(wl: Workload, cap: int) -> None:
    ids = [wl.block_ids(i).tolist() for i in range(len(wl))]
    assert replay_hits(block_refs(wl), cap, "opt").sum() == brute_force_optimum(ids, cap)


@SETTINGS
@given(workloads(), st.integers(0, 9))
def test_same_inputs_same_frames(wl: Workload, cap: int) -> None:
    for policy in ("lru", "lfu", "opt"):
        a = replay_cache(wl, cap, policy=policy)
        b = replay_cache(wl, cap, policy=policy)
        assert a.equals(b)


def naive_replay(ids: list[list[int]], capacity: int, policy: str, touch: str) -> list[int]:
    """Slow, obvious LRU / FIFO / LFU: a dict of (uses, last touch, insertion)
    and a linear scan for the victim."""
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
        distinct = list(dict.fromkeys(request))
        for x in distinct if touch == "head_first" else distinct[::-1]:
            clock += 1
            if x in cache:
                cache[x][0] += 1
                cache[x][1] = clock
                continue
            if capacity == 0:
                continue
            if policy == "lfu" and len(cache) >= capacity:
                del cache[min(cache, key=lambda y: (cache[y][0], cache[y][1]))]
            cache[x] = [1, clock, clock]
            if len(cache) > capacity:
                slot = 1 if policy == "lru" else 2
                del cache[min(cache, key=lambda y: cache[y][slot])]
    return hits


@SETTINGS
@given(
    workloads(),
    st.sampled_from(("lru", "fifo", "lfu")),
    st.sampled_from(TOUCHES),
    st.integers(0, 6),
)
def test_replay_matches_naive_policies(wl: Workload, policy: str, touch: str, cap: int) -> None:
    ids = [wl.block_ids(i).tolist() for i in range(len(wl))]
    got = replay_cache(wl, cap, policy=policy, touch=touch)["hit_blocks"].tolist()
    assert got == naive_replay(ids, cap, policy, touch)
