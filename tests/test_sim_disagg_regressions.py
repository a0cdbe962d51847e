"""Prefill/decode disaggregation regressions: livelocks and lost handoffs (fuzz finds).

A finished prompt whose KV is pinned on its prefill instance, waiting for
decode room, leaves that instance too little memory for another prompt; that
prompt was preempted, admitted again at once, preempted again, forever: with
layerwise handoffs each readmission also reserved decode room again (so the
pinned prompt never got it; simulated time ticked one step at a time), and
with zero-time prefill steps the cycle spun at one instant. A prefill
instance now admits a preempted prompt again only when it fits beside the
handed-off KV held there. Every test here runs under the event loop's livelock
guard (``loop.STALL_CHECK * loop.STALL_LIMIT``, about 130k instants without an
arrival, first token, delivery or finish: a clear internal error), so a
regression fails instead of hanging.

The cases were found, and are derived, under ``EngineConfig.whole_blocks()``:
its first-chunk admission is what admits a prompt that is preempted for lack
of room later (vLLM's full-prompt admission, the default, waits instead), so
they pin those rules.
"""

from __future__ import annotations

import pytest
from helpers import assert_same

from inferasim import Workload
from inferasim.sim import Disaggregated, EngineConfig, LinearCostModel, Simulator, loop

# every step costs 1 ms, whatever it runs; 1 MB of KV a token on a 1 GB/s link: 1 ms a token
FLAT = LinearCostModel(
    overhead_ms=1.0,
    prefill_token_ms=0.0,
    prefill_attention_ms=0.0,
    decode_seq_ms=0.0,
    decode_context_ms=0.0,
    kv_bytes_per_token=1e6,
)


def minimal(fast: bool):
    wl = Workload.from_requests([0.0] * 3, [1, 6, 3], [6, 2, 4], block_size=1)
    return Simulator(
        kv_tokens=8 * 1, engine=EngineConfig.whole_blocks(max_num_seqs=2, max_batched_tokens=2),
        eviction="fifo", seed=0, cost_model=FLAT, fast=fast,
        replicas=Disaggregated(1, 1, handoff_gbps=1.0, handoff_latency_us=0.0, layerwise=True),
    ).run(wl, progress=False)


@pytest.mark.parametrize("fast", [True, False])
def test_minimal_livelock_pinned_prompt_against_a_layerwise_reservation(fast):
    # Block size 1, 8 blocks on each instance, chunks of 2 tokens, 2 sequences a
    # step; three requests at 0: r0 (1 + 6 tokens), r1 (6 + 2), r2 (3 + 4).
    # A handoff needs input_len + 1 decode blocks: r0 2, r1 7, r2 4.
    #
    # prefill instance: step 0-1 runs r0 (1 token) and r1's first token; r0's
    #   first token at 1. Steps 1-2, 2-3: r1 2 tokens each; step 3-4: r1's last
    #   token and r2's first: r1's first token at 4, its 6 blocks held for the
    #   handoff (it waits for decode room, below). At 4 r2 needs 3 blocks beside
    #   those 6 (9 > 8): preempted (once). It used to be admitted again at once
    #   (2 blocks fit) and preempted at its 3rd block, every ms; now it waits until
    #   its 3 blocks fit beside the held KV: when r1's KV leaves at 12. Steps 12-13,
    #   13-14 compute its 3 tokens: first token at 14.
    # decode instance: r0's stream is placed at 0 (2 blocks), delivered at 1
    #   (1 MB, 1 ms); r0 decodes tokens 2..6 in steps 1-2 .. 5-6: finish 6. r1's
    #   stream (7 blocks) does not fit beside r0's 2: it waits. (Each readmission
    #   of r2 used to reserve 4 blocks for its stream: then neither r1 nor r0's
    #   growth ever had room, a livelock.) At 6 the decode instance is empty: r1
    #   is placed, 6 MB in 6 ms: delivered at 12, its 2nd token at 13 (finish).
    #   r2's stream (started with its prefill at 12, waiting for room) is placed
    #   at 13: 3 MB, delivered at 16 (after its prefill's end, 14); tokens 2..4
    #   at 17, 18, 19.
    req = minimal(fast).requests
    assert req["status"].tolist() == ["finished"] * 3
    assert req["first_token_ms"].tolist() == [1.0, 4.0, 14.0]
    assert req["finish_ms"].tolist() == [6.0, 13.0, 19.0]
    assert req["transfer_ms"].tolist() == [1.0, 6.0, 3.0]
    assert req["handoff_wait_ms"].tolist() == [0.0, 2.0, 0.0]  # r1 held from 4 to 6
    assert req["preemptions"].tolist() == [0, 0, 1]


def test_minimal_case_fast_equals_plain():
    assert_same(minimal(True), minimal(False))


def test_reported_livelock_every_request_comes_out():
    # The reported case: 13 requests at 0 without hash ids, block size 4, 27
    # blocks, 23-token chunks, a 1 GB/s link with 50 us latency. Request 1's
    # finished prompt (80 tokens, 20 blocks) is held on the prefill instance,
    # waiting for 21 decode blocks; request 2 (29 tokens, 8 blocks) never fits
    # beside it (7 left of 27) but was readmitted after every preemption, and its
    # layerwise stream re-reserved 8 decode blocks each time, so request 1 never
    # got its 21.
    inp = [37, 80, 29, 32, 32, 37, 58, 57, 68, 23, 19, 71, 3]
    outp = [37, 12, 7, 10, 20, 20, 1, 30, 17, 39, 27, 39, 21]
    wl = Workload.from_requests([0.0] * 13, inp, outp, block_size=4)
    cost = LinearCostModel(
        overhead_ms=1.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
        decode_seq_ms=0.7, decode_context_ms=0.0, kv_bytes_per_token=1e6,
    )
    kw = dict(
        kv_tokens=27 * 4, engine=EngineConfig.whole_blocks(max_num_seqs=6, max_batched_tokens=23),
        eviction="fifo", seed=2, cost_model=cost,
        replicas=Disaggregated(1, 1, handoff_gbps=1.0, handoff_latency_us=50.0, layerwise=True),
    )
    fast = Simulator(**kw, fast=True).run(wl, timeline_ms=0.7, progress=False)
    req = fast.requests
    # request 11 never fits: 71 + 39 - 1 tokens need 28 blocks of 4 > 27; it comes
    # out rejected with that reason; every other request finishes
    assert req["status"].tolist() == ["finished"] * 11 + ["rejected", "finished"]
    assert req.loc[11, "reason"] == "needs 28 KV blocks for 71 + 39 tokens; a replica holds 27"
    fin = req[req["status"] == "finished"]
    assert (fin["arrival_ms"] <= fin["first_token_ms"]).all()
    assert (fin["first_token_ms"] <= fin["finish_ms"]).all()
    assert (fin["transfer_ms"].dropna() >= 0).all()
    assert_same(fast, Simulator(**kw, fast=False).run(wl, timeline_ms=0.7, progress=False))


@pytest.mark.parametrize("fast", [True, False])
def test_the_guard_names_a_stretch_without_progress(monkeypatch, fast):
    # The guard checks the progress measure (arrivals, first tokens, deliveries,
    # finishes) at every STALL_CHECK-th instant of the loop, before the instant is
    # handled. In the minimal case the loop's instants are 0 (the arrivals), then for
    # each 1-ms prefill step its start (one ulp after the previous end: a replica
    # starts its next step at the first instant after the one ending a step) and its
    # end: 5e-324, 1.0 (r0's first token and delivery), 1.0000000000000002 (seen
    # here), 2.0, 2.0000000000000004, 3.0, ... r1's chunks ending at 2 and 3 reach no
    # milestone. With a check at every instant and a limit of 3 checks the guard
    # fires at 3.0, with the message a real livelock gets (with the defaults, 131072
    # instants, the run ends normally, tested above).
    monkeypatch.setattr(loop, "STALL_CHECK", 1)
    monkeypatch.setattr(loop, "STALL_LIMIT", 3)
    with pytest.raises(RuntimeError, match=r"internal error: 3 instants without progress "
                       r"\(no arrival, first token, delivery or finish\), simulated time 3\.0 ms: "
                       r"a livelock"):
        minimal(fast)


@pytest.mark.parametrize("fleet", [1, Disaggregated(1, 1)])
def test_arrivals_are_progress_for_the_guard(monkeypatch, fleet):
    # A valid run: request 0's prefill step takes 1000 ms; 100 requests arrive during
    # it, 1 us apart, at 100 distinct instants with no first token or finish. With a
    # check every 8 instants and a limit of 4 (32 instants) the guard must still see
    # the arrivals as progress (it raised a false livelock here when it measured
    # progress as arrived + not yet arrived, a constant for open arrivals; with the
    # defaults 140,000 arrivals inside one long step did it). Request 0 finishes with
    # its first token at 1000; the 100 others (16 tokens each, 1,600 <= the budget of
    # 16 x 101) run in the next step, 1000 to 2000: finished at 2000.
    monkeypatch.setattr(loop, "STALL_CHECK", 8)
    monkeypatch.setattr(loop, "STALL_LIMIT", 4)
    n = 101
    wl = Workload.from_requests([0.0] + [0.5 + 0.001 * i for i in range(n - 1)], [16] * n,
                                [1] * n, block_size=16)
    cost = LinearCostModel(overhead_ms=1000.0, prefill_token_ms=0.0, decode_seq_ms=0.0,
                           kv_bytes_per_token=1.0)
    req = Simulator(replicas=fleet, routing="round_robin", kv_tokens=16 * (n + 1),
                    engine=EngineConfig.whole_blocks(max_num_seqs=n, max_batched_tokens=16 * n),
                    cost_model=cost).run(wl, progress=False).requests
    assert req["status"].eq("finished").all()
    assert req["finish_ms"].tolist() == [1000.0] + [2000.0] * (n - 1)


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
        replicas=Disaggregated(1, 1, handoff_gbps=gbps, handoff_latency_us=0.0), kv_tokens=3 * 1,
        engine=EngineConfig.whole_blocks(max_num_seqs=1, max_batched_tokens=1), cost_model=cost, fast=fast,
    ).run(wl, progress=False).requests
    assert req["status"].tolist() == ["finished"]
    assert req["first_token_ms"].tolist() == [0.0]
    assert req["transfer_ms"].tolist() == pytest.approx([delivered], rel=1e-12)
    assert req["finish_ms"].tolist() == pytest.approx([delivered + 1.0], rel=1e-12)


@pytest.mark.parametrize("fast", [True, False])
def test_zero_time_prefill_steps_do_not_spin_at_one_instant(fast):
    # Found by the P/D fuzz: prefill steps cost nothing (decode 1 ms a step), one
    # prefill and one decode instance of 40 blocks of 4 tokens, 9-token chunks.
    # At 1.003 request 4 (120 tokens, 30 blocks) was preempted beside the KV the
    # instance holds for handoffs (11 blocks: 30 > 29), readmitted at once,
    # recomputed up to its 27th block in zero time and preempted again: forever,
    # at 1.003. Now it waits until it fits (a transfer frees the held KV, taking
    # time). Every request comes out; times are finite and ordered.
    cost = LinearCostModel(
        overhead_ms=0.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
        decode_seq_ms=1.0, decode_context_ms=0.0, kv_bytes_per_token=1e5,
    )
    wl = Workload.from_requests(
        [0.001, 0.002, 1.002, 1.003, 1.003, 2.003, 3.003], [120, 33, 1, 2, 120, 33, 7],
        [1, 9, 2, 9, 2, 2, 9], block_size=4,
    )
    req = Simulator(
        replicas=Disaggregated(1, 1, handoff_gbps=1.0, handoff_latency_us=50.0),
        kv_tokens=40 * 4, engine=EngineConfig.whole_blocks(max_num_seqs=4, max_batched_tokens=9),
        eviction="fifo", cost_model=cost, fast=fast,
    ).run(wl, progress=False).requests
    assert req["status"].tolist() == ["finished"] * 7
    assert (req["arrival_ms"] <= req["first_token_ms"]).all()
    assert (req["first_token_ms"] <= req["finish_ms"]).all()
    # request 4 is preempted once, then waits for the held KV to leave
    assert req.loc[4, "preemptions"] == 1
