"""Routing policies, the router interface and routing collapse."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    ScriptedRouter,
    assert_same,
    busy_workloads,
    hypothesis_settings,
    reference_router,
    runner,
    sim_configs,
    sim_workloads,
    simulate,
)
from hypothesis import given
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


@hypothesis_settings(60, slow=True)
@given(
    wl=st.one_of(sim_workloads(max_n=20), busy_workloads()),
    cfg=sim_configs(),
    replicas=st.integers(2, 8),
    w=st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 1e17, 1e300]),
    temperature=st.sampled_from([0.0, 0.0, 0.0, 2.0]),
)
def test_kv_cost_equals_the_unpruned_formula_on_drawn_fleets(wl, cfg, replicas, w, temperature):
    # The built-in kv_cost walks the replicas in index order and skips each one
    # whose bound w * (blocks - limit) + active exceeds the lowest cost so far; the
    # reference (tests/helpers.py) computes every replica's cost from the public views
    # and breaks ties by (cost, outstanding tokens, index). Small KV memories and
    # shared prefixes make partial matches and ties common; huge weights merge costs
    # (1e17 + 1 == 1e17), up to 8 replicas make the skips depend on the walk order.
    cfg = {**cfg, "replicas": replicas}
    builtin = KvCostRouter(overlap_weight=w, temperature=temperature)
    a = simulate(wl, **{**cfg, "routing": builtin})
    b = simulate(wl, **{**cfg, "routing": reference_router(builtin)})
    assert_same(a, b)


def _cost_tie_run(script_loads: tuple[int, int, int]):
    """The hand-built fleet of the cold/warm tie below; the kv_cost choice and what it saw."""
    # every step costs 1 ms (overhead only): the three replicas step in lockstep
    flat = LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
                           decode_seq_ms=0.0, decode_context_ms=0.0)
    o0, o1, o2 = (x + 2 for x in script_loads)  # outputs: two tokens made by the routing at 2.5
    wl = Workload.from_requests(
        [0, 0, 0, 0, 0, 2.5],
        [16, 16, 10, 20, 20, 32],
        [1, 1, o0, o1, o2, 1],
        [[7], [7], [100], [101, 102], [103, 104], [7, 8]],
        block_size=BS,
    )

    def look(views):
        return [(v.active_blocks, v.prefix_match_blocks, v.outstanding_tokens) for v in views]

    router = ScriptedRouter([1, 2, 0, 1, 2], KvCostRouter(), look)
    res = run(wl, replicas=3, routing=router, cost_model=flat)
    return res.requests["replica"].iloc[5], router.seen[0]


@pytest.mark.parametrize(("loads", "want"), [((10, 10, 10), 0), ((14, 10, 10), 1),
                                             ((14, 12, 10), 2)])
def test_kv_cost_ties_a_cold_replica_with_warm_ones(loads, want):
    # Block size 16, overlap weight 1, steps of 1 ms. At 0: A1, A2 (16 tokens, block 7,
    # one output) on replicas 1 and 2: done at 1, block 7 cached there (evictable);
    # C0 (10 tokens) on replica 0, C1, C2 (20 tokens) on replicas 1, 2, decoding from 1.
    # R (32 tokens, blocks 7, 8) at 2.5: 2 blocks, limit (32 - 1) // 16 = 1 block.
    # C0 holds ceil(12 / 16) = 1 block, C1 and C2 ceil(22 / 16) = 2 (tokens 2 and 3
    # scheduled at 1 and 2). Costs: replica 0 (cold) 2 - 0 + 1 = 3; replicas 1, 2
    # (warm) 2 - 1 + 2 = 3: a three-way tie on cost at the pruning bound of every
    # replica (1 + active <= 3), broken by outstanding tokens (the C's outputs left:
    # 2 of them made by 2.5), then by the lowest index.
    choice, seen = _cost_tie_run(loads)
    assert seen == [(1, 0, loads[0]), (2, 1, loads[1]), (2, 1, loads[2])]
    assert choice == want


def test_longest_match_ties_go_to_the_replica_sent_the_fewest_requests():
    # Three replicas. r0 [1, 2], r1 [3, 4], r2 [5, 6] match nothing anywhere (run 0
    # everywhere): ties go to the fewest requests sent, then the lowest index, so
    # replica 0 (counts 0, 0, 0), 1 (1, 0, 0), 2 (1, 1, 0). r3 [3, 7] matches one
    # block on replica 1 (sent r1's ids) and none elsewhere: replica 1.
    wl = Workload.from_requests(
        [0, 1000, 2000, 3000], [32] * 4, [2] * 4, [[1, 2], [3, 4], [5, 6], [3, 7]], block_size=BS
    )
    assert run(wl, replicas=3, routing="longest_match").requests["replica"].tolist() == [0, 1, 2, 1]
