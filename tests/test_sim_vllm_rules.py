"""Hand-computed cases for the vLLM v1 rules of ``EngineConfig`` (issue 21).

Each rule is a switch: full-prompt admission, KV pages smaller than the hash
blocks, blocks cached when scheduled, generated blocks kept as cache. Every
case starts from ``EngineConfig.whole_blocks()`` (all four off), runs with the
rule off and on, and checks both against a derivation.
The cost model is ``LinearCostModel()``: a step costs ``5 + 0.05 *
prefill_tokens + 0.1 * decode_seqs`` ms. Hash blocks are 16 tokens.
"""

from __future__ import annotations

import pytest
from helpers import runner

from inferasim import Workload
from inferasim.sim import EngineConfig, LinearCostModel

BS = 16
LIN = LinearCostModel()


def run(wl, kv_tokens, **engine):
    return runner(kv_tokens=kv_tokens, cost_model=LIN,
                  engine=EngineConfig.whole_blocks(**engine))(wl)


def test_full_prompt_admission_waits_until_the_whole_prompt_fits():
    # Capacity 5 blocks (80 tokens), budget 32 tokens a step.
    # A (t=0): 16-token prompt (block 1), 10 output tokens; B (t=1): 80 tokens
    # (ids 2..6), 1 output token (needs ceil(80/16) = 5 blocks: not rejected).
    # Step 1 (t=0): A prefills 16 tokens, 5 + 0.8 = 5.8 ms.
    # Step 2 (t=5.8): A decodes (its token 17 needs a 2nd block: 1 new); 5 - 1 - 1
    # = 3 blocks left. B's first chunk (31 tokens, 2 blocks) fits: the first-chunk
    # check admits B at 5.8. Its whole prompt (5 blocks) does not: the full-prompt
    # check keeps B waiting until A finishes, 9 decode steps of 5.1 ms after its
    # first token: 5.8 + 9 * 5.1 = 51.7. B then prefills 32, 32 and 16 tokens
    # (6.6 + 6.6 + 5.8 ms): first token at 70.7, TTFT 69.7, never preempted.
    wl = Workload.from_requests(
        [0.0, 1.0], [16, 80], [10, 1], [[1], [2, 3, 4, 5, 6]], block_size=BS
    )
    chunk = run(wl, 80, max_num_seqs=2, max_batched_tokens=32).requests.iloc[1]
    assert chunk.scheduled_ms == pytest.approx(5.8)
    # ... and B outgrows the memory A still holds: preempted
    assert chunk.preemptions >= 1
    full = run(wl, 80, max_num_seqs=2, max_batched_tokens=32,
               full_prompt_admission=True).requests.iloc[1]
    assert full.scheduled_ms == pytest.approx(51.7)
    assert full.first_token_ms == pytest.approx(70.7)
    assert full.ttft_ms == pytest.approx(69.7)
    assert full.preemptions == 0


def test_small_pages_fit_one_more_sequence():
    # 40 tokens of KV; three 12-token prompts (no full block), 1 output token,
    # all at t=0. With 16-token pages a prompt takes 1 page of 2: two run in step 1
    # (5 + 0.05 * 24 = 6.2 ms) and the third after them (6.2 + 5 + 0.6 = 11.8).
    # With 4-token pages a prompt takes 3 pages of 10: all three run in step 1,
    # 5 + 0.05 * 36 = 6.8 ms.
    wl = Workload.from_requests([0.0] * 3, [12] * 3, [1] * 3, block_size=BS)
    blocks = run(wl, 40).requests
    assert blocks.first_token_ms.tolist() == pytest.approx([6.2, 6.2, 11.8])
    pages = run(wl, 40, page_tokens=4).requests
    assert pages.first_token_ms.tolist() == pytest.approx([6.8, 6.8, 6.8])
    assert pages.preemptions.sum() == 0


def test_a_block_scheduled_in_a_step_is_hit_in_that_step():
    # A and B (t=0) share blocks 1, 2 (40-token prompts, 1 output token). Blocks
    # cached when their step ends: both compute 40 tokens, 5 + 0.05 * 80 = 9 ms.
    # Cached when scheduled: A's chunk completes blocks 1 and 2 as it is scheduled,
    # so B (admitted next in the same step) reuses them (limit (40 - 1) // 16 = 2)
    # and computes 8 tokens: 5 + 0.05 * 48 = 7.4 ms for both.
    wl = Workload.from_requests([0.0, 0.0], [40, 40], [1, 1], [[1, 2], [1, 2]], block_size=BS)
    late = run(wl, 1000 * BS).requests
    assert late.cached_tokens.tolist() == [0, 0]
    assert late.ttft_ms.tolist() == pytest.approx([9.0, 9.0])
    early = run(wl, 1000 * BS, cache_on_schedule=True).requests
    assert early.cached_tokens.tolist() == [0, 32]
    assert early.ttft_ms.tolist() == pytest.approx([7.4, 7.4])


def test_a_preempted_request_hits_its_own_generated_blocks_on_resume():
    # Capacity 4 blocks. B (first in the trace): 16-token prompt (block 9), 16
    # output tokens; A: 20-token prompt (block 1 + 4 tokens), 30 output tokens; both
    # at t=0 and admitted in step 1 (5 + 0.05 * 36 = 6.8 ms; B holds 1 block, A 2).
    # Each decode step (both: 5.2 ms) writes one token per sequence; B takes its
    # 2nd block at step 2 (memory now full), A needs a 3rd when its 33rd token is
    # written, at step 14 (t = 6.8 + 12 * 5.2 = 69.2): A, the last admitted, is
    # preempted with 32 computed tokens, 13 generated, 33 to recompute.
    # B decodes alone (5.1 ms steps) and finishes at step 16: 69.2 + 3 * 5.1 = 84.5.
    # A's resume at 84.5 finds its block 1 cached. Without generated blocks kept it
    # recomputes 33 - 16 = 17 tokens (5.85 ms, token 14 at 90.35); with them its own
    # 2nd block (prompt tail + 12 generated tokens) hits too and it computes 1 token
    # (5.05 ms, token 14 at 89.55). Then 16 decode steps of 5.1 ms: finishes at
    # 171.95 and 171.15. Prefill tokens computed: 20 + 17 = 37 and 20 + 1 = 21.
    wl = Workload.from_requests(
        [0.0, 0.0], [16, 20], [16, 30], [[9], [1]], block_size=BS
    )
    for kept, computed, finish in ((False, 37, 171.95), (True, 21, 171.15)):
        a = run(wl, 4 * BS, cache_generated=kept).requests.iloc[1]
        assert a.preemptions == 1
        assert a.computed_prefill_tokens == computed
        assert a.finish_ms == pytest.approx(finish)
        assert a.first_token_ms == pytest.approx(6.8)


def test_a_page_evicted_from_a_block_leaves_its_leading_pages_hittable():
    # 48 tokens of KV. A (t=0): blocks 1, 2 (32 tokens), 1 output token; finishes
    # at 5 + 1.6 = 6.6 and releases its blocks tail first (LRU: 2 goes first).
    # C (t=100): 24 tokens (block 7 + 8), 1 output token. D (t=200): 40 tokens,
    # blocks 1, 2, 3, 1 output token.
    # 16-token pages (3 blocks): C needs 2 blocks, 1 is free: block 2 is evicted. D
    # reuses block 1 (16 tokens) and computes 24: TTFT 5 + 1.2 = 6.2.
    # 4-token pages (12 pages): C needs 6 pages, 4 are free: 2 pages are evicted,
    # the tail of block 2, whose 2 leading pages stay. D reuses block 1 and those 2
    # pages (24 tokens; limit (40 - 1) // 4 = 9 pages) and computes 16: TTFT 5.8.
    wl = Workload.from_requests(
        [0.0, 100.0, 200.0], [32, 24, 40], [1, 1, 1], [[1, 2], [7], [1, 2, 3]], block_size=BS
    )
    d = run(wl, 48).requests.iloc[2]
    assert (d.cached_tokens, d.cached_blocks) == (16, 1)
    assert d.ttft_ms == pytest.approx(6.2)
    d = run(wl, 48, page_tokens=4).requests.iloc[2]
    assert (d.cached_tokens, d.cached_blocks) == (24, 1)
    assert d.ttft_ms == pytest.approx(5.8)


def test_a_fully_cached_prompt_pins_only_the_pages_its_hit_uses():
    # vLLM caps a hit at num_tokens - 1 and pins only the pages it hits; the
    # page holding the last prompt token is recomputed into a new page.
    # 4-token pages, capacity 10 pages (40 tokens). A (t=0): 32 tokens (blocks 1,
    # 2), 1 output token; finishes at 5 + 1.6 = 6.6, its 8 pages stay cached.
    # B (t=100): the same 32 tokens, 9 output tokens. Its hit: limit (32 - 1) // 4
    # = 7 pages, block 1 and 3 pages of block 2 (28 tokens); it computes 4 tokens
    # into 1 new page (8 held): TTFT 5 + 0.05 * 4 = 5.2. Its 8 decode steps (5.1
    # ms) write tokens 33..40 (its 9th output token needs no KV), 2 more pages:
    # 10 of 10, never preempted; finish 100 + 5.2 + 8 * 5.1 = 146.0. Pinning all
    # 4 pages of block 2 as well as the new page would need 11 pages: B, alone,
    # would be preempted without end.
    wl = Workload.from_requests(
        [0.0, 100.0], [32, 32], [1, 9], [[1, 2], [1, 2]], block_size=BS
    )
    for full in (False, True):
        b = run(wl, 40, page_tokens=4, full_prompt_admission=full).requests.iloc[1]
        assert (b.cached_tokens, b.cached_blocks) == (28, 1)
        assert b.preemptions == 0
        assert b.ttft_ms == pytest.approx(5.2)
        assert b.finish_ms == pytest.approx(146.0)


def test_a_holder_of_a_block_another_completed_first_keeps_no_copies():
    # 4-token pages, capacity 12 pages (48 tokens), 2 sequences. As in the
    # evicted-page case above, P (t=0: blocks 1, 2, 1 output token) and Q (t=10:
    # block 7 and 8 tokens, 1 output token) leave block 1 (4 pages), the 2
    # leading pages of block 2 and block 7 cached, none pinned.
    # At t=100 A (40 tokens: blocks 1, 2, 3 and 8 more, 1 output token) and B
    # (32 tokens: blocks 1, 2, 17 output tokens) are both admitted: each hits
    # block 1 and the 2 pages of block 2 (24 tokens), A computes 16 tokens (4 new
    # pages), B 8 (2 new pages): 5 + 0.05 * 24 = 6.2 ms, both first tokens at
    # 106.2. A completes block 2 first; B's 2 pages of it are then copies, and
    # B holds the entry's 4 pages instead (vLLM: B's own pages, the other
    # holder's become evictable when A finishes, at 106.2).
    # B alone then holds 8 pages and decodes 16 steps of 5.1 ms writing tokens
    # 33..48: 4 more pages, 12 of 12, never preempted; finish 106.2 + 81.6 =
    # 187.8. Pinning the entry and keeping the copies would need 14 pages.
    wl = Workload.from_requests(
        [0.0, 10.0, 100.0, 100.0], [32, 24, 40, 32], [1, 1, 1, 17],
        [[1, 2], [7], [1, 2, 3], [1, 2]], block_size=BS,
    )
    req = run(wl, 48, page_tokens=4, max_num_seqs=2).requests
    a, b = req.iloc[2], req.iloc[3]
    assert (a.cached_tokens, b.cached_tokens) == (24, 24)
    assert a.finish_ms == pytest.approx(106.2)
    assert b.first_token_ms == pytest.approx(106.2)
    assert b.preemptions == 0
    assert b.finish_ms == pytest.approx(187.8)


def test_a_prefill_preempted_inside_a_block_hits_its_leading_pages_on_resume():
    # vLLM caches every full page a chunk schedules, so a prefill preempted in
    # the middle of a hash block keeps that block's computed leading pages cached.
    # 4-token pages, capacity 11 pages (44 tokens), 16 tokens a step, 2 sequences.
    # A (t=0): 4-token prompt (no hash block), 3 output tokens; B (t=0): 40 tokens
    # (blocks 1, 2 and an 8-token tail), 1 output token.
    # Step 1 (t=0): A's 4 tokens (1 page) and B's first 12 (3 pages): 5 + 0.05 *
    #   16 = 5.8 ms; A samples its 1st token and decodes from now on.
    # Step 2 (t=5.8): A's decode takes its 2nd page; B gets 16 - 1 = 15 tokens (12
    #   -> 27, pages 3 -> 7; block 1 complete): 5 + 0.75 + 0.1 = 5.85 ms. 9 pages held.
    # Step 3 (t=11.65): B's last 13 tokens need 3 more pages, 2 are left: B (the
    #   last admitted) is preempted with 27 computed tokens = 6 full pages: block 1
    #   (4 pages) and 2 leading pages of block 2. A decodes alone: 5.1 ms; its 3rd
    #   token ends it at 16.75.
    # Step 4 (t=16.75): B resumes. Kept pages: it reuses block 1 and 2 pages of
    #   block 2 (24 tokens; limit (40 - 1) // 4 = 9 pages) and computes its last 16
    #   tokens in one step: 5.8 ms, first token at 22.55. Without them (the rule off)
    #   it reuses block 1 only (16 tokens): 16 tokens (5.8 ms) and then 8 (5 + 0.4 =
    #   5.4 ms), first token at 16.75 + 5.8 + 5.4 = 27.95.
    wl = Workload.from_requests([0.0, 0.0], [4, 40], [3, 1], [[], [1, 2]], block_size=BS)
    for kept, first, computed in ((False, 27.95, 12 + 15 + 24), (True, 22.55, 12 + 15 + 16)):
        b = run(wl, 44, max_num_seqs=2, max_batched_tokens=16, page_tokens=4,
                cache_generated=kept).requests.iloc[1]
        assert b.preemptions == 1
        assert b.cached_tokens == 0  # (its first admission hit nothing)
        assert b.first_token_ms == pytest.approx(first)
        assert b.computed_prefill_tokens == computed


def test_page_size_must_divide_the_hash_block():
    wl = Workload.from_requests([0.0], [32], [1], [[1, 2]], block_size=BS)
    with pytest.raises(ValueError, match=r"engine.page_tokens \(5\) must divide"):
        run(wl, 1000, page_tokens=5)
    with pytest.raises(ValueError, match="engine.page_tokens must be a positive integer"):
        run(wl, 1000, page_tokens=0)
    with pytest.raises(ValueError, match="engine.cache_generated must be a bool"):
        run(wl, 1000, cache_generated=1)


def test_vllm_preset_sets_every_rule():
    cfg = EngineConfig.vllm()
    assert (cfg.page_tokens, cfg.full_prompt_admission, cfg.cache_on_schedule,
            cfg.cache_generated) == (16, True, True, True)
    assert EngineConfig.vllm(page_tokens=4).page_tokens == 4
