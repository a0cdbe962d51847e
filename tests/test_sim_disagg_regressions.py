"""Prefill/decode disaggregation regressions: livelocks and lost handoffs (fuzz finds).

A layerwise handoff reserves its decode blocks when its prefill starts. A
finished prompt whose KV is pinned on its prefill instance, waiting for
decode room, and a layerwise stream holding that room whose prefill can't
run beside the pinned KV, used to wait on each other forever: each time the
stream's prefill was preempted its reservation was freed and, at the same
instant, the recompute reserved it again. Simulated time ticked one step at
a time; the run never ended. Every test here runs under the engine's
livelock guard (a clear internal error after ~130k events without an
arrival, first token, delivery or finish), so a regression fails instead of
hanging.
"""

from __future__ import annotations

import pandas as pd
import pytest

from inferasim import Workload
from inferasim.sim import LinearCostModel, Simulator, engine

# every step costs 1 ms, whatever it runs; 1 MB of KV a token on a 1 GB/s link: 1 ms a token
FLAT = LinearCostModel(
    overhead_ms=1.0,
    prefill_token_ms=0.0,
    prefill_attention_ms=0.0,
    decode_seq_ms=0.0,
    decode_context_ms=0.0,
    kv_bytes_per_token=1e6,
)


def same(a, b) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.replicas, b.replicas, check_exact=True)
    pd.testing.assert_frame_equal(a.timeline, b.timeline, check_exact=True)


def minimal(fast: bool):
    wl = Workload.from_requests([0.0] * 3, [1, 6, 3], [6, 2, 4], block_size=1)
    return Simulator(
        kv_blocks=8, max_num_seqs=2, max_batched_tokens=2, eviction="fifo", seed=0,
        cost_model=FLAT, handoff_gbps=1.0, handoff_latency_us=0.0, layerwise=True,
        prefill_replicas=1, decode_replicas=1, progress=False, fast=fast,
    ).run(wl)


@pytest.mark.parametrize("fast", [True, False])
def test_minimal_livelock_pinned_prompt_against_a_layerwise_reservation(fast):
    # Block size 1, 8 blocks on each instance, chunks of 2 tokens, 2 sequences a
    # step; three requests at 0: r0 (1 + 6 tokens), r1 (6 + 2), r2 (3 + 4).
    # A handoff needs input_len + 1 decode blocks: r0 2, r1 7, r2 4.
    #
    # prefill instance: step 0-1 runs r0 (1 token) and r1's first token; r0's
    #   first token at 1. Steps 1-2, 2-3: r1 2 tokens each; step 3-4: r1's last
    #   token and r2's first: r1's first token at 4, its 6 blocks pinned (its
    #   handoff waits for room, below). From 4 on, r2 needs 3 blocks beside
    #   r1's 6 (9 > 8): each step it is preempted (needs its 3rd block), admitted
    #   again from scratch (2 tokens, 2 blocks: 8 of 8): preemptions at 4, 5, ..,
    #   11, eight in all, until r1's KV leaves at 12; then 12-13 computes r2's
    #   last token: first token at 13.
    # decode instance: r0's stream is placed at 0 (2 blocks), delivered at 1
    #   (1 MB, 1 ms); r0 decodes tokens 2..6 in steps 1-2 .. 5-6: finish 6.
    #   r1's stream (7 blocks) does not fit beside r0's 2 (8 - 2 = 6): it waits
    #   in the waiting room. r2's stream, started with each recompute from 3 on,
    #   must wait behind r1 (it used to take 4 blocks each time: then neither r1
    #   nor r0's growth ever had room). At 6 the decode instance is empty: r1 is
    #   placed, 6 MB in 6 ms: delivered at 12, its 2nd token at 13 (finish).
    #   r2's prompt is then done (13), placed as a whole: 3 MB, delivered at 16,
    #   tokens 2..4 at 17, 18, 19.
    req = minimal(fast).requests
    assert req["status"].tolist() == ["finished"] * 3
    assert req["first_token_ms"].tolist() == [1.0, 4.0, 13.0]
    assert req["finish_ms"].tolist() == [6.0, 13.0, 19.0]
    assert req["transfer_ms"].tolist() == [1.0, 6.0, 3.0]
    assert req["handoff_wait_ms"].tolist()[1] == 2.0  # r1 pinned from 4 to 6
    assert req["preemptions"].tolist() == [0, 0, 8]


def test_minimal_case_fast_equals_plain():
    same(minimal(True), minimal(False))


def test_reported_livelock_every_request_comes_out():
    # The reported case (found by a fuzz run): 13 requests at 0 without hash ids,
    # block size 4, 27 blocks, 23-token chunks, a 1 GB/s link with 50 us latency.
    # Request 1's finished prompt (80 tokens, 20 blocks) is pinned on the prefill
    # instance, waiting for 21 decode blocks; request 2's layerwise stream (8
    # blocks) was re-reserved with every recompute, so request 1 never got them
    # and request 2 never fit beside request 1's 20 blocks (7 left of 27).
    inp = [37, 80, 29, 32, 32, 37, 58, 57, 68, 23, 19, 71, 3]
    outp = [37, 12, 7, 10, 20, 20, 1, 30, 17, 39, 27, 39, 21]
    wl = Workload.from_requests([0.0] * 13, inp, outp, block_size=4)
    cost = LinearCostModel(
        overhead_ms=1.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
        decode_seq_ms=0.7, decode_context_ms=0.0, kv_bytes_per_token=1e6,
    )
    kw = dict(
        kv_blocks=27, max_num_seqs=6, max_batched_tokens=23, eviction="fifo", seed=2,
        cost_model=cost, timeline_ms=0.7, handoff_gbps=1.0, handoff_latency_us=50.0,
        layerwise=True, progress=False, prefill_replicas=1, decode_replicas=1,
    )
    fast = Simulator(**kw, fast=True).run(wl)
    req = fast.requests
    # request 11 never fits: 71 + 39 - 1 tokens need 28 blocks of 4 > 27; it comes
    # out rejected with that reason; every other request finishes
    assert req["status"].tolist() == ["finished"] * 11 + ["rejected", "finished"]
    assert req.loc[11, "reason"] == "needs 28 KV blocks for 71 + 39 tokens; a replica holds 27"
    fin = req[req["status"] == "finished"]
    assert (fin["arrival_ms"] <= fin["first_token_ms"]).all()
    assert (fin["first_token_ms"] <= fin["finish_ms"]).all()
    assert (fin["transfer_ms"].dropna() >= 0).all()
    same(fast, Simulator(**kw, fast=False).run(wl))


def test_the_guard_names_a_stretch_without_progress(monkeypatch):
    # The guard counts loop events between milestones (arrival, first token,
    # delivery, finish). In the minimal case nothing reaches one from 6 (r0's
    # finish) to 12 (r1's delivery) while r2 is preempted each ms: with a check
    # every event and a limit of 3 checks the guard fires there, with the
    # message a real livelock gets (with the defaults, 131072 events, it doesn't).
    monkeypatch.setattr(engine, "STALL_CHECK", 1)
    monkeypatch.setattr(engine, "STALL_LIMIT", 3)
    with pytest.raises(RuntimeError, match=r"internal error: 3 events without progress .* a livelock"):
        minimal(True)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("gbps, delivered", [(1.0, 0.1), (0.001, 100.0)])
def test_zero_time_prefill_step_hands_off(fast, gbps, delivered):
    # Found by the P/D fuzz: a prefill step that costs no time starts and ends at
    # the same instant, just before the loop's next event; its first-token handoff
    # was dropped with the layerwise starts of that instant (only those were
    # expected there) and the request never finished (an internal error).
    # One request, 1 + 2 tokens; prefill costs 0 ms, a decode step 1 ms; its KV,
    # 1 token of 1e5 bytes, takes 0.1 ms at 1 GB/s (100 ms at 1 MB/s): first token
    # at 0, delivered at 0.1 (100), second token one decode step later.
    cost = LinearCostModel(
        overhead_ms=0.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
        decode_seq_ms=1.0, decode_context_ms=0.0, kv_bytes_per_token=1e5,
    )
    wl = Workload.from_requests([0.0], [1], [2], block_size=1)
    req = Simulator(
        prefill_replicas=1, decode_replicas=1, kv_blocks=3, max_num_seqs=1, max_batched_tokens=1,
        cost_model=cost, handoff_gbps=gbps, handoff_latency_us=0.0, progress=False, fast=fast,
    ).run(wl).requests
    assert req["status"].tolist() == ["finished"]
    assert req["first_token_ms"].tolist() == [0.0]
    assert req["transfer_ms"].tolist() == pytest.approx([delivered], rel=1e-12)
    assert req["finish_ms"].tolist() == pytest.approx([delivered + 1.0], rel=1e-12)
