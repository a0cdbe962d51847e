"""Hand-derived cases pinning the newest mechanisms (issue 26).

Each case is small enough to derive by hand; the derivation is in its
comments and no expected number was read off the simulator:

* a tier whose write bandwidth differs from its read bandwidth, with an
  offload write and a load sharing its link;
* a load delivered in several parts (one per tier), ending at the last part;
* a layerwise handoff whose transfer ends long before its prefill does;
* ``kv_cost`` with a temperature: the frequency of the preferred replica
  against the softmax probability computed here;
* SLO admission exactly at an objective, and the TPOT prediction of a P/D
  fleet read from the decode instance.

Cost model: ``LinearCostModel``, a step costs ``overhead + prefill_token_ms *
prefill_tokens + decode_seq_ms * decode_seqs + decode_context_ms *
decode_context`` ms (defaults 5, 0.05, 0.1, 0).
"""

from __future__ import annotations

import math

import pytest
from helpers import ScriptedRouter, runner

from inferasim import Workload
from inferasim.sim import (
    Disaggregated,
    KvCostRouter,
    LinearCostModel,
    SloAdmission,
    Tier,
)
from inferasim.sim.sequence import Seq
from inferasim.sim.tiers import ReplicaTiers

BS = 16


# --------------------------------------------------------------- tier budgets


@pytest.mark.parametrize("fast", [True, False])
def test_offload_write_at_the_write_bandwidth_shares_the_link_with_a_load(fast):
    # KV bytes per token 1e4: a 16-token block is 1.6e5 bytes. DRAM reads at 2 GB/s
    # (2e6 bytes/ms: 0.08 ms a block) and writes at 1 GB/s (1e6 bytes/ms: 0.16 ms a
    # block). HBM holds 4 blocks.
    # A (t=0, ids 1-3, 48 tokens, 1 out): prefill 5 + 0.05 * 48 = 7.4 ms; its 3 blocks
    #   stay cached (released tail first: LRU order 3, 2, 1), 1 block free.
    # B (t=100, ids 4-6 + an 8-token partial block, 56 tokens): needs 4 blocks, 1 free:
    #   A's 3, 2, 1 go to DRAM (a write B does not wait for). B ends at
    #   100 + 5 + 0.05 * 56 = 107.8 and frees its partial block: cached 4, 5, 6
    #   (LRU order 6, 5, 4) and 1 block free.
    # C (t=1000, ids 1, 2, 3, 8, 64 tokens) may reuse (64 - 1) // 16 = 3 blocks, all in
    #   DRAM: loading them (3 * 0.08 = 0.24 ms, links idle) beats recomputing 48
    #   tokens (2.4 ms). The 3 blocks it takes: 1 free, so B's 6 and 5 are evicted
    #   to DRAM at 1000, a write of 2 * 0.16 = 0.32 ms of link time, on the same link
    #   as the 0.24 ms load. Processor sharing: both at half rate until the load has
    #   had its 0.24 ms at 1000 + 2 * 0.24 = 1000.48 (the write has 0.08 ms left).
    #   load_ms = 0.48; then C's 16 remaining tokens: 5 + 0.8 = 5.8 ms, TTFT 6.28.
    # (A write at the read bandwidth, 0.16 ms, would end first, at 1000.32, and the
    # load at 1000.32 + 0.08 = 1000.40; a load at the write bandwidth, 0.48 ms, would
    # end at 1000 + 2 * 0.32 + 0.16 = 1000.80.)
    kvb = 1e4
    block = BS * kvb
    dram = Tier("dram", 64 * BS, read_gbps=2.0, write_gbps=1.0)
    wl = Workload.from_requests(
        [0, 100, 1000], [48, 56, 64], [1, 1, 1], [[1, 2, 3], [4, 5, 6], [1, 2, 3, 8]],
        block_size=BS,
    )
    run = runner(cost_model=LinearCostModel(kv_bytes_per_token=kvb))
    res = run(wl, kv_tokens=4 * BS, tiers=[dram], fast=fast)
    a, b, c = (res.requests.iloc[i] for i in range(3))
    assert a.ttft_ms == pytest.approx(7.4) and b.ttft_ms == pytest.approx(7.8)
    assert (c.dram_hit_tokens, c.computed_prefill_tokens) == (48, 16)
    assert c.load_ms == pytest.approx(0.48, abs=1e-9)
    assert c.ttft_ms == pytest.approx(6.28, abs=1e-9)
    rep = res.replicas.iloc[0]
    # written: A's 3 blocks, B's 6 and 5 at C's load, B's 4 for C's last chunk
    assert rep.dram_bytes_written == 6 * block
    assert rep.dram_bytes_read == 3 * block


# ------------------------------------------------------- a load in several parts


def test_a_load_from_two_tiers_ends_with_its_last_delivery():
    # One replica with two own tiers: DRAM (read 1 GB/s = 1e6 bytes/ms) and SSD (read
    # 4 GB/s = 4e6 bytes/ms), 1e6-byte blocks (block size 16, 62500 bytes a token).
    # DRAM holds blocks 1-3, SSD block 4 (written straight into it). A sequence loads
    # 3 blocks from DRAM and 1 from SSD at t=10: one transfer per tier, on two links.
    # DRAM: 3e6 bytes / 1e6 = 3 ms -> delivered at 13.0. SSD: 1e6 / 4e6 = 0.25 ms ->
    # 10.25. Both are collected at t=20 (a step that ran past both), SSD's link
    # second: the load ends with its last delivery, 13.0, not the last one taken.
    dram = Tier("dram", 64, read_gbps=1.0, write_gbps=1.0)
    ssd = Tier("ssd", 64, read_gbps=4.0, write_gbps=4.0)
    rt = ReplicaTiers([dram, ssd], {}, BS, 62500.0)
    rt.stores[0].blocks.update({1: 0, 2: 1, 3: 2})
    rt.stores[1].blocks[4] = 0
    assert rt.run([1, 2, 3, 4], 0, 4, {}, None) == (4, [3, 1], [])
    seq = Seq(0, 64, 1, [1, 2, 3, 4], BS)
    rt.take(0, [1, 2, 3])
    rt.take(1, [4])
    seq.loads = rt.start_loads(10.0, [3, 1], seq)
    # (start_loads sets the owner's count of loads and their start)
    assert (seq.loads_left, seq.load_start, seq.load_end) == (2, 10.0, 10.0)
    assert rt.next_delivery(10.0) == pytest.approx(10.25)
    assert rt.collect(20.0) == [seq]
    assert seq.loads_left == 0
    assert seq.load_end == pytest.approx(13.0)
    # collected at each delivery instead, the same end
    seq2 = Seq(1, 64, 1, [1, 2, 3, 4], BS)
    rt2 = ReplicaTiers([dram, ssd], {}, BS, 62500.0)
    seq2.loads = rt2.start_loads(10.0, [3, 1], seq2)
    assert rt2.collect(10.25) == []  # SSD's part is in, DRAM's is not
    assert seq2.loads_left == 1
    assert rt2.collect(13.0) == [seq2] and seq2.load_end == pytest.approx(13.0)


# ---------------------------------------------------------- layerwise handoff


def test_layerwise_handoff_of_a_long_prefill_is_delivered_when_the_prefill_ends():
    # KV bytes per token 1e6. A 320-token prompt (3 out) arrives at 0 on a 1 + 1 P/D
    # fleet with layerwise handoffs over a 32 GB/s link (3.2e7 bytes/ms), no latency.
    # The prefill (one 320-token step) runs 0 -> 5 + 0.05 * 320 = 21.0 ms. The KV,
    # 320 * 1e6 = 3.2e8 bytes, streams from the prefill's start: its transfer ends at
    # 3.2e8 / 3.2e7 = 10.0 ms, long before the prefill. The sequence moves at the
    # later of the two, 21.0: transfer_ms = 21.0 - 0 (from the prefill's start), no
    # decode queue, then 2 decode steps of 5 + 0.1 = 5.1 ms: finish 31.2.
    cost = LinearCostModel(kv_bytes_per_token=1e6)
    wl = Workload.from_requests([0.0], [320], [3], block_size=BS)
    fleet = Disaggregated(1, 1, handoff_gbps=32.0, handoff_latency_us=0.0, layerwise=True)
    res = runner(cost_model=cost, kv_tokens=1000 * BS)(wl, replicas=fleet)
    r = res.requests.iloc[0]
    assert r.ttft_ms == pytest.approx(21.0)
    assert r.handoff_wait_ms == 0.0
    assert r.transfer_ms == pytest.approx(21.0)
    assert r.decode_queue_ms == pytest.approx(0.0, abs=1e-9)
    assert r.finish_ms == pytest.approx(31.2)


# -------------------------------------------------- kv_cost with a temperature


def test_kv_cost_softmax_prefers_the_idle_replica_at_the_computed_frequency():
    # Block size 1024 tokens. The anchor (4096 tokens, 1000 out) is scripted onto
    # replica 1 at t=0: one 4096-token prefill step, 5 + 0.05 * 4096 = 209.8 ms, then
    # decode; from its first decode step it holds ceil(4097 / 1024) = 5 blocks, and at
    # most 4096 + 1000 tokens = 5 blocks until it ends (after t = 209.8 + 999 * 5.1 >
    # 5300 ms). N = 240 probes of 16 tokens (1 block, no hash ids: no match anywhere),
    # 1 out, arrive every 20 ms from t=300 (the last at 300 + 239 * 20 = 5080; the
    # anchor's steps only get longer with probes, so it is still running). A probe
    # takes one step: 5.8 ms on replica 0, on replica 1 at most the
    # rest of a decode step plus 5 + 0.8 + 0.1: under 12 ms. So each probe finds the
    # previous one gone and sees the same fleet: active blocks 0 and 5, costs
    # 1 * (1 - 0) + 0 = 1 and 1 + 5 = 6. With temperature 5 the router draws replica
    # 0 with probability p = 1 / (1 + exp(-(6 - 1) / 5)) = 1 / (1 + e^-1) = 0.731.
    # The draws are independent (one per probe), so the count on replica 0 is
    # Binomial(240, p): mean 175.5, sd sqrt(240 p (1 - p)) = 6.87. The test allows 4
    # sd (a fixed seed makes it deterministic; 4 sd leaves any seed a 6e-5 chance
    # to fail). A flipped sign in the softmax gives p = 0.269 (mean 64.5), uniform
    # draws p = 0.5 (mean 120): both more than 8 sd away.
    T = 5.0
    p = 1.0 / (1.0 + math.exp(-(6 - 1) / T))
    n = 240
    arrival = [0.0] + [300.0 + 20.0 * i for i in range(n)]
    wl = Workload.from_requests(arrival, [4096] + [16] * n, [1000] + [1] * n,
                                block_size=1024)
    router = ScriptedRouter([1], KvCostRouter(temperature=T),
                            look=lambda vs: tuple(v.active_blocks for v in vs))
    res = runner(cost_model=LinearCostModel(), kv_tokens=16 * 1024)(
        wl, replicas=2, routing=router, seed=7)
    assert router.seen == [(0, 5)] * n  # the fleet each probe saw, as derived
    reps = res.requests["replica"].tolist()
    assert reps[0] == 1 and res.requests["finish_ms"][0] > arrival[-1]
    on_idle = reps[1:].count(0)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(on_idle - n * p) <= 4 * sd, (on_idle, n * p, sd)


# ---------------------------------------------------------------- admission


def test_slo_admission_admits_a_prediction_exactly_at_the_objective():
    # Exact binary numbers: a step costs 4 + 0.0625 per prefill token + 2 per decode
    # sequence. A (64 tokens, 2 out) alone: predicted TTFT 4 + 0.0625 * 64 = 8.0 and
    # TPOT 4 + 2 * 1 = 6.0. With ttft_ms=8.0 and tpot_ms=6.0 it is exactly at both
    # objectives: admitted (only a prediction above an objective rejects); its TTFT
    # is 8.0. Just under either objective it is rejected.
    cost = LinearCostModel(overhead_ms=4.0, prefill_token_ms=0.0625, decode_seq_ms=2.0)
    wl = Workload.from_requests([0.0], [64], [2], block_size=BS)
    run = runner(cost_model=cost, kv_tokens=100 * BS)
    at = run(wl, admission=SloAdmission(ttft_ms=8.0, tpot_ms=6.0)).requests.iloc[0]
    assert at.status == "finished" and at.ttft_ms == 8.0
    below = math.nextafter(8.0, 0.0)
    r = run(wl, admission=SloAdmission(ttft_ms=below)).requests.iloc[0]
    assert r.status == "rejected" and r.reason.startswith("admission: predicted TTFT 8.0 ms")
    r = run(wl, admission=SloAdmission(tpot_ms=math.nextafter(6.0, 0.0))).requests.iloc[0]
    assert r.status == "rejected" and r.reason.startswith("admission: predicted TPOT 6.0 ms")


def test_slo_admission_reads_the_tpot_of_the_decode_instance():
    # A 1 + 1 P/D fleet; a step costs 5 + 0.05 per prefill token + 3 per decode
    # sequence + 0.01 per context token; KV bytes 1e6 a token over a 64 GB/s link.
    # A (32 tokens, 200 out) at 0 is prefilled (6.6 ms) and handed off: from ~7.1 it
    # decodes on the decode instance, which is the slower one for a newcomer: B (32
    # tokens) at 100 would join a batch of 2 there, context 33 + (A's, >= 33): TPOT
    # >= 5 + 2 * 3 + 0.01 * 66 = 11.66; the prefill instance decodes nothing: 5 + 3 +
    # 0.01 * 32 = 8.32. With tpot_ms=10 B is rejected (on the decode instance's
    # prediction), and admitted with tpot_ms=20 (A's context at 100 is below
    # 33 + 200, so the prediction is below 5 + 6 + 0.01 * 265 = 13.65).
    cost = LinearCostModel(decode_seq_ms=3.0, decode_context_ms=0.01, kv_bytes_per_token=1e6)
    wl = Workload.from_requests([0.0, 100.0], [32, 32], [200, 2], block_size=BS)
    run = runner(cost_model=cost, kv_tokens=1000 * BS,
                 replicas=Disaggregated(1, 1, handoff_gbps=64.0, handoff_latency_us=0.0))
    seen = []

    def spy(request, views, now):
        seen.append([v.tpot_estimate_ms for v in views])
        return SloAdmission(tpot_ms=10.0)(request, views, now)

    res = run(wl, admission=SloAdmission(tpot_ms=10.0))
    assert res.requests["status"].tolist() == ["finished", "rejected"]
    assert res.requests["reason"][1].startswith("admission: predicted TPOT 1")
    run(wl, admission=spy)
    (p0, d0), (p1, d1) = seen
    assert p0 == pytest.approx(8.32) and p1 == pytest.approx(8.32)
    assert 11.66 <= d1 < 13.65
    res = run(wl, admission=SloAdmission(tpot_ms=20.0))
    assert res.requests["status"].tolist() == ["finished", "finished"]
    assert res.requests["decode_replica"].tolist() == [1, 1]
