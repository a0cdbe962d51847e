"""Hand-computed simulator scenarios with LinearCostModel.

Unless a test says otherwise the cost model is the default
``LinearCostModel()``: a step costs ``5 + 0.05 * prefill_tokens + 0.1 *
decode_seqs`` ms. Block size 16 tokens.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import runner

from inferasim import Workload
from inferasim.sim import EngineConfig, LinearCostModel
from inferasim.sim.recorder import Recorder

BS = 16
LIN = LinearCostModel()  # 5 ms + 0.05 ms/prefill token + 0.1 ms/decode seq
run = runner(kv_tokens=1000 * BS, cost_model=LIN)


def row(res, i):
    return res.requests.iloc[i]


def test_one_request():
    # P=32 tokens, O=3 tokens. Step 1 prefills 32 tokens: 5 + 0.05*32 = 6.6 ms and
    # samples token 1. Steps 2 and 3 decode one sequence each: 5 + 0.1 = 5.1 ms.
    wl = Workload.from_requests([100.0], [32], [3], [[1, 2]], block_size=BS)
    r = row(run(wl), 0)
    assert r.scheduled_ms == 100.0 and r.queue_ms == 0.0
    assert r.first_token_ms == pytest.approx(106.6)
    assert r.ttft_ms == pytest.approx(6.6)
    assert r.finish_ms == pytest.approx(100 + 6.6 + 2 * 5.1)
    assert r.tpot_ms == pytest.approx(5.1)
    assert r.e2e_ms == pytest.approx(16.8)
    assert (r.cached_blocks, r.cached_tokens, r.computed_prefill_tokens) == (0, 0, 32)
    assert r.status == "finished" and r.replica == 0


def test_shared_prefix_far_apart_skips_cached_blocks():
    # A (t=0) computes blocks 1,2,3 (48 tokens); they are cached when its prefill
    # ends at 7.4 ms. B (t=1000) has ids 1,2,4: it reuses blocks 1 and 2 (32 tokens)
    # and computes 16: TTFT = 5 + 0.05*16 = 5.8 ms.
    wl = Workload.from_requests([0, 1000], [48, 48], [2, 2], [[1, 2, 3], [1, 2, 4]], block_size=BS)
    res = run(wl)
    a, b = row(res, 0), row(res, 1)
    assert a.ttft_ms == pytest.approx(7.4) and a.cached_tokens == 0
    assert (b.cached_blocks, b.cached_tokens, b.computed_prefill_tokens) == (2, 32, 16)
    assert b.ttft_ms == pytest.approx(5.8)
    # cluster ratios: 2 of 6 prompt blocks, 32 of 96 tokens
    s = res.summary()
    assert s["block_hit_ratio"] == pytest.approx(2 / 6)
    assert s["token_hit_ratio"] == pytest.approx(32 / 96)


def test_fully_cached_prompt_recomputes_its_last_block():
    # B repeats A's prompt exactly. As in vLLM at least one token must be computed,
    # so at most (48 - 1) // 16 = 2 blocks are reused and the last block (16 tokens)
    # is recomputed: TTFT 5.8 ms.
    wl = Workload.from_requests([0, 1000], [48, 48], [2, 2], [[1, 2, 3], [1, 2, 3]], block_size=BS)
    b = row(run(wl), 1)
    assert (b.cached_blocks, b.computed_prefill_tokens) == (2, 16)
    assert b.ttft_ms == pytest.approx(5.8)


def test_partial_last_block_is_never_cached():
    # A has 40 tokens: blocks 1, 2 full and block 3 holding 8 tokens. B (ids 1,2,3,
    # 56 tokens) can reuse 1 and 2 only: the partial block 3 was never cached.
    wl = Workload.from_requests(
        [0, 1000], [40, 56], [1, 1], [[1, 2, 3], [1, 2, 3, 4]], block_size=BS
    )
    b = row(run(wl), 1)
    assert (b.cached_blocks, b.cached_tokens) == (2, 32)


def test_same_prefix_arriving_together_hits_only_when_cached_on_schedule():
    # Both arrive at 0 and are admitted into the same step. With blocks cached when
    # their step ends (EngineConfig.whole_blocks()) A's blocks are still being
    # computed, so B finds nothing: one step prefills 96 tokens, 5 + 4.8 = 9.8 ms.
    # With the default (vLLM: cached when scheduled) A's chunk registers blocks 1, 2
    # as it is scheduled and B, admitted next, reuses them (limit (48 - 1) // 16 = 2
    # blocks, 32 tokens) and computes 16: 48 + 16 = 64 tokens, 5 + 3.2 = 8.2 ms.
    wl = Workload.from_requests([0, 0], [48, 48], [2, 2], [[1, 2, 3], [1, 2, 4]], block_size=BS)
    late = run(wl, engine=EngineConfig.whole_blocks())
    assert late.requests["cached_tokens"].tolist() == [0, 0]
    assert late.requests["ttft_ms"].tolist() == pytest.approx([9.8, 9.8])
    early = run(wl)
    assert early.requests["cached_tokens"].tolist() == [0, 32]
    assert early.requests["ttft_ms"].tolist() == pytest.approx([8.2, 8.2])


def test_block_becomes_reusable_when_its_chunk_completes():
    # max_batched_tokens=32: A (48 tokens, ids 1,2,3) prefills 32 tokens in step 1
    # (0 -> 6.6 ms); blocks 1 and 2 enter the cache at 6.6. B (32 tokens, ids 1,5)
    # arrives at 1.0 and is admitted at 6.6 beside A's last 16-token chunk: it reuses
    # block 1 (at most (32-1)//16 = 1 block) and computes 16 tokens. Step 2 prefills
    # 32 tokens: 6.6 -> 13.2. B's TTFT = 13.2 - 1.0 = 12.2 ms.
    wl = Workload.from_requests([0, 1.0], [48, 32], [1, 1], [[1, 2, 3], [1, 5]], block_size=BS)
    res = run(wl, engine=EngineConfig(max_num_seqs=4, max_batched_tokens=32))
    b = row(res, 1)
    assert b.scheduled_ms == pytest.approx(6.6)
    assert b.cached_tokens == 16
    assert b.ttft_ms == pytest.approx(12.2)
    assert row(res, 0).ttft_ms == pytest.approx(13.2)


def test_prefix_on_another_replica_does_not_help():
    # Round robin puts B on replica 1, whose cache is empty.
    wl = Workload.from_requests([0, 1000], [48, 48], [2, 2], [[1, 2, 3], [1, 2, 4]], block_size=BS)
    res = run(wl, replicas=2, routing="round_robin")
    assert res.requests["replica"].tolist() == [0, 1]
    assert res.requests["cached_tokens"].tolist() == [0, 0]


def _eviction_workload():
    # A: blocks 1,2,3; B: blocks 4,5,6; C: 32 tokens, ids 1,7 (may reuse block 1).
    return Workload.from_requests(
        [0, 1000, 2000],
        [48, 48, 32],
        [1, 1, 1],
        [[1, 2, 3], [4, 5, 6], [1, 7]],
        block_size=BS,
    )


def test_lru_evicts_tail_first_and_keeps_the_head():
    # 4 KV blocks. A finishes at its prefill (one output token) and releases its
    # blocks tail first: LRU order 3, 2, 1. B needs 3 blocks with 1 free: evicts 3
    # and 2. C reuses block 1 (16 tokens) and needs one new block: B's released
    # blocks 6, 5, 4 sit behind block 1 in LRU order, block 1 is revived first, so
    # block 6 goes. Evictions: 2 + 1 = 3.
    res = run(_eviction_workload(), kv_tokens=4 * BS)
    assert res.requests["cached_tokens"].tolist() == [0, 0, 16]
    assert res.replicas["evictions"].tolist() == [3]
    # C: 16 tokens computed: TTFT 5 + 0.8
    assert row(res, 2).ttft_ms == pytest.approx(5.8)


def test_fifo_evicts_the_oldest_block_first():
    # FIFO evicts in insertion order: B evicts blocks 1 and 2, so C misses.
    res = run(_eviction_workload(), kv_tokens=4 * BS, eviction="fifo")
    assert res.requests["cached_tokens"].tolist() == [0, 0, 0]
    # B evicts 2; C needs 2 blocks with 0 free: evicts 3 (oldest) and 4. Total 4.
    assert res.replicas["evictions"].tolist() == [4]


def test_lfu_keeps_the_block_with_hits_where_lru_loses_it():
    # 4 KV blocks, every prompt 2 or 3 full blocks, one output token (a request
    # releases its blocks, tail first, when its prefill ends).
    # A: ids 1,2            -> cache LRU order [2, 1]
    # B: ids 1,3 (hits 1)   -> no eviction (2 free); order [2, 3, 1]; block 1 has 1 hit
    # C: ids 4,5            -> 1 free, evicts 1 block: 2 under both policies;
    #                          order [3, 1, 5, 4]
    # D: ids 6,7,8          -> 0 free, evicts 3 blocks: LRU 3, 1, 5 (loses block 1);
    #                          LFU the zero-hit blocks 3, 5, 4 (keeps block 1)
    # E: ids 1,9            -> reuses block 1 (16 tokens) under LFU only.
    wl = Workload.from_requests(
        [0, 1000, 2000, 3000, 4000],
        [32, 32, 32, 48, 32],
        [1, 1, 1, 1, 1],
        [[1, 2], [1, 3], [4, 5], [6, 7, 8], [1, 9]],
        block_size=BS,
    )
    lfu = run(wl, kv_tokens=4 * BS, eviction="lfu")
    lru = run(wl, kv_tokens=4 * BS, eviction="lru")
    assert lfu.requests["cached_tokens"].tolist() == [0, 16, 0, 0, 16]
    assert lru.requests["cached_tokens"].tolist() == [0, 16, 0, 0, 0]


def test_preemption_of_the_most_recent_sequence():
    # 4 KV blocks, no hash ids. A and B (16-token prompts, 40 output tokens) are
    # admitted together: step 1 prefills 32 tokens (6.6 ms), 1 block each.
    # Decode step k (k = 0, 1, ...) computes token 16 + k of each sequence and needs
    # a new block when 16 + k is a multiple of 16: k = 0 (blocks 2 and 2: 4 in use)
    # and k = 16 (none free). Steps k = 0..15 decode both: 16 * 5.2 = 83.2 ms -> 89.8.
    # At 89.8, B (admitted last) is preempted with 17 tokens generated; A runs alone:
    # k = 16..38, 23 steps of 5.1 ms -> A finishes at 89.8 + 117.3 = 207.1 with 40
    # tokens. B (needs 3 blocks for its 33 tokens, only 0 or 1 free) waits until then,
    # recomputes 16 + 17 = 33 tokens (5 + 1.65 = 6.65 ms -> 213.75, token 18), then
    # decodes 22 more tokens: 22 * 5.1 = 112.2 -> 325.95.
    wl = Workload.from_requests([0, 0], [16, 16], [40, 40], block_size=BS)
    res = run(wl, kv_tokens=4 * BS)
    a, b = row(res, 0), row(res, 1)
    assert a.preemptions == 0 and b.preemptions == 1
    assert res.replicas["preemptions"].tolist() == [1]
    assert a.ttft_ms == pytest.approx(6.6) and b.ttft_ms == pytest.approx(6.6)
    assert a.finish_ms == pytest.approx(207.1)
    assert b.finish_ms == pytest.approx(325.95)
    assert b.computed_prefill_tokens == 16 + 33
    assert res.replicas["peak_kv_tokens"].tolist() == [4 * BS]  # 4 pages of 16 tokens


def test_rejected_request_stays_in_the_frame():
    # 4 KV blocks hold 64 tokens: a 100-token prompt can never fit.
    wl = Workload.from_requests([0, 1], [100, 16], [4, 4], block_size=BS)
    res = run(wl, kv_tokens=4 * BS)
    r = row(res, 0)
    assert r.status == "rejected" and r.replica == -1
    assert "needs 7 KV blocks" in r.reason and "holds 4" in r.reason
    assert math.isnan(r.ttft_ms) and math.isnan(r.finish_ms)
    assert row(res, 1).status == "finished"
    assert res.summary()["rejected"] == 1


def test_request_needing_decode_blocks_beyond_memory_is_rejected():
    # 64-token prompt fits 4 blocks but its 2nd..10th output tokens need a 5th block.
    wl = Workload.from_requests([0], [64], [10], block_size=BS)
    assert row(run(wl, kv_tokens=4 * BS), 0).status == "rejected"
    assert row(run(wl, kv_tokens=5 * BS), 0).status == "finished"


def test_chunked_versus_whole_prefill():
    # 48 tokens with max_batched_tokens=16: chunked = 3 steps of 5.8 ms (17.4);
    # unchunked = one step of 5 + 2.4 = 7.4 ms (a prompt above the budget runs alone).
    wl = Workload.from_requests([0], [48], [1], block_size=BS)
    chunked = run(wl, engine=EngineConfig(max_num_seqs=4, max_batched_tokens=16))
    whole = run(wl, engine=EngineConfig(max_num_seqs=4, max_batched_tokens=16, chunked_prefill=False))
    assert row(chunked, 0).ttft_ms == pytest.approx(17.4)
    assert row(whole, 0).ttft_ms == pytest.approx(7.4)


def test_queueing_behind_max_num_seqs():
    # max_num_seqs=1: B waits for A (one step of 6.6 ms, 1 output token).
    wl = Workload.from_requests([0, 0], [32, 32], [1, 1], block_size=BS)
    res = run(wl, engine=EngineConfig(max_num_seqs=1, max_batched_tokens=64))
    b = row(res, 1)
    assert b.queue_ms == pytest.approx(6.6)
    assert b.ttft_ms == pytest.approx(13.2)


def test_prefill_attention_and_decode_context_are_priced():
    # prefill_attention_ms=0.001: 32 tokens from scratch attend 32*33/2 = 528 pairs.
    # decode_context_ms=0.01: the decode step of a 32-token prompt reads 33 tokens.
    m = LinearCostModel(
        overhead_ms=1.0,
        prefill_token_ms=0.0,
        prefill_attention_ms=0.001,
        decode_seq_ms=0.0,
        decode_context_ms=0.01,
    )
    wl = Workload.from_requests([0], [32], [2], block_size=BS)
    r = row(run(wl, cost_model=m), 0)
    assert r.ttft_ms == pytest.approx(1 + 0.528)
    assert r.finish_ms - r.first_token_ms == pytest.approx(1 + 0.33)


def test_workload_without_hash_ids_runs_without_reuse():
    wl = Workload.from_requests([0, 1000], [48, 48], [2, 2], block_size=BS)
    res = run(wl)
    assert res.requests["cached_tokens"].tolist() == [0, 0]
    assert res.requests["ttft_ms"].tolist() == pytest.approx([7.4, 7.4])


def test_summary_percentiles_and_goodput():
    # Four lone requests 1 s apart; TTFTs 5 + 0.05 * P for P = 16, 32, 48, 64.
    wl = Workload.from_requests(
        [0, 1000, 2000, 3000], [16, 32, 48, 64], [1, 1, 1, 1], block_size=BS
    )
    s = run(wl).summary(slo_ttft_ms=7.0)
    ttft = np.array([5.8, 6.6, 7.4, 8.2])
    assert s["ttft_ms_mean"] == pytest.approx(ttft.mean())
    assert s["ttft_ms_p50"] == pytest.approx(np.percentile(ttft, 50))
    assert s["ttft_ms_p99"] == pytest.approx(np.percentile(ttft, 99))
    assert s["slo_attainment"] == 0.5
    # duration: 0 -> 3000 + 8.2 ms
    assert s["duration_ms"] == pytest.approx(3008.2)
    assert s["goodput_rps"] == pytest.approx(2 / 3.0082)
    assert s["throughput_rps"] == pytest.approx(4 / 3.0082)
    assert not s["saturated"]


def test_saturation_flag():
    # 400 requests every 5 ms, each needing a 30-ms prefill alone (max_num_seqs=1):
    # the queue grows without bound.
    n = 400
    wl = Workload.from_requests(np.arange(n) * 5.0, [500] * n, [1] * n, block_size=BS)
    s = run(wl, engine=EngineConfig(max_num_seqs=1, max_batched_tokens=1024)).summary()
    assert s["saturated"]
    light = Workload.from_requests(np.arange(n) * 100.0, [500] * n, [1] * n, block_size=BS)
    assert not run(light, engine=EngineConfig(max_num_seqs=1, max_batched_tokens=1024)).summary()["saturated"]


def test_itl_and_largest_gap_of_a_mixed_batch():
    # A (32 tokens, 5 out) and B (64 tokens, 3 out) arrive at 0; C (16 tokens, 1 out)
    # at 5. Step 1 prefills 96 tokens: 5 + 4.8 = 9.8 (first tokens of A and B).
    # Step 2 prefills C's 16 tokens and decodes A and B: 5 + 0.8 + 0.2 = 6.0 -> 15.8
    # (C's only token). Step 3 decodes A, B: 5.2 -> 21.0 (B done). Steps 4, 5 decode A:
    # 5.1 each -> 26.1, 31.2.
    # A: gaps 6.0, 5.2, 5.1, 5.1 -> ITL (31.2 - 9.8) / 4 = 5.35, largest 6.0.
    # B: gaps 6.0, 5.2 -> ITL 5.6, largest 6.0. C: one token -> NaN.
    wl = Workload.from_requests([0, 0, 5], [32, 64, 16], [5, 3, 1], block_size=BS)
    req = run(wl).requests
    assert req["itl_ms"].tolist()[:2] == pytest.approx([5.35, 5.6])
    assert req["max_itl_ms"].tolist()[:2] == pytest.approx([6.0, 6.0])
    assert math.isnan(req["itl_ms"][2]) and math.isnan(req["max_itl_ms"][2])
    # AIPerf's definition, from the frame's own columns
    a = req.iloc[0]
    assert a.itl_ms == pytest.approx((a.e2e_ms - a.ttft_ms) / (a.output_len - 1))


@pytest.mark.parametrize("fast", [True, False])
def test_largest_gap_spans_a_preemption(fast):
    # The preemption scenario above: B's token 17 comes at 89.8, then B is preempted
    # and its token 18 comes from the recompute at 213.75: a gap of 123.95 ms. A's
    # steps take 5.2 ms while both decode, then 5.1 ms: its largest gap is 5.2.
    wl = Workload.from_requests([0, 0], [16, 16], [40, 40], block_size=BS)
    req = run(wl, kv_tokens=4 * BS, fast=fast).requests
    assert req["max_itl_ms"].tolist() == pytest.approx([5.2, 123.95])
    assert req["itl_ms"].tolist() == pytest.approx([(207.1 - 6.6) / 39, (325.95 - 6.6) / 39])


def test_length_aware_evicts_the_deepest_block_first():
    # 5 KV blocks, one output token each (a request releases its blocks, tail first,
    # when its prefill ends); no block is ever hit before D, so hits tie at 0.
    # A: ids 4,5 (positions 0, 1)      -> evictable in the order 5, 4
    # B: ids 1,2,3 (positions 0, 1, 2) -> order 5, 4, 3, 2, 1 (cache full)
    # C: ids 6,7 needs 2 blocks, 0 free:
    #    lfu (ties by LRU order) evicts 5 and 4;
    #    length_aware evicts the deepest: 3 (position 2), then of 5 and 2 (position 1)
    #    the one evictable first, 5. Block 4 stays.
    # D: ids 4,9 reuses block 4 (16 tokens) under length_aware only.
    wl = Workload.from_requests(
        [0, 1000, 2000, 3000],
        [32, 48, 32, 32],
        [1, 1, 1, 1],
        [[4, 5], [1, 2, 3], [6, 7], [4, 9]],
        block_size=BS,
    )
    la = run(wl, kv_tokens=5 * BS, eviction="length_aware")
    lfu = run(wl, kv_tokens=5 * BS, eviction="lfu")
    assert la.requests["cached_tokens"].tolist() == [0, 0, 0, 16]
    assert lfu.requests["cached_tokens"].tolist() == [0, 0, 0, 0]


def test_length_aware_keeps_a_block_with_hits_over_a_shallower_one():
    # Hits come first: in the LFU scenario above, block 1 (1 hit) survives D's three
    # evictions under length_aware as under lfu, so E reuses it.
    wl = Workload.from_requests(
        [0, 1000, 2000, 3000, 4000],
        [32, 32, 32, 48, 32],
        [1, 1, 1, 1, 1],
        [[1, 2], [1, 3], [4, 5], [6, 7, 8], [1, 9]],
        block_size=BS,
    )
    la = run(wl, kv_tokens=4 * BS, eviction="length_aware")
    assert la.requests["cached_tokens"].tolist() == [0, 16, 0, 0, 16]


def test_recorder_largest_gaps_from_decode_step_ends():
    # decode steps 1-4 end at 1, 3, 6 and 10 ms (a stretch's list, one step alone,
    # another list). An episode in the group from step 0 to 3 whose token before
    # came at 0.5 ms produced tokens at 1, 3 and 6: gaps 0.5, 2 and 3, largest 3;
    # one from step 2 to 4 with its token before at 2.5: tokens at 6 and 10, gaps
    # 3.5 and 4, largest 4
    rec = Recorder(1.0, 0.0)
    rec.steps_ended([1.0, 3.0])
    rec.step_ended(6.0)
    rec.steps_ended([10.0])
    rec.episode(7, 0, 3, 0.5)
    rec.episode(9, 2, 4, 2.5)
    assert (rec.end_of(0), rec.end_of(3), rec.end_of(4)) == (0.0, 6.0, 10.0)
    rids, gaps = rec.gap_maxima()
    assert rids.tolist() == [7, 9] and gaps.tolist() == [3.0, 4.0]
    rec.steps_ended([12.0])  # (the gaps were read off a copy: the ends still grow)
    assert rec.end_of(5) == 12.0
