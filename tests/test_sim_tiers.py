"""Hand-computed KV-tier scenarios with LinearCostModel.

The cost model is ``LinearCostModel(kv_bytes_per_token=1e5)``: a step costs
``5 + 0.05 * prefill_tokens + 0.1 * decode_seqs`` ms. Blocks of 16 tokens,
so a block is ``16 * 1e5 = 1.6e6`` bytes; at 10 GB/s (1e7 bytes per ms) one
block moves in 0.16 ms of link time.
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import runner

from inferasim import Workload
from inferasim.sim import LinearCostModel, Simulator, Tier, Tiers

BS = 16
KVB = 1e5
COST = LinearCostModel(kv_bytes_per_token=KVB)
BLOCK = BS * KVB  # bytes


run = runner(cost_model=COST)


def dram(cap_blocks: int = 64, gbps: float = 10.0, latency_us: float = 0.0, **kw) -> Tier:
    return Tier("dram", cap_blocks * BS, read_gbps=gbps, write_gbps=gbps, latency_us=latency_us, **kw)


@pytest.mark.parametrize("fast", [True, False])
def test_one_dram_hit_exact_ttft(fast):
    # HBM holds 4 blocks. A (t=0, ids 1-3, 48 tokens, 1 output token) is cached
    # after its 7.4 ms prefill (released tail first: LRU order 3, 2, 1).
    # B (t=100, ids 4-7, 64 tokens) needs 4 blocks: 1 free, so 3, 2, 1 are evicted
    # into DRAM (a 4.8 MB write on the DRAM link that B does not wait for):
    # B's TTFT stays 5 + 0.05 * 64 = 8.2 ms.
    # C (t=1000, ids 1, 2, 3, 8, 64 tokens) may reuse (64 - 1) // 16 = 3 blocks:
    # none in HBM, all three in DRAM. Loading them (4.8e6 B at 1e7 B/ms = 0.48 ms
    # + 20 us latency = 0.5 ms) beats recomputing 48 tokens (2.4 ms), so C loads.
    # The 3 blocks it needs evict B's 7, 6, 5 into DRAM: a 0.48 ms write starting
    # with the load on the same link, so both take 0.96 ms; delivered at
    # 1000 + 0.96 + 0.02 = 1000.98. C's 16 remaining tokens then take 5.8 ms:
    # TTFT = 0.98 + 5.8 = 6.78 ms, load_ms = 0.98. Its 16-token chunk needs a 4th
    # block: B's last one (4) goes to DRAM at 1000.98 (DRAM: 7, 6, 5, 4).
    wl = Workload.from_requests(
        [0, 100, 1000], [48, 64, 64], [1, 1, 1], [[1, 2, 3], [4, 5, 6, 7], [1, 2, 3, 8]],
        block_size=BS,
    )
    res = run(wl, kv_tokens=4 * BS, tiers=[dram(latency_us=20.0)], fast=fast)
    a, b, c = (res.requests.iloc[i] for i in range(3))
    assert a.ttft_ms == pytest.approx(7.4)
    assert b.ttft_ms == pytest.approx(8.2) and b.load_ms == 0.0
    assert (c.cached_tokens, c.hbm_hit_tokens, c.dram_hit_tokens) == (48, 0, 48)
    assert c.computed_prefill_tokens == 16
    assert c.load_ms == pytest.approx(0.98)
    assert c.ttft_ms == pytest.approx(6.78)
    assert c.scheduled_ms == 1000.0
    rep = res.replicas.iloc[0]
    assert rep.dram_bytes_read == 3 * BLOCK
    assert rep.dram_bytes_written == 7 * BLOCK  # A's three, then B's four
    assert rep.dram_peak_tokens == 4 * BS
    s = res.summary()
    assert res.tiers.loc["dram", "token_hit_ratio"] == pytest.approx(48 / 176)
    assert s["hbm_token_hit_ratio"] == 0.0
    assert s["token_hit_ratio"] == pytest.approx(48 / 176)


def test_two_concurrent_loads_share_the_link():
    # With write="through" every computed block is also written to DRAM when its
    # prefill ends, so the later HBM evictions of those blocks move no bytes.
    # HBM 8 blocks. A (t=0, ids 1-4) and B (t=100, ids 5-12, evicting A's blocks)
    # leave 1-4 only in DRAM. At t=1000, C (ids 1, 2, 13) and D (ids 3, 4, 14),
    # 48 tokens each, both reuse 2 blocks from DRAM: 3.2 MB = 0.32 ms alone each.
    # Started together on one link they share it: both delivered at 1000.64 (twice
    # as long). One step then prefills both 16-token tails: 5 + 0.05 * 32 = 6.6 ms,
    # so both TTFTs are 0.64 + 6.6 = 7.24 ms.
    ids = [[1, 2, 3, 4], list(range(5, 13)), [1, 2, 13], [3, 4, 14]]
    wl = Workload.from_requests([0, 100, 1000, 1000], [64, 128, 48, 48], [1] * 4, ids,
                                block_size=BS)
    res = run(wl, kv_tokens=8 * BS, tiers=[dram(write="through")])
    c, d = res.requests.iloc[2], res.requests.iloc[3]
    for r in (c, d):
        assert r.dram_hit_tokens == 32
        assert r.load_ms == pytest.approx(0.64)
        assert r.ttft_ms == pytest.approx(7.24)
    # Alone, C's load takes 0.32 ms and its 16 tokens 5.8 ms.
    alone = run(Workload.from_requests([0, 100, 1000], [64, 128, 48], [1] * 3, ids[:3],
                                       block_size=BS),
                kv_tokens=8 * BS, tiers=[dram(write="through")]).requests.iloc[2]
    assert alone.load_ms == pytest.approx(0.32)
    assert alone.ttft_ms == pytest.approx(6.12)
    # bytes: write-through of A's 4, B's 8, and C's and D's computed blocks 13, 14
    # (after their first tokens); the evictions wrote nothing
    rep = res.replicas.iloc[0]
    assert rep.dram_bytes_written == 14 * BLOCK
    assert rep.dram_bytes_read == 4 * BLOCK


@pytest.mark.parametrize("fast", [True, False])
def test_block_evicted_by_one_replica_is_found_in_the_pool_by_another(fast):
    # Round robin: A (t=0) -> replica 0 caches 1-4; B (t=100) -> replica 1 caches
    # block 20; C (t=200) -> replica 0 evicts A's 4 blocks into the shared pool.
    # D (t=1000, ids 1, 2, 3, 30, 64 tokens) -> replica 1, which never saw them:
    # its 3 reusable blocks are in the pool. Loading them over replica 1's link
    # (4.8 MB at 10 GB/s = 0.48 ms + 10 us) beats recomputing 48 tokens (2.4 ms).
    # Replica 1 has 3 free blocks: no eviction, the load is alone on the link:
    # delivered at 1000.49, then 16 tokens in 5.8 ms: TTFT 6.29 ms.
    ids = [[1, 2, 3, 4], [20], [5, 6, 7, 8], [1, 2, 3, 30]]
    wl = Workload.from_requests([0, 100, 200, 1000], [64, 16, 64, 64], [1] * 4, ids,
                                block_size=BS)
    pool = Tier("pool", 1000 * BS, read_gbps=10.0, write_gbps=10.0, latency_us=10.0,
                shared=True, write="evict")
    res = run(wl, replicas=2, routing="round_robin", kv_tokens=4 * BS, tiers=[pool], fast=fast)
    d = res.requests.iloc[3]
    assert d.replica == 1
    assert (d.hbm_hit_tokens, d.pool_hit_tokens) == (0, 48)
    assert d.load_ms == pytest.approx(0.49)
    assert d.ttft_ms == pytest.approx(6.29)
    reps = res.replicas
    assert reps.loc[0, "pool_bytes_written"] == 4 * BLOCK
    assert reps.loc[1, "pool_bytes_read"] == 3 * BLOCK
    # the pool keeps what it serves: A's 4 blocks, then D's chunk evicts block 20
    # from replica 1's HBM into it: 5 blocks at the peak, on every row
    assert reps["pool_peak_tokens"].tolist() == [5 * BS, 5 * BS]
    assert res.timeline["pool_tokens"].max() == 5 * BS


@pytest.mark.parametrize(
    ("gbps", "policy", "loads"),
    [(2.1, "faster", True), (1.9, "faster", False), (1.9, "always", True)],
)
def test_load_versus_recompute_at_the_crossover(gbps, policy, loads):
    # HBM 2 blocks, write="through" (so evictions move no bytes). A (ids 1, 2) then
    # B (ids 3, 4) leave block 1 only in DRAM. C (t=1000, ids 1, 9, 32 tokens) may
    # reuse (32 - 1) // 16 = 1 block. Recomputing it costs 0.05 * 16 = 0.8 ms more
    # prefill; loading 1.6 MB at g GB/s takes 1.6 / g ms: the crossover is 2 GB/s.
    # At 2.1 GB/s (0.762 ms) "faster" loads: TTFT = 1.6 / 2.1 + 5.8. At 1.9 GB/s
    # (0.842 ms) it recomputes: TTFT = 5 + 0.05 * 32 = 6.6; "always" loads anyway.
    ids = [[1, 2], [3, 4], [1, 9]]
    wl = Workload.from_requests([0, 100, 1000], [32, 32, 32], [1] * 3, ids, block_size=BS)
    tier = Tier("dram", 64 * BS, read_gbps=gbps, write_gbps=10.0, write="through")
    res = run(wl, kv_tokens=2 * BS, tiers=Tiers([tier], load_policy=policy))
    c = res.requests.iloc[2]
    if loads:
        assert (c.dram_hit_tokens, c.computed_prefill_tokens) == (16, 16)
        assert c.load_ms == pytest.approx(1.6 / gbps)
        assert c.ttft_ms == pytest.approx(1.6 / gbps + 5.8)
    else:
        assert (c.dram_hit_tokens, c.cached_tokens, c.computed_prefill_tokens) == (0, 0, 32)
        assert c.load_ms == 0.0
        assert c.ttft_ms == pytest.approx(6.6)


def _busy_workload() -> Workload:
    # 40 overlapping requests over 4 prefix families: evictions, loads, decode
    ids, P, arrival = [], [], []
    for i in range(40):
        fam = i % 4
        ids.append([100 * fam + j for j in range(3)] + [1000 + 10 * i + j for j in range(2)])
        P.append(80)
        arrival.append(7.0 * i)
    return Workload.from_requests(arrival, P, [12] * 40, ids, block_size=BS)


COMMON = [
    "replica", "arrival_ms", "scheduled_ms", "first_token_ms", "finish_ms",
    "queue_ms", "ttft_ms", "tpot_ms", "itl_ms", "max_itl_ms", "e2e_ms", "input_len", "output_len", "cached_blocks",
    "cached_tokens", "computed_prefill_tokens", "preemptions", "status", "reason",
]


def test_zero_capacity_tiers_change_nothing():
    wl = _busy_workload()
    kw = dict(replicas=2, routing="kv_cost", kv_tokens=12 * BS)
    base = run(wl, **kw)
    tiers = [dram(cap_blocks=0), Tier("pool", 15, 5.0, 5.0, shared=True)]  # < 1 block each
    zero = run(wl, **kw, tiers=tiers)
    pd.testing.assert_frame_equal(base.requests, zero.requests[COMMON], check_exact=True)
    assert (zero.requests["hbm_hit_tokens"] == zero.requests["cached_tokens"]).all()
    assert (zero.requests[["dram_hit_tokens", "pool_hit_tokens", "load_ms"]] == 0).all().all()
    cols = list(base.replicas.columns)
    pd.testing.assert_frame_equal(base.replicas, zero.replicas[cols], check_exact=True)
    cols = list(base.timeline.columns)
    pd.testing.assert_frame_equal(base.timeline, zero.timeline[cols], check_exact=True)
    assert list(base.requests.columns) == COMMON  # no tiers: today's columns


def test_tiers_find_more_and_hit_columns_add_up():
    wl = _busy_workload()
    kw = dict(replicas=2, routing="kv_cost", kv_tokens=12 * BS)
    base = run(wl, **kw)
    res = run(wl, **kw, tiers=[dram(cap_blocks=8), Tier("pool", 64 * BS, 5.0, 5.0, shared=True)])
    req = res.requests
    assert (req["hbm_hit_tokens"] + req["dram_hit_tokens"] + req["pool_hit_tokens"]
            == req["cached_tokens"]).all()
    assert req["cached_tokens"].sum() > base.requests["cached_tokens"].sum()
    # a request waits for loads only if it found blocks below HBM (at its first
    # admission; a preempted one may load at a later admission)
    waited = (req["load_ms"] > 0) & (req["preemptions"] == 0)
    assert waited.any()
    assert (req.loc[waited, ["dram_hit_tokens", "pool_hit_tokens"]].sum(axis=1) > 0).all()
    s, hits = res.summary(), res.tiers["token_hit_ratio"]
    assert hits["hbm"] == s["hbm_token_hit_ratio"]
    assert hits["hbm"] + hits["dram"] + hits["pool"] == pytest.approx(s["token_hit_ratio"])


def test_bad_tier_input():
    with pytest.raises(ValueError, match="capacity_tokens"):
        Tier("dram", -1, 1.0, 1.0)
    with pytest.raises(ValueError, match="read_gbps"):
        Tier("dram", 10, 0.0, 1.0)
    with pytest.raises(ValueError, match="'hbm'"):
        Tier("hbm", 10, 1.0, 1.0)
    with pytest.raises(ValueError, match="identifier"):
        Tier("host dram", 10, 1.0, 1.0)
    with pytest.raises(ValueError, match="eviction"):
        Tier("dram", 10, 1.0, 1.0, eviction="fifo")
    wl = _busy_workload()
    with pytest.raises(ValueError, match="twice"):
        run(wl, kv_tokens=12 * BS, tiers=[dram(), dram()])
    with pytest.raises(TypeError, match="Tier"):
        run(wl, kv_tokens=12 * BS, tiers=["dram"])
    with pytest.raises(ValueError, match="load_policy"):
        run(wl, kv_tokens=12 * BS, tiers=Tiers([dram()], load_policy="sometimes"))
    with pytest.raises(ValueError, match="kv_bytes_per_token"):
        run(wl, kv_tokens=12 * BS, tiers=[dram()], cost_model=LinearCostModel())
    with pytest.raises(ValueError, match="kv_bytes_per_token"):
        LinearCostModel(kv_bytes_per_token=0)


def test_roofline_knows_its_kv_bytes():
    from inferasim.sim import RooflineCostModel

    wl = _busy_workload()
    res = Simulator(kv_tokens=12 * BS, tiers=[dram()], cost_model=RooflineCostModel()).run(
        wl, progress=False)
    # Llama-3.1-8B: 131072 bytes per token
    rep = res.replicas.iloc[0]
    assert rep.dram_bytes_written % (131072 * BS) == 0 and rep.dram_bytes_written > 0
