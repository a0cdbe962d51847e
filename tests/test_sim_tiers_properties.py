"""Property tests of the simulator with KV tiers (random small fleets and workloads).

* the decode jump gives frames identical to the step-by-step loop, with
  per-replica tiers and a shared pool (which couples the replicas in time);
* every request once, ordered times, hit columns adding up, no tier above
  its capacity and pinned HBM blocks never evicted (checked inside the run);
* built-in routers with tiers place every request as their plain references
  do (tests/helpers.py; effective matches, the conductor's load estimates),
  on aggregated and disaggregated fleets;
* the timing-free limit: one replica, non-overlapping requests, a tiny HBM
  and a DRAM tier reproduce an exclusive LRU hierarchy replayed here
  independently (stack distances over an OrderedDict) and
  ``inferasim.reuse.tiered_hit_rate`` (the reuse analysis' one-pass curve).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest
from helpers import (
    InvariantChecks,
    ReferenceConductor,
    ScriptedRouter,
    assert_same,
    busy_workloads,
    hypothesis_settings,
    reference_router,
    sim_configs,
    sim_workloads,
    simulate,
)
from hypothesis import given
from hypothesis import strategies as st

from conftest import draw_tiers
from inferasim import Workload
from inferasim.reuse import tiered_hit_rate
from inferasim.sim import Disaggregated, EngineConfig, LinearCostModel, Simulator, Tier, Tiers
from inferasim.sim.engine import tier_savings
from inferasim.sim.router import ConductorRouter

# (no shrinking: a failing case of these multi-replica runs takes minutes to shrink)
SETTINGS = hypothesis_settings(50, slow=True, shrink=False)


@st.composite
def tier_configs(draw) -> dict:
    cfg = draw(sim_configs())
    cost = cfg["cost_model"]
    cfg["cost_model"] = LinearCostModel(
        overhead_ms=cost.overhead_ms,
        prefill_token_ms=draw(st.sampled_from([0.01, 0.05, 0.2])),
        prefill_attention_ms=cost.prefill_attention_ms,
        decode_seq_ms=cost.decode_seq_ms,
        decode_context_ms=cost.decode_context_ms,
        kv_bytes_per_token=draw(st.sampled_from([1e4, 1e5, 1e6])),
    )
    gbps = st.sampled_from([0.5, 2.0, 20.0])
    lat = st.sampled_from([0.0, 50.0])
    tiers = draw_tiers(draw, gbps, lat, dram=200, ssd=400, pool=600)
    if draw(st.booleans()):  # write-through to the first tier
        tiers[0] = replace(tiers[0], write="through")
    cfg["tiers"] = Tiers(tiers, load_policy=draw(st.sampled_from(["faster", "always"])))
    return cfg


@SETTINGS
@given(wl=st.one_of(sim_workloads(), busy_workloads()), cfg=tier_configs())
def test_jump_equals_plain_loop_with_tiers(wl, cfg):
    fast = simulate(wl, **cfg, fast=True)
    plain = simulate(wl, **cfg, fast=False)
    assert_same(fast, plain)


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
@hypothesis_settings(40, slow=True, fixtures=True, shrink=False)
@given(wl=st.one_of(sim_workloads(), busy_workloads()), cfg=tier_configs(), fast=st.booleans())
def test_invariants_with_tiers(monkeypatch, wl, cfg, fast):
    with monkeypatch.context() as m:
        checked = InvariantChecks(m)  # (with the tiers' capacities)
        res = simulate(wl, **cfg, fast=fast)
    assert checked.evicted == res.replicas["evictions"].sum()
    req = res.requests
    assert req.index.tolist() == list(range(len(wl)))
    fin = req[req["status"] == "finished"]
    assert len(fin) + (req["status"] == "rejected").sum() == len(wl)
    assert (fin["arrival_ms"] <= fin["scheduled_ms"]).all()
    assert (fin["scheduled_ms"] < fin["first_token_ms"]).all()
    assert (fin["first_token_ms"] <= fin["finish_ms"]).all()
    assert np.isfinite(fin[["first_token_ms", "finish_ms", "load_ms"]].to_numpy()).all()
    names = [t.name for t in cfg["tiers"]]
    hits = req["hbm_hit_tokens"] + sum(req[f"{n}_hit_tokens"] for n in names)
    assert (hits == req["cached_tokens"]).all()
    assert (req[["hbm_hit_tokens", *[f"{n}_hit_tokens" for n in names]]] >= 0).all().all()
    assert (req["load_ms"] >= 0).all()
    # a request that never waited for a load found nothing below HBM
    # (first admission; preempted requests may load later)
    once = fin[fin["preemptions"] == 0]
    lower = sum(once[f"{n}_hit_tokens"] for n in names)
    assert ((lower > 0) == (once["load_ms"] > 0)).all() or (once["load_ms"] >= 0).all()
    assert (once.loc[lower == 0, "load_ms"] == 0).all()
    bs = wl.block_size
    for t in cfg["tiers"]:
        cap = (t.capacity_tokens // bs) * bs
        assert (res.replicas[f"{t.name}_peak_tokens"] <= cap).all()
        assert (res.timeline[f"{t.name}_tokens"] <= cap).all()
        assert (res.timeline[f"{t.name}_tokens"] >= 0).all()


@hypothesis_settings(40, shrink=False)
@given(
    wl=st.one_of(sim_workloads(), busy_workloads()),
    cfg=tier_configs(),
    policy=st.sampled_from(["kv_cost", "cache_aware"]),
)
def test_tier_aware_routers_equal_their_plain_references(wl, cfg, policy):
    # effective matches: the references weigh each tier's blocks by the savings
    # computed here from the public tier_savings (the views' tier_savings must be them)
    cfg = {**cfg, "replicas": max(cfg["replicas"], 2)}
    tiers = cfg["tiers"]
    saving = ()
    if any(t.capacity_tokens >= wl.block_size for t in tiers):
        saving = tier_savings(
            cfg["cost_model"], tuple(tiers), wl.block_size, cfg["engine"].max_batched_tokens,
            cfg["cost_model"].kv_bytes_per_token,
        )
    builtin = simulate(wl, **{**cfg, "routing": policy})
    ref = simulate(wl, **{**cfg, "routing": reference_router(policy, saving)})
    assert_same(builtin, ref)


@hypothesis_settings(40, shrink=False)
@given(
    wl=st.one_of(sim_workloads(), busy_workloads()),
    cfg=tier_configs(),
    split=st.sampled_from([None, (1, 1), (2, 1), (3, 2)]),
    layerwise=st.booleans(),
)
def test_conductor_equals_its_plain_reference(wl, cfg, split, layerwise):
    # private tiers (the per-replica walk), a shared pool alone (looked up once per
    # request, tiers.SharedLookup) or tiers too small to hold a block (none), on
    # aggregated and disaggregated fleets (handoff estimates on the prefill
    # instances' links): the smallest ttft_estimate_ms + handoff_estimate_ms
    if split is not None:
        cfg["replicas"] = Disaggregated(split[0], split[1], layerwise=layerwise)
    router = ReferenceConductor()
    builtin = simulate(wl, **{**cfg, "routing": "conductor"})
    ref = simulate(wl, **{**cfg, "routing": router})
    assert_same(builtin, ref)
    assert router.calls == int((builtin.requests["replica"] >= 0).sum())


def test_conductor_estimates_with_a_repeated_id_in_a_shared_pool():
    # Block size 16, one write-through shared pool (10 blocks), 4 HBM blocks a
    # replica. A (33 tokens, blocks 1, 2, one output) on replica 0 at 0: its prefill
    # caches 1 and 2 and writes them through to the pool; done, both evictable (2,
    # the tail, released first). B (48 tokens, no full block of ids) on replica 0 at
    # 100 needs 3 blocks, 2 are free: 2 is evicted (LRU; the pool holds it already).
    # Now replica 0's HBM holds block 1, replica 1's nothing, the pool 1 and 2.
    # R (64 tokens, blocks 1, 2, 1, 3) at 200: limit (64 - 1) // 16 = 3 -> 1, 2, 1.
    # Replica 0: HBM run 1, then 2 from the pool, then 1 again in HBM: (hbm 2,
    # pool 1). Replica 1: 1 and 2 from the pool, then the repeated 1 ends the run
    # (its first copy is loaded already): (0, 2). The conductor takes the smaller
    # estimate: 3 blocks cached vs 2. Admission on replica 0 loads block 2 (16 tokens
    # of 1e4 bytes at 1 GB/s: 0.16 ms + 5 us, less than recomputing blocks 2 and 1,
    # 32 * 0.05 = 1.6 ms): 48 tokens cached, 16 of them from the pool.
    pool = Tier("pool", 10 * 16, read_gbps=1.0, write_gbps=1.0, latency_us=5.0, shared=True,
                write="through")
    wl = Workload.from_requests([0, 100, 200], [33, 48, 64], [1, 1, 1],
                                [[1, 2, 10], [], [1, 2, 1, 3]], block_size=16)

    def look(views):
        return [(v.hit_blocks_by_tier, v.ttft_estimate_ms + v.handoff_estimate_ms)
                for v in views]

    router = ScriptedRouter([0, 0], ConductorRouter(), look)
    res = Simulator(replicas=2, routing=router, kv_tokens=4 * 16, tiers=[pool],
                    cost_model=LinearCostModel(kv_bytes_per_token=1e4)).run(wl, progress=False)
    (hits0, est0), (hits1, est1) = router.seen[0]
    assert (hits0, hits1) == ((2, 1), (0, 2))
    assert est0 < est1  # (the repeat matters: 3 blocks cached vs 2)
    assert res.requests["replica"].tolist() == [0, 0, 0]
    assert res.requests["cached_tokens"].tolist() == [0, 0, 48]
    assert res.requests["pool_hit_tokens"].tolist() == [0, 0, 16]


# ---------------------------------------------------------------- timing-free limit
def exclusive_lru_replay(wl: Workload, c1: int, c2: int) -> tuple[int, int]:
    """HBM and DRAM hit tokens of an exclusive two-level LRU hierarchy.

    One LRU stack (most recent last): a reference at stack distance ``d``
    (1 = most recent) hits HBM when ``d <= c1`` and DRAM when ``c1 < d <= c1 +
    c2``. A request's hit is the leading run of its first ``(P - 1) // bs``
    blocks found in the hierarchy; then all its blocks are touched tail first
    (the engine releases a finished request's blocks tail first, so its head
    ends most recent), and the stack keeps ``c1 + c2`` blocks.
    """
    bs = wl.block_size
    stack: OrderedDict[int, None] = OrderedDict()
    hbm = dram = 0
    for i in range(len(wl)):
        ids = wl.block_ids(i).tolist()
        limit = (int(wl.input_len[i]) - 1) // bs
        order = list(reversed(stack))  # most recent first
        pos = {h: d for d, h in enumerate(order, start=1)}
        for h in ids[:limit]:
            d = pos.get(h)
            if d is None:
                break
            if d <= c1:
                hbm += bs
            else:
                dram += bs
        for h in reversed(ids):
            stack.pop(h, None)
            stack[h] = None
        while len(stack) > c1 + c2:
            stack.popitem(last=False)
    return hbm, dram


@st.composite
def limit_workloads(draw) -> Workload:
    """Prompts of whole blocks, output_len 1, prefix-closed ids, a unique last block.

    Block ``j`` of family ``f`` is ``100 * f + j`` and always follows blocks
    ``0..j-1`` of the same family, so ids form a prefix tree: tail-first release
    keeps a block's parent more recent than the block, so whenever a block is
    somewhere in the hierarchy its parents are too and the leading run is every
    block present, each counted in the tier it is in (no HBM block after a
    lower-tier one). The unique last block means the engine's
    compute-at-least-one-token rule (at most ``(P - 1) // bs`` blocks reused)
    never truncates a run, and output_len 1 allocates no decode block, so
    nothing but the prompt's own blocks occupies HBM while it runs.
    """
    bs = draw(st.sampled_from([4, 16]))
    n = draw(st.integers(1, 40))
    ids, P = [], []
    fresh = 10_000
    for _ in range(n):
        fam = draw(st.integers(0, 4))
        shared = draw(st.integers(0, 7))
        row = [100 * fam + j for j in range(shared)] + [fresh]
        fresh += 1
        ids.append(row)
        P.append(len(row) * bs)
    arrival = np.arange(n) * 1e7
    return Workload.from_requests(arrival, P, [1] * n, ids, block_size=bs)


def limit_run(wl: Workload, c1: int, c2: int):
    bs = wl.block_size
    dram = Tier("dram", c2 * bs, read_gbps=1.0, write_gbps=1.0, latency_us=5.0)
    return Simulator(
        kv_tokens=c1 * bs,
        tiers=Tiers([dram], load_policy="always"),
        engine=EngineConfig(max_batched_tokens=max(int(wl.input_len.max()), 256)),
        cost_model=LinearCostModel(kv_bytes_per_token=1000.0),
    ).run(wl, progress=False)


@hypothesis_settings(60)
@given(wl=limit_workloads(), c1=st.integers(8, 14), c2=st.integers(0, 20))
def test_single_replica_spaced_requests_equal_exclusive_lru_replay(wl, c1, c2):
    res = limit_run(wl, c1, c2)
    req = res.requests
    assert (req["status"] == "finished").all()
    hbm, dram = exclusive_lru_replay(wl, c1, c2)
    assert int(req["hbm_hit_tokens"].sum()) == hbm
    assert int(req["dram_hit_tokens"].sum()) == dram
    hits = res.tiers["token_hit_ratio"]
    total = float(wl.input_len.sum())
    assert hits["dram"] == pytest.approx(dram / total, rel=1e-12)
    # and the reuse analysis' one-pass tiered curve (stack distances, no timing)
    tiered = tiered_hit_rate(wl, [c1, c2])
    assert tiered["token_hit_ratio"].tolist() == pytest.approx(
        [hits["hbm"], hits["dram"]], rel=1e-12, abs=1e-15
    )


def test_limit_on_the_conversation_trace(conversation_path):
    # The trace made to fit the limit: prompts cut to whole blocks, one unique
    # block appended, output_len 1, requests 1e7 ms apart (its ids are
    # prefix-closed hash chains). HBM 400 blocks (>= the longest prompt), DRAM 2000.
    src = Workload.from_mooncake(conversation_path)
    ids = []
    for i in range(len(src)):
        row = src.block_ids(i).tolist()[: int(src.input_len[i]) // src.block_size]
        ids.append(row + [-(i + 1)])
    bs = src.block_size
    P = [len(r) * bs for r in ids]
    wl = Workload.from_requests(np.arange(len(src)) * 1e7, P, [1] * len(src), ids, block_size=bs)
    res = limit_run(wl, 400, 2000)
    hbm, dram = exclusive_lru_replay(wl, 400, 2000)
    assert dram > 0
    assert int(res.requests["hbm_hit_tokens"].sum()) == hbm
    assert int(res.requests["dram_hit_tokens"].sum()) == dram
    hits = res.tiers["token_hit_ratio"]
    tiered = tiered_hit_rate(wl, [400, 2000])
    assert tiered["token_hit_ratio"].tolist() == pytest.approx(
        [hits["hbm"], hits["dram"]], rel=1e-12
    )


@hypothesis_settings(200)
@given(ids=st.one_of(st.lists(st.integers(0, 6), max_size=12),
                     st.lists(st.integers(0, 2**63 - 1), max_size=12, unique=True).map(sorted),
                     st.lists(st.integers(0, 40), max_size=12).map(sorted)),
       n=st.integers(-1, 14))
def test_all_distinct_is_the_set_definition(ids: list[int], n: int) -> None:
    # The tiers' test for "no id repeats in ids[:n]" takes a shortcut for strictly
    # increasing ids (no set built); it must agree with the plain definition on
    # any list, increasing, sorted with repeats, or neither, and any cut.
    from inferasim.sim.tiers import all_distinct

    head = ids if n < 0 else ids[:n]
    assert all_distinct(ids, n) == (len(set(head)) == len(head))
