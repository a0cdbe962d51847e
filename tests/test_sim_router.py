"""Routing policies, the router interface and routing collapse."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import runner
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.sim import KvCostRouter, LinearCostModel

BS = 16


run = runner(kv_tokens=1000 * BS, cost_model=LinearCostModel())


def test_round_robin_and_random_are_deterministic():
    wl = Workload.from_requests(np.arange(9) * 1000.0, [32] * 9, [2] * 9, block_size=BS)
    assert run(wl, replicas=3, routing="round_robin").requests["replica"].tolist() == [
        0,
        1,
        2,
        0,
        1,
        2,
        0,
        1,
        2,
    ]
    a = run(wl, replicas=3, routing="random", seed=7).requests["replica"]
    b = run(wl, replicas=3, routing="random", seed=7).requests["replica"]
    c = run(wl, replicas=3, routing="random", seed=8).requests["replica"]
    assert a.equals(b)
    assert set(a) <= {0, 1, 2}
    assert not a.equals(c)  # 3**9 outcomes: a different seed differs here


def test_least_loaded_avoids_the_busy_replica():
    # A long request lands on replica 0; the next one, arriving while it runs,
    # goes to the idle replica 1, and the third (after both finished) to 0 again.
    wl = Workload.from_requests([0, 1, 10_000], [256, 16, 16], [200, 2, 2], block_size=BS)
    assert run(wl, replicas=2, routing="least_loaded").requests["replica"].tolist() == [0, 1, 0]


def test_cache_aware_follows_the_prefix():
    # Families A (ids 1,2,...) and B (ids 7,8,...). A0 starts on replica 0 (200 output
    # tokens: it runs ~1 s). B0 arrives at 10 ms: no match anywhere, the tie goes to
    # the least loaded replica 1. Later requests go where their family's blocks are
    # resident (2 reusable blocks = 32 tokens each).
    ids = [[1, 2, 100], [7, 8, 101], [1, 2, 102], [7, 8, 103], [1, 2, 104]]
    wl = Workload.from_requests(
        [0, 10, 5000, 5010, 10_000], [48] * 5, [200, 200, 2, 2, 2], ids, block_size=BS
    )
    res = run(wl, replicas=2, routing="cache_aware")
    assert res.requests["replica"].tolist() == [0, 1, 0, 1, 0]
    assert res.requests["cached_tokens"].tolist() == [0, 0, 32, 32, 32]


def test_cache_aware_collapses_when_every_request_shares_a_first_block():
    # Every request starts with block 0 (like the FAST'25 conversation trace): once
    # replica 0 holds it, every request matches there (1 block) and nowhere else, so
    # pure longest-match routing sends all the traffic to replica 0.
    n = 40
    ids = [[0, 1000 + 10 * i, 1001 + 10 * i] for i in range(n)]
    wl = Workload.from_requests(np.arange(n) * 50.0, [48] * n, [20] * n, ids, block_size=BS)
    aware = run(wl, replicas=4, routing="cache_aware")
    assert aware.replicas["requests"].tolist() == [n, 0, 0, 0]
    assert aware.summary()["max_replica_share"] == 1.0
    # kv_cost counts load too and spreads the same traffic
    kv = run(wl, replicas=4, routing="kv_cost")
    assert kv.summary()["max_replica_share"] < 1.0
    assert (kv.replicas["requests"] > 0).sum() >= 2


def test_kv_cost_formula_by_hand():
    # Replica 0 holds blocks 1,2,3 of A (finished, evictable: active 0). B (ids 1,2,4)
    # costs on replica 0: 1 * (3 - 2) + 0 = 1; on replica 1: 3 + 0 = 3 -> replica 0.
    # With overlap_weight 0 both cost 0 and the tie (equal load) goes to replica 0.
    wl = Workload.from_requests([0, 1000], [48, 48], [2, 2], [[1, 2, 3], [1, 2, 4]], block_size=BS)
    assert run(wl, replicas=2, routing="kv_cost").requests["replica"].tolist() == [0, 0]
    # C arrives while A still runs on replica 0 (A holds 3 + 1 decode blocks = 4 active
    # blocks, 48 + 600 outstanding tokens): cost on 0 = 1 * (3 - 2) + 4 = 5 > 3 on 1.
    wl2 = Workload.from_requests([0, 20], [48, 48], [600, 2], [[1, 2, 3], [1, 2, 4]], block_size=BS)
    assert run(wl2, replicas=2, routing="kv_cost").requests["replica"].tolist() == [0, 1]
    # a heavy overlap weight prefers the warm replica despite its load: 8*1 + 4 < 8*3
    res = run(wl2, replicas=2, routing=KvCostRouter(overlap_weight=8.0))
    assert res.requests["replica"].tolist() == [0, 0]


def test_kv_cost_softmax_is_seeded():
    n = 60
    ids = [[i % 3, 100 + i] for i in range(n)]
    wl = Workload.from_requests(np.arange(n) * 7.0, [32] * n, [30] * n, ids, block_size=BS)
    a = run(wl, replicas=3, routing=KvCostRouter(temperature=5.0), seed=1)
    b = run(wl, replicas=3, routing=KvCostRouter(temperature=5.0), seed=1)
    assert a.requests.equals(b.requests)
    assert (
        run(wl, replicas=3, routing=KvCostRouter(temperature=5.0), seed=2).requests["replica"].tolist()
        != a.requests["replica"].tolist()
    )


def test_callable_router_sees_views_and_bad_answers_are_clear_errors():
    seen = []

    def router(request, replicas):
        seen.append(
            (request.request_id, request.hash_ids, [(v.queue_len, v.running) for v in replicas])
        )
        return len(seen) % 2

    wl = Workload.from_requests([0, 0], [32, 32], [5, 5], [[1, 2], [1, 3]], block_size=BS)
    res = run(wl, replicas=2, routing=router)
    assert res.requests["replica"].tolist() == [1, 0]
    # request 1's hash ids: only (32-1)//16 = 1 leading full block can be reused
    assert seen[0][1] == (1, 2) and seen[1][0] == 1
    # at t=0 request 0 is queued on replica 1 (no step has started yet)
    assert seen[1][2] == [(0, 0), (1, 0)]

    for bad in (2, -1, "0", 1.5, None):
        with pytest.raises(ValueError, match="routing returned"):
            run(wl, replicas=2, routing=lambda r, v, bad=bad: bad)


def test_view_attributes():
    got = {}

    def router(request, replicas):
        if request.request_id == 1:
            v = replicas[0]
            got.update(
                index=v.index,
                queue=v.queue_len,
                running=v.running,
                outstanding=v.outstanding_tokens,
                kv_running=v.kv_running_blocks,
                kv_cached=v.kv_cached_blocks,
                capacity=v.kv_capacity_blocks,
                usage=v.kv_usage,
                active=v.active_blocks,
                match=v.prefix_match_blocks,
            )
        return 0

    # A (48 tokens, ids 1,2,3, 10 output tokens) starts at 0: prefill 0 -> 7.4 ms
    # (token 1), then decode steps of 5.1 ms ending at 12.5, 17.6, 22.7. Routing B at
    # t=20 sees two decode steps done (3 tokens generated, 7 outstanding) and the
    # third started: it computes token 50, so A holds ceil(51/16) = 4 blocks (blocks
    # 1,2,3 pinned in the cache plus one private). B (ids 1,2,4) can reuse 2 blocks.
    wl = Workload.from_requests([0, 20], [48, 48], [10, 2], [[1, 2, 3], [1, 2, 4]], block_size=BS)
    run(wl, replicas=1, routing=router, kv_tokens=50 * BS)
    assert got == dict(
        index=0,
        queue=0,
        running=1,
        outstanding=7,
        kv_running=4,
        kv_cached=0,
        capacity=50,
        usage=4 / 50,
        active=4,
        match=2,
    )


def test_unknown_policy_and_router_instances():
    wl = Workload.from_requests([0], [32], [2], block_size=BS)
    with pytest.raises(ValueError, match="routing must be one of"):
        run(wl, routing="nearest")
    with pytest.raises(TypeError, match="policy name or a callable"):
        run(wl, routing=42)
    # a configured router instance works and is reset per run
    r = KvCostRouter(overlap_weight=2.0)
    assert run(wl, replicas=2, routing=r).requests["replica"].tolist() == [0]


def test_longest_match_collapses_when_every_request_shares_its_first_block():
    # 40 requests, 10 ms apart, each [0, fresh, fresh]: block 0 is shared by all.
    # longest_match remembers it sent block 0 to replica 0 (request 0), so every
    # later request matches 1 block there and 0 elsewhere: all land on replica 0.
    # Each request decodes 50 tokens at >= 6 ms a step (~300 ms), so load piles
    # up on replica 0; kv_cost adds active blocks to the cost and spreads them.
    from inferasim import LinearCostModel, Simulator, Workload

    n = 40
    ids = [[0, 2 * i + 1, 2 * i + 2] for i in range(n)]
    wl = Workload.from_requests([10.0 * i for i in range(n)], [96] * n, [50] * n, ids,
                                block_size=32)
    cost = LinearCostModel(overhead_ms=5.0, prefill_token_ms=0.1, decode_seq_ms=1.0)
    collapsed = Simulator(4, routing="longest_match", kv_tokens=400 * 32, cost_model=cost).run(
        wl, progress=False)
    assert set(collapsed.requests["replica"]) == {0}
    assert collapsed.summary()["max_replica_share"] == 1.0
    spread = Simulator(4, routing="kv_cost", kv_tokens=400 * 32, cost_model=cost).run(
        wl, progress=False)
    assert spread.requests["replica"].nunique() > 1


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 8),
    w=st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.0, 2.0, 1e17, 1e300]),
)
def test_kv_cost_fast_path_equals_the_formula_on_random_states(data, n, w):
    # The engine's _fast (pruned walks over the sorted active counts, ties found by
    # list.index; the unpruned pass when huge weights merge costs: 1e17 + 1 == 1e17)
    # against __call__'s formula on views: few ids, small active counts and loads, so
    # partial matches and ties (on cost, then on load) are common.
    from types import SimpleNamespace as NS

    from inferasim.sim.router import Request

    refs = [data.draw(st.sets(st.integers(0, 4))) for _ in range(n)]
    active = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    loads = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    ids = data.draw(st.lists(st.integers(0, 5), max_size=4))
    limit = data.draw(st.integers(0, len(ids)))
    input_len = BS * (limit + data.draw(st.integers(0, 2))) + data.draw(st.integers(1, BS))
    router = KvCostRouter(overlap_weight=w)
    router.block_size = BS
    reps = [
        NS(cache=NS(ref=dict.fromkeys(ref, 1)), outstanding_at=lambda t, x=x: x)
        for ref, x in zip(refs, loads, strict=True)
    ]

    def match(ref):
        m = 0
        while m < limit and ids[m] in ref:
            m += 1
        return m

    views = [
        NS(index=i, prefix_match_blocks=match(refs[i]), active_blocks=active[i],
           outstanding_tokens=loads[i])
        for i in range(n)
    ]
    want = router(Request(0, 0.0, input_len, 1, tuple(ids)), views)
    assert router._fast(input_len, ids, limit, reps, 0.0, active) == want


def test_kv_cost_fast_path_ties_a_cold_replica_with_warm_ones():
    # 2 blocks (32 tokens of 16), limit 1, overlap weight 1. Replica 0: cold, 0 active
    # -> cost 2 - 0 + 0 = 2; replicas 1 and 2 hold block 7, 1 active -> 2 - 1 + 1 = 2:
    # a three-way tie on cost; equal loads -> the lowest index, 0. With replica 0
    # the busiest (load 5) -> replica 1 (load 1) over replica 2 (load 1, higher index).
    from types import SimpleNamespace as NS

    router = KvCostRouter()
    router.block_size = BS
    for loads, want in (([1, 1, 1], 0), ([5, 1, 1], 1), ([5, 3, 1], 2)):
        reps = [
            NS(cache=NS(ref=ref), outstanding_at=lambda t, x=x: x)
            for ref, x in zip(({}, {7: 1}, {7: 0}), loads, strict=True)
        ]
        assert router._fast(32, [7, 8], 1, reps, 0.0, [0, 1, 1]) == want


@settings(max_examples=200, deadline=None)
@given(active=st.lists(st.integers(0, 5), min_size=1, max_size=80))
def test_kv_cost_walk_order_is_the_stable_sort_by_active(active):
    # The kv_cost fast path walks the replicas least active first, ties in index
    # order: its insertion sort (small fleets; sorted() above 64) against sorted().
    from inferasim.sim.routing_fast import _by_active

    assert _by_active(active) == sorted(range(len(active)), key=active.__getitem__)
