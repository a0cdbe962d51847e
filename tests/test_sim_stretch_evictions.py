"""Decode stretches that evict while requests wait (``BatchScheduler.evictions_matter``).

A pure-decode stretch used to stop before its first eviction whenever a request
waited, and the step that evicted was followed by one composed afresh: an
eviction can shorten a waiting request's cached run and so change whether it
fits. With full-prompt admission (and no lower tiers) it cannot let the head of
the queue in once the head does not fit even without any evictable page of its
run, nor can anything be admitted while every sequence slot is taken: then the
stretch evicts through. Checked here by hand (fewer step starts, the same
frames) and by the plain step-by-step loop (drawn fleets and the conversation
trace under ``EngineConfig.vllm()``).
"""

from __future__ import annotations

import pytest
from helpers import assert_same, busy_workloads, hypothesis_settings, simulate
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.sim import EngineConfig, LinearCostModel
from inferasim.sim.replica import Replica

LIN = LinearCostModel()  # a step: 5 + 0.05 * prefill tokens + 0.1 * decoding sequences (ms)


def _hand_case():
    # 16-token blocks, 5 blocks of KV, full-prompt admission, budget 64 tokens.
    # P (t=0): 48 tokens (ids 1-3), 1 output token; A (t=0): 16 tokens (id 10),
    # 40 output tokens; B (t=1): 80 tokens (ids 20-24), 1 output token.
    wl = Workload.from_requests(
        [0.0, 0.0, 1.0], [48, 16, 80], [1, 40, 1], [[1, 2, 3], [10], [20, 21, 22, 23, 24]],
        block_size=16,
    )
    engine = EngineConfig(max_num_seqs=4, max_batched_tokens=64, full_prompt_admission=True)
    return wl, dict(kv_tokens=5 * 16, cost_model=LIN, engine=engine)


@pytest.mark.instrumented  # counts the core's step starts: see tests/test_native.py
def test_a_stretch_evicts_through_while_the_head_cannot_fit(monkeypatch):
    # Step 1 (t=0): P and A prefill 48 + 16 = 64 tokens, 5 + 3.2 = 8.2 ms; P finishes
    # at 8.2 (blocks 1-3 cached, evictable), A's block 10 stays pinned. B needs its
    # whole prompt, 5 blocks; available 5 - 1 = 4: it waits. A's 39 decode steps
    # (5.1 ms each) end at 8.2 + 5.1 k; the steps writing its tokens at positions
    # 16, 32 and 48 (decode steps 1, 17, 33) take a block each: the first from the
    # free one, the other two evict one of P's blocks each, while B waits with at
    # most 5 - 1 - 1 = 3 blocks available. A finishes at 8.2 + 39 * 5.1 = 207.1;
    # B (5 blocks: 3 free + 2 evictable) prefills 64 then 16 tokens, 8.2 + 5.8 ms:
    # first token (and finish) at 221.1.
    wl, kw = _hand_case()
    starts = []
    orig = Replica._start_step

    def start(rep):
        starts.append(rep.sched.clock)
        orig(rep)

    monkeypatch.setattr(Replica, "_start_step", start)
    fast = simulate(wl, **kw)
    req = fast.requests
    assert req["first_token_ms"].tolist() == pytest.approx([8.2, 8.2, 221.1])
    assert req["finish_ms"].tolist() == pytest.approx([8.2, 207.1, 221.1])
    assert req["scheduled_ms"].tolist() == pytest.approx([0.0, 0.0, 207.1])
    assert req["preemptions"].tolist() == [0, 0, 0]
    # Step starts: 0 (prefill), 8.2 (one stretch through A's 39 decode steps and
    # both evictions), 207.1 and 215.3 (B's chunks). Stopping before each eviction
    # started 8: 0, 8.2, 8.2 + 16 x 5.1 (the evicting step alone), the next, the
    # same at decode step 33, 207.1, 215.3.
    assert starts == pytest.approx([0.0, 8.2, 207.1, 215.3])
    monkeypatch.undo()
    assert_same(fast, simulate(wl, **kw, fast=False))


def test_the_hand_case_equals_the_plain_loop():
    wl, kw = _hand_case()
    assert_same(simulate(wl, **kw), simulate(wl, **kw, fast=False))


@hypothesis_settings(40, slow=True)
@given(
    wl=busy_workloads(),
    kv_blocks=st.integers(6, 30),
    max_num_seqs=st.integers(1, 8),
    page=st.sampled_from([None, 1, 2, 4]),
    full=st.booleans(),
    generated=st.booleans(),
    on_schedule=st.booleans(),
    eviction=st.sampled_from(["lru", "fifo", "lfu", "length_aware"]),
)
def test_jump_equals_plain_loop_with_evictions_while_requests_wait(
    wl, kv_blocks, max_num_seqs, page, full, generated, on_schedule, eviction
):
    # Many overlapping requests, long outputs, little memory: requests wait while
    # decode stretches evict (full-prompt admission), or while every slot is taken.
    engine = EngineConfig(
        max_num_seqs=max_num_seqs, max_batched_tokens=64, page_tokens=page,
        full_prompt_admission=full, cache_generated=generated, cache_on_schedule=on_schedule,
    )
    kw = dict(kv_blocks=kv_blocks, engine=engine, eviction=eviction, cost_model=LIN,
              routing="round_robin", replicas=2)
    assert_same(simulate(wl, **kw), simulate(wl, **kw, fast=False))


@pytest.mark.parametrize("kv_tokens", [204_800, 133_120])
def test_jump_equals_plain_loop_on_the_trace_with_vllm_rules(conversation_path, kv_tokens):
    # issue 21's tight configurations (first 300 conversation requests, one replica,
    # 16-token pages): most steps there evict while requests wait
    from inferasim import Workload as W

    full = W.from_mooncake(conversation_path)
    n = 300
    wl = Workload.from_requests(
        full.arrival_ms[:n], full.input_len[:n], full.output_len[:n],
        [full.block_ids(i).tolist() for i in range(n)], block_size=full.block_size,
    )
    kw = dict(kv_tokens=kv_tokens, cost_model=LIN, engine=EngineConfig.vllm())
    assert_same(simulate(wl, **kw), simulate(wl, **kw, fast=False))
