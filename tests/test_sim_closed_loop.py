"""Closed-loop session replay (``Simulator.run(workload, closed_loop=True)``).

* hand-computed cases with exact times (think time, prefix reuse between
  turns, a 10x slower fleet, a rejected turn, a next turn that overtakes a
  recorded arrival under lazy replica advancement);
* the idle service estimate equals the engine's own time for a request
  alone on an idle replica (an independent implementation: the scheduler);
* a session's turns never overlap; an (almost) infinitely fast fleet
  replays the recorded arrivals; without reuse the delay only grows along a
  session; a session alone is late by exactly its turns' overruns (so a
  slower fleet delays it more), but with other sessions a slower fleet may
  delay a turn less (a hand case);
* the closed loop equals an open-loop replay of its own simulated
  arrivals (so every arrival was routed in time order, whatever replicas
  were advanced lazily), in the plain and the jumping loop;
* hypothesis invariants: every request once, finite ordered times.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import hypothesis_settings, runner, simulate
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload, WorkloadError
from inferasim.sim import Disaggregated, EngineConfig, LinearCostModel, Simulator, Tier
from inferasim.sim.closed_loop import idle_service_ms, session_links, think_times

SETTINGS = hypothesis_settings(40, slow=True)
LIN = LinearCostModel()  # 5 ms per step + 0.05 ms per prompt token + 0.1 ms per decoding seq
# (64 blocks of the workload's block size unless a test gives its own capacity)
run = runner(cost_model=LIN, kv_blocks=64, closed_loop=True)


# ------------------------------------------------------------------ hand cases


def two_turns() -> Workload:
    # turn 1: 32 tokens (blocks 1, 2 of 16), 3 output tokens, at 0;
    # turn 2: 64 tokens extending it (blocks 1, 2, 3, 4), 2 output tokens, recorded at 100
    return Workload.from_requests(
        [0, 100], [32, 64], [3, 2], [[1, 2], [1, 2, 3, 4]], block_size=16, session_id=[5, 5]
    )


def test_two_turns_exact_times():
    res = run(two_turns())
    r = res.requests
    # turn 1 alone: prefill 5 + 0.05 * 32 = 6.6, two decode steps of 5.1: finish 16.8
    # think = recorded gap 100 - idle estimate 16.8 = 83.2: turn 2 arrives at 16.8 + 83.2 = 100
    # turn 2 finds blocks 1, 2 cached: prefill 32 tokens 6.6 -> 106.6, one decode step -> 111.7
    assert r["think_ms"].tolist()[1] == pytest.approx(83.2)
    assert np.isnan(r["think_ms"].tolist()[0])
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 100.0])
    assert r["arrival_shift_ms"].tolist() == pytest.approx([0.0, 0.0], abs=1e-9)
    assert r["cached_tokens"].tolist() == [0, 32]
    assert r["finish_ms"].tolist() == pytest.approx([16.8, 111.7])
    assert r["session_id"].tolist() == [5, 5] and r["turn"].tolist() == [1, 2]
    s = res.summary()
    assert s["sessions"] == 1
    assert s["session_ms_p50"] == pytest.approx(111.7)


def test_two_turns_on_a_10x_slower_fleet():
    slow = LinearCostModel(overhead_ms=50.0, prefill_token_ms=0.5, decode_seq_ms=1.0)
    r = run(two_turns(), cost_model=slow).requests
    # turn 1: 50 + 16 = 66, two decode steps of 51: finish 168 > recorded gap 100,
    # so think = max(0, 100 - 168) = 0 and turn 2 arrives at 168 (68 late);
    # it computes 32 tokens (66) and one decode step (51): finish 168 + 117 = 285
    assert r["think_ms"].tolist()[1] == 0.0
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 168.0])
    assert r["arrival_shift_ms"].tolist() == pytest.approx([0.0, 68.0])
    assert r["finish_ms"].tolist() == pytest.approx([168.0, 285.0])


def test_queueing_delays_the_next_turn():
    # request 0 (another session) and turn 1 of session 7 arrive at 0; one sequence
    # at a time: turn 1 waits 16.8 ms and finishes at 33.6; think 83.2 -> 116.8
    wl = Workload.from_requests([0, 0, 100], [32, 32, 48], [3, 3, 1], session_id=[1, 7, 7],
                                block_size=16)
    r = run(wl, engine=EngineConfig(max_num_seqs=1, max_batched_tokens=32)).requests
    assert r["finish_ms"].tolist()[:2] == pytest.approx([16.8, 33.6])
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 0.0, 116.8])
    # turn 2 (48 tokens, 1 output): 32-token chunk 6.6 + 16-token chunk 5.8 -> 129.2
    assert r["finish_ms"].tolist()[2] == pytest.approx(129.2)


def test_a_next_turn_overtakes_a_recorded_arrival_under_lazy_advance():
    # round_robin reads no replica state, so only the chosen replica is advanced.
    # A1 at 0 (replica 0) finishes at 16.8; with think 0 its next turn A2 comes at
    # 16.8, before B1 recorded at 50: A2 must take the second round-robin slot
    # (replica 1) and B1 the third (replica 0), not the other way round.
    wl = Workload.from_requests([0, 50, 60], [32, 32, 48], [3, 3, 1],
                                session_id=["A", "B", "A"], block_size=16)
    r = run(wl, replicas=2, routing="round_robin", think_time=0.0).requests
    assert r["replica"].tolist() == [0, 0, 1]  # A1, B1, A2 (request order)
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 50.0, 16.8])
    # A2 alone on replica 1: 48 tokens, one output: 5 + 2.4 = 7.4 -> 24.2
    # B1 on replica 0 at 50: 16.8 -> 66.8
    assert r["finish_ms"].tolist() == pytest.approx([16.8, 66.8, 24.2])
    assert r["arrival_shift_ms"].tolist() == pytest.approx([0.0, 0.0, 16.8 - 60.0])


def test_a_rejected_turn_releases_its_next_turn_at_the_rejection():
    # turn 1 needs 8 blocks of 16 tokens, a replica holds 4: rejected at 0;
    # turn 2 then comes at 0 + think (the recorded gap minus turn 1's estimate,
    # 5 + 0.05 * 100 = 10 prefill + 5.1 decode = 15.1: think 40 - 15.1 = 24.9)
    wl = Workload.from_requests([0, 40], [100, 20], [2, 1], session_id=[1, 1], block_size=16)
    r = run(wl, kv_tokens=4 * 16).requests
    assert r["status"].tolist() == ["rejected", "finished"]
    assert r["think_ms"].tolist()[1] == pytest.approx(24.9)
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 24.9])


def test_constant_array_and_callable_think_times():
    wl = two_turns()
    assert run(wl, think_time=7.0).requests["arrival_ms"].tolist()[1] == pytest.approx(23.8)
    arr = np.array([99.0, 3.0])  # (a first turn's value is unused)
    assert run(wl, think_time=arr).requests["arrival_ms"].tolist()[1] == pytest.approx(19.8)

    def half_the_gap(later: pd.DataFrame) -> np.ndarray:
        return later["recorded_gap_ms"].to_numpy() / 2

    assert run(wl, think_time=half_the_gap).requests["arrival_ms"].tolist()[1] == pytest.approx(
        66.8
    )


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(think_time=-1.0), "request 1 is -1.0"),
        (dict(think_time=np.array([0.0, np.nan])), "request 1 is nan"),
        (dict(think_time=np.zeros(3)), r"one value per request \(2\)"),
        (dict(think_time=lambda f: [1.0, 2.0]), "returned 2 values for 1 later turns"),
    ],
)
def test_bad_closed_loop_input(kw, match):
    with pytest.raises(ValueError, match=match):
        run(two_turns(), **kw)


def test_think_time_without_closed_loop_and_no_sessions():
    with pytest.raises(ValueError, match="only used with closed_loop=True"):
        Simulator(kv_tokens=8 * 16, cost_model=LIN).run(two_turns(), think_time=1.0, progress=False)
    no_ids = Workload.from_requests([0, 1], [4, 4], [1, 1])
    with pytest.raises(ValueError, match="session_id column"):
        run(no_ids)
    # a repeated turn is refused where the workload is built (issue 23: at the first step)
    with pytest.raises(WorkloadError, match="request 1, field 'turn': turn 2 of session 1 repeats"):
        Workload.from_requests([0, 1], [4, 4], [1, 1], session_id=[1, 1], turn=[2, 2])
    # and by the closed loop, in a frame built by hand
    base = Workload.from_requests([0, 1], [4, 4], [1, 1])
    frame = base.frame.assign(session_id=[1, 1], turn=[2, 2])
    dup = Workload(frame, base.hash_ids, base.offsets, block_size=base.block_size,
                   has_hash_ids=False)
    with pytest.raises(ValueError, match="turn 2 of session 1 appears twice"):
        run(dup)


def test_sessions_inferred_from_hash_ids_may_branch():
    # request 1 and 2 both extend request 0 (prompt + answer): both wait for it
    wl = Workload.from_requests([0, 50, 60], [32, 64, 64], [3, 1, 1],
                                [[1, 2], [1, 2, 3, 4], [1, 2, 5, 6]], block_size=16)
    links = session_links(wl)
    assert links.parent.tolist() == [-1, 0, 0] and links.turn.tolist() == [1, 2, 2]
    r = run(wl, think_time=1.0).requests
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 17.8, 17.8])
    assert r["session_id"].tolist() == [0, 0, 0]


# ------------------------------------------------- estimate = the engine alone


@SETTINGS
@given(
    P=st.integers(1, 200),
    out=st.integers(1, 30),
    shared=st.integers(0, 12),
    M=st.integers(1, 96),
    chunked=st.booleans(),
    costs=st.tuples(
        st.sampled_from([0.3, 5.0]), st.sampled_from([0.0, 0.05]), st.sampled_from([0.0, 1e-3]),
        st.sampled_from([0.0, 0.7]), st.sampled_from([0.0, 0.003]),
    ),
)
def test_idle_estimate_is_the_engine_time_alone(P, out, shared, M, chunked, costs):
    # a parent (blocks 0..shared-1 + its own) long before the child; one replica
    # with room for everything: the child finds the shared full blocks cached
    bs = 8
    cost = LinearCostModel(*costs)
    child_ids = list(range(-(-P // bs)))
    parent_len = min(shared * bs, P)
    parent_ids = child_ids[: -(-parent_len // bs)] if parent_len else []
    if not parent_ids:
        parent_len, parent_ids = 3, [1000]
    wl = Workload.from_requests([0, 10**7], [parent_len, P], [2, out], [parent_ids, child_ids],
                                block_size=bs, session_id=[1, 1])
    engine = EngineConfig(max_num_seqs=1, max_batched_tokens=max(M, 1), chunked_prefill=chunked)
    res = Simulator(kv_tokens=10_000 * bs, cost_model=cost, engine=engine).run(wl, progress=False)
    r = res.requests
    links = session_links(wl)
    gap = 10**7
    th = think_times(wl, links, cost, max_batched_tokens=max(M, 1), chunked_prefill=chunked)
    # think = gap - est(parent): the parent's engine time
    assert gap - th[1] == pytest.approx(r["e2e_ms"][0], rel=1e-12, abs=1e-6)
    # the child's estimate (with its parent's shared blocks cached) is its engine time
    from inferasim.sim.closed_loop import _cached_blocks

    cached = _cached_blocks(wl, links.parent)
    assert cached[1] * bs == r["cached_tokens"][1]
    est = idle_service_ms(wl, cost, cached_blocks=cached, max_batched_tokens=max(M, 1),
                          chunked_prefill=chunked)
    assert est[1] == pytest.approx(r["e2e_ms"][1], rel=1e-12, abs=1e-6)


# ------------------------------------------------------------------ random sessions


@st.composite
def session_workloads(draw, max_n: int = 24) -> Workload:
    """Requests in 1-5 sessions (session_id column); prompts grow turn by turn
    (each turn's ids extend the previous turn's), with optional ids."""
    bs = draw(st.sampled_from([4, 8]))
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, 5))
    sess = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 3.0, 20.0, 60.0]), min_size=n, max_size=n))
    arrival = np.cumsum(gaps)
    out_len = draw(st.lists(st.integers(1, 20), min_size=n, max_size=n))
    grow = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    P, ids, last, fresh = [], [], {}, 10_000
    for i in range(n):
        prev_len, prev_ids = last.get(sess[i], (0, []))
        p = prev_len + grow[i]
        full = prev_len // bs
        row = prev_ids[:full]
        while len(row) < -(-p // bs):
            row.append(fresh)
            fresh += 1
        P.append(p)
        ids.append(row)
        last[sess[i]] = (p + out_len[i], row)
    with_ids = draw(st.booleans())
    return Workload.from_requests(arrival, P, out_len, ids if with_ids else None,
                                  block_size=bs, session_id=sess)


@st.composite
def fleets(draw) -> dict:
    seqs = draw(st.integers(1, 6))
    replicas = draw(st.integers(1, 3))
    routing = draw(st.sampled_from(["round_robin", "random", "least_loaded", "cache_aware",
                                    "kv_cost"]))
    kv_blocks = draw(st.integers(30, 120))  # of the workload's block size (helpers.simulate)
    engine = EngineConfig(
        max_num_seqs=seqs,
        max_batched_tokens=draw(st.integers(max(seqs, 8), 64)),
        chunked_prefill=draw(st.booleans()),
    )
    return dict(
        replicas=replicas,
        routing=routing,
        kv_blocks=kv_blocks,
        engine=engine,
        seed=draw(st.integers(0, 3)),
        cost_model=LinearCostModel(
            overhead_ms=draw(st.sampled_from([0.3, 1.0, 5.0])),
            prefill_token_ms=draw(st.sampled_from([0.0, 0.05])),
            decode_seq_ms=draw(st.sampled_from([0.0, 0.7])),
            decode_context_ms=draw(st.sampled_from([0.0, 0.003])),
        ),
        think_time=draw(st.sampled_from([None, None, 0.0, 4.0])),
        timeline_ms=5.0,
    )


def check_invariants(wl: Workload, res) -> None:
    r = res.requests
    n = len(wl)
    assert r.index.tolist() == list(range(n))
    assert set(r["status"]) <= {"finished", "rejected"}
    assert np.isfinite(r["arrival_ms"]).all()
    fin = r[r["status"] == "finished"]
    for c in ("scheduled_ms", "first_token_ms", "finish_ms"):
        assert np.isfinite(fin[c]).all()
    assert (fin["arrival_ms"] <= fin["scheduled_ms"]).all()
    assert (fin["scheduled_ms"] < fin["first_token_ms"]).all()
    assert (fin["first_token_ms"] <= fin["finish_ms"]).all()
    links = session_links(wl)
    first = links.parent < 0
    assert (r.loc[first, "arrival_shift_ms"] == 0).all()
    assert r.loc[first, "think_ms"].isna().all() and r.loc[~first, "think_ms"].ge(0).all()
    # turns never overlap: turn k+1 arrives at or after turn k finished (or was rejected)
    par = links.parent[~first]
    done_at = np.where(r["status"] == "finished", r["finish_ms"], r["arrival_ms"])
    kid_arr = r["arrival_ms"].to_numpy()[~first]
    if not kid_arr.size:
        return
    assert (kid_arr >= done_at[par]).all()
    assert kid_arr == pytest.approx(done_at[par] + r["think_ms"].to_numpy()[~first], rel=0,
                                    abs=1e-9 * (1 + np.abs(kid_arr).max()))


@SETTINGS
@given(wl=session_workloads(), cfg=fleets())
def test_invariants_and_turns_never_overlap(wl, cfg):
    check_invariants(wl, run(wl, **cfg))


def replay_open_loop(wl: Workload, res):
    """The same requests with the closed loop's simulated arrivals, open loop."""
    arr = res.requests["arrival_ms"].to_numpy()
    order = np.argsort(arr, kind="stable")  # ties: request order, as the closed loop's queue
    rows = [wl.block_ids(int(i)).tolist() for i in order] if wl.has_hash_ids else None
    wl2 = Workload.from_requests(arr[order], wl.input_len[order], wl.output_len[order], rows,
                                 block_size=wl.block_size)
    return wl2, order


COMPARED = ["replica", "scheduled_ms", "first_token_ms", "finish_ms", "cached_tokens",
            "computed_prefill_tokens", "preemptions", "status"]


@SETTINGS
@given(wl=session_workloads(), cfg=fleets())
def test_closed_loop_equals_open_replay_of_its_arrivals(wl, cfg):
    res = run(wl, **cfg)
    wl2, order = replay_open_loop(wl, res)
    cfg = {k: v for k, v in cfg.items() if k != "think_time"}
    open_ = simulate(wl2, **{"kv_blocks": 64, **cfg})
    a = res.requests.iloc[order].reset_index(drop=True).rename_axis("request_id")[COMPARED]
    b = open_.requests[COMPARED]
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@SETTINGS
@given(wl=session_workloads(), cfg=fleets())
def test_closed_loop_jump_equals_plain_loop(wl, cfg):
    fast = run(wl, **cfg, fast=True)
    plain = run(wl, **cfg, fast=False)
    pd.testing.assert_frame_equal(fast.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.replicas, plain.replicas, check_exact=True)
    pd.testing.assert_frame_equal(fast.timeline, plain.timeline, check_exact=True)


@hypothesis_settings(25, slow=True)
@given(wl=session_workloads(), cfg=fleets())
def test_closed_loop_with_a_shared_tier_equals_open_replay(wl, cfg):
    # a shared pool couples the replicas (advanced in global time order)
    if not wl.has_hash_ids:
        return
    pool = Tier("pool", capacity_tokens=64 * wl.block_size, read_gbps=1.0, write_gbps=1.0,
                shared=True)
    cost = LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.05, decode_seq_ms=0.1,
                           kv_bytes_per_token=2e4)
    cfg = {**cfg, "cost_model": cost, "tiers": [pool], "kv_blocks": 30}
    res = run(wl, **cfg)
    check_invariants(wl, res)
    wl2, order = replay_open_loop(wl, res)
    cfg.pop("think_time")
    open_ = simulate(wl2, **cfg)
    a = res.requests.iloc[order].reset_index(drop=True).rename_axis("request_id")[COMPARED]
    pd.testing.assert_frame_equal(a, open_.requests[COMPARED], check_exact=True)
    plain = run(wl, **cfg, think_time=res.config["think_time"], fast=False)
    pd.testing.assert_frame_equal(res.requests, plain.requests, check_exact=True)


FAST = LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.02, decode_seq_ms=0.1)
SLOW = LinearCostModel(overhead_ms=10.0, prefill_token_ms=0.2, decode_seq_ms=1.0)  # 10x


def _no_reuse(wl: Workload, session_id=None) -> Workload:
    """``wl`` without hash ids (nothing is cached), with these sessions (default its own)."""
    sessions = wl.frame["session_id"].to_numpy() if session_id is None else session_id
    return Workload.from_requests(wl.arrival_ms, wl.input_len, wl.output_len,
                                  block_size=wl.block_size, session_id=sessions)


@SETTINGS
@given(wl=session_workloads())
def test_shift_only_grows_along_a_session_without_reuse(wl):
    # Without hash ids nothing is cached, so a turn k never runs faster than alone on
    # an idle replica: its service s_k (arrival to finish) >= est_k, its idle
    # estimate. Turn k+1 is sent at finish_k + think, think = max(0, gap_k - est_k)
    # (gap_k: the recorded arrival of turn k+1 minus that of turn k), so its shift
    #   shift_{k+1} = arr_k + s_k + max(0, gap_k - est_k) - (rec_k + gap_k)
    #              >= shift_k + (s_k - est_k) >= shift_k.
    # (Across fleets there is no such order: a slower fleet may delay a turn less,
    # see test_a_slower_fleet_may_delay_a_later_turn_less.)
    wl = _no_reuse(wl)
    links = session_links(wl)
    later = links.parent >= 0
    for cost in (FAST, SLOW):
        r = run(wl, cost_model=cost, replicas=1, engine=EngineConfig(max_num_seqs=4),
                kv_blocks=400).requests
        s = r["arrival_shift_ms"].to_numpy()
        assert (s[~later] == 0).all()
        assert (s[later] >= s[links.parent[later]] - 1e-9).all()


@SETTINGS
@given(wl=session_workloads())
def test_one_session_alone_is_late_by_its_overruns(wl):
    # One session and no other traffic: each turn runs alone on an idle replica (the
    # previous turn has finished), so s_k = est_k, and the recursion above is an
    # equality: shift_{k+1} = shift_k + max(0, est_k - gap_k), a turn is late by the
    # overruns of its recorded gaps so far. est_k is a sum of step times, each at
    # least as long on a fleet whose every coefficient is at least as large, so
    # such a fleet (10x here) shifts every turn at least as much.
    wl = _no_reuse(wl, session_id=np.zeros(len(wl), dtype=np.int64))
    links = session_links(wl)
    later = np.flatnonzero(links.parent >= 0)
    par = links.parent[later]
    engine = EngineConfig(max_num_seqs=4)
    rec = wl.arrival_ms
    shifts = []
    for cost in (FAST, SLOW):
        r = run(wl, cost_model=cost, replicas=1, engine=engine, kv_blocks=400).requests
        est = idle_service_ms(wl, cost, max_batched_tokens=engine.max_batched_tokens,
                              chunked_prefill=engine.chunked_prefill)
        tol = 1e-9 * (1 + r["finish_ms"].max())
        assert r["e2e_ms"].to_numpy() == pytest.approx(est, rel=0, abs=tol)  # alone
        s = r["arrival_shift_ms"].to_numpy()
        overrun = np.maximum(0.0, est[par] - (rec[later] - rec[par]))
        assert s[later] == pytest.approx(s[par] + overrun, rel=0, abs=tol)
        shifts.append(s)
    assert (shifts[1] >= shifts[0] - 1e-9).all()


def test_a_slower_fleet_may_delay_a_later_turn_less():
    # Hypothesis found that a 10x slower fleet does not delay every turn at least as
    # much once sessions share a replica (queueing is not monotone in the fleet's
    # speed). Block size 4, one output token each, no reuse, one replica of 4
    # sequences; session 2 is requests 4, 13, 14 (recorded at 0, 66, 86), session 0
    # the other 12 turns.
    # Fast fleet (1 ms + 0.02 a token): request 4 shares its step with request 0 (2
    # tokens: 1.04 ms; alone 1.02): think 66 - 1.02 = 64.98, request 13 is sent at
    # 1.04 + 64.98 = 66.02 (shift 0.02), while session 0's turn 7 (13 tokens) runs
    # [65.60, 66.86]; it then runs beside turn 8 (15 tokens), 1 + 0.02 * 18 = 1.36:
    # done at 68.22, 1.16 ms after its 1.06 alone; think 20 - 1.06 = 18.94: request 14
    # is sent at 87.16, shift 1.16.
    # Slow fleet (10 ms + 0.2 a token): request 4's step takes 10.4 (alone 10.2):
    # request 13 is sent at 10.4 + 55.8 = 66.2 (shift 0.2). Session 0's turns overran
    # their gaps: its turn 4 ends at 43.4, its turn 5 comes at 43.4 + (60 - 11.4) = 92.
    # So the replica is idle at 66.2, request 13 runs alone (10.6, done at 76.8) and
    # request 14 is sent at 76.8 + (20 - 10.6) = 86.2: shift 0.2 < 1.16.
    wl = Workload.from_requests(
        [0, 0, 0, 0, 0, 60, 60, 60, 60, 60, 60, 63, 63, 66, 86],
        [1, 3, 5, 7, 1, 9, 11, 13, 15, 17, 19, 21, 23, 3, 5], [1] * 15, block_size=4,
        session_id=[0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2],
    )
    kw = dict(replicas=1, engine=EngineConfig(max_num_seqs=4), kv_blocks=400)
    fast = run(wl, cost_model=FAST, **kw).requests
    slow = run(wl, cost_model=SLOW, **kw).requests
    assert fast["arrival_ms"][[13, 14]].tolist() == pytest.approx([66.02, 87.16])
    assert fast["finish_ms"][[7, 13]].tolist() == pytest.approx([66.86, 68.22])
    assert fast["scheduled_ms"][13] == pytest.approx(66.86)
    assert slow["arrival_ms"][[5, 13, 14]].tolist() == pytest.approx([92.0, 66.2, 86.2])
    assert slow["scheduled_ms"][13] == pytest.approx(66.2)  # (no wait)
    assert fast["arrival_shift_ms"][14] == pytest.approx(1.16)
    assert slow["arrival_shift_ms"][14] == pytest.approx(0.2)  # less, on the slower fleet


@st.composite
def disagg_fleets(draw) -> dict:
    cfg = draw(fleets())
    del cfg["replicas"]
    cfg["routing"] = draw(st.sampled_from(["round_robin", "least_loaded", "kv_cost",
                                           "conductor"]))
    cfg["cost_model"] = LinearCostModel(
        overhead_ms=cfg["cost_model"].overhead_ms,
        prefill_token_ms=cfg["cost_model"].prefill_token_ms,
        decode_seq_ms=cfg["cost_model"].decode_seq_ms,
        kv_bytes_per_token=draw(st.sampled_from([1e3, 1e6])),
    )
    return dict(cfg, replicas=Disaggregated(prefill=draw(st.integers(1, 2)),
                                            decode=draw(st.integers(1, 2)), handoff_gbps=1.0,
                                            layerwise=draw(st.booleans())))


@SETTINGS
@given(wl=session_workloads(), cfg=disagg_fleets())
def test_disaggregated_closed_loop(wl, cfg):
    # turns never overlap; the closed loop equals an open replay of its own
    # arrivals; the jump equals the plain loop
    res = run(wl, **cfg)
    check_invariants(wl, res)
    wl2, order = replay_open_loop(wl, res)
    open_ = simulate(wl2, **{"kv_blocks": 64,
                             **{k: v for k, v in cfg.items() if k != "think_time"}})
    a = res.requests.iloc[order].reset_index(drop=True).rename_axis("request_id")[COMPARED + ["decode_replica"]]
    pd.testing.assert_frame_equal(a, open_.requests[COMPARED + ["decode_replica"]],
                                  check_exact=True)
    plain = run(wl, **cfg, fast=False)
    pd.testing.assert_frame_equal(res.requests, plain.requests, check_exact=True)


def test_disaggregated_two_turns_exact_times():
    # one prefill and one decode instance, 1 MB of KV per token over 1 GB/s + 5 us:
    # turn 1 (32 tokens): prefill 6.6, transfer 32 MB = 32 ms + 0.005 -> 38.605,
    # joins the decode step at once: two decode steps of 5.1 -> finish 48.805;
    # think (estimate as on an aggregated replica, 16.8) = 100 - 16.8 = 83.2
    # -> turn 2 arrives at 132.005
    cost = LinearCostModel(kv_bytes_per_token=1e6)
    r = run(two_turns(), cost_model=cost,
            replicas=Disaggregated(prefill=1, decode=1, handoff_gbps=1.0)).requests
    assert r["finish_ms"].tolist()[0] == pytest.approx(48.805)
    assert r["arrival_ms"].tolist() == pytest.approx([0.0, 132.005])


# ------------------------------------------------------------------ regressions
# (both found by hunting test_disaggregated_closed_loop with thousands of examples)


def test_same_step_handoffs_go_out_in_admission_order_not_request_id_order():
    # one prefill instance (2 slots, 1 ms steps, no per-token cost), two decode
    # instances, think time 0:
    #   rid 0 (session A, t=0, 1 token) runs alone in [0, 1];
    #   rid 2 (session B, t=0.5, 2 tokens) waits for the step starting at 1;
    #   rid 1 (session A's turn 2, recorded at 0, 2 tokens) arrives at rid 0's
    #   finish, 1.0, and joins the same step, behind rid 2.
    # Both first tokens come at 2.0. The step produced rid 2 first, so rid 2's
    # KV is placed first: on the least active decode instance, ties to the
    # lowest index, replica 1; its reservation makes replica 2 the least active
    # for rid 1. (Ordered by request id, rid 1 would take replica 1, and the open
    # replay, which renumbers the requests by arrival, would disagree.)
    wl = Workload.from_requests([0.0, 0.0, 0.5], [4, 8, 4], [1, 2, 2], block_size=4,
                                session_id=[0, 0, 1])
    cost = LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.0, decode_seq_ms=0.0,
                           kv_bytes_per_token=1e3)
    cfg = dict(cost_model=cost, replicas=Disaggregated(prefill=1, decode=2, handoff_gbps=1.0),
               engine=EngineConfig(max_num_seqs=2), think_time=0.0)
    res = run(wl, **cfg)
    r = res.requests
    assert r["arrival_ms"].tolist() == [0.0, 1.0, 0.5]
    assert r["scheduled_ms"].tolist() == [0.0, 1.0, 1.0]
    assert r["first_token_ms"].tolist() == [1.0, 2.0, 2.0]
    assert r["decode_replica"].tolist() == [-1, 2, 1]
    wl2, order = replay_open_loop(wl, res)
    cfg.pop("think_time")
    open_ = simulate(wl2, kv_tokens=64 * 4, **cfg)
    a = res.requests.iloc[order].reset_index(drop=True).rename_axis("request_id")[COMPARED + ["decode_replica"]]
    pd.testing.assert_frame_equal(a, open_.requests[COMPARED + ["decode_replica"]],
                                  check_exact=True)


def test_closed_loop_decode_steps_see_reservations_made_at_their_start():
    # the shrunk counterexample: 1 prefill + 1 decode instance, one slot each,
    # layerwise handoffs, 0.3 ms steps. At 17.1 a prompt's prefill starts and its
    # layerwise handoff reserves decode room, at the very instant the decode
    # instance's next step starts. With its decode instances advanced eagerly (a
    # waited-for turn in flight) the closed loop used to start that step first
    # (and the handoff then found no room), while the open replay, advancing the
    # decode instance lazily, reserved first (a step starting at t sees what is
    # placed at t, as an arrival at t joins the step starting at t). Both now
    # reserve first, so the closed loop equals the open replay of its arrivals.
    wl = Workload.from_requests(
        [0.0] * 17,
        [1, 1, 10, 12, 14, 18, 16, 18, 20, 39, 70, 36, 38, 40, 45, 74, 47],
        [8, 16, 1, 1, 1, 20, 1, 1, 15, 1, 3, 1, 1, 1, 1, 1, 3],
        block_size=4,
        session_id=[0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0],
    )
    cost = LinearCostModel(overhead_ms=0.3, prefill_token_ms=0.0, decode_seq_ms=0.0,
                           kv_bytes_per_token=1e3)
    cfg = dict(cost_model=cost, routing="round_robin", kv_tokens=30 * 4,
               engine=EngineConfig(max_num_seqs=1, max_batched_tokens=8, chunked_prefill=False),
               seed=0, timeline_ms=5.0,
               replicas=Disaggregated(prefill=1, decode=1, handoff_gbps=1.0, layerwise=True))
    res = run(wl, **cfg)
    check_invariants(wl, res)
    wl2, order = replay_open_loop(wl, res)
    open_ = simulate(wl2, **cfg)
    a = res.requests.iloc[order].reset_index(drop=True).rename_axis("request_id")[COMPARED + ["decode_replica"]]
    pd.testing.assert_frame_equal(a, open_.requests[COMPARED + ["decode_replica"]],
                                  check_exact=True)
    plain = run(wl, **cfg, fast=False)
    pd.testing.assert_frame_equal(res.requests, plain.requests, check_exact=True)


# ------------------------------------------------------------------ a real trace


@pytest.fixture(scope="module")
def conversation_slice(conversation_path) -> Workload:
    return Workload.from_mooncake(conversation_path).head(600)


def test_infinitely_fast_fleet_replays_the_recorded_arrivals(conversation_slice):
    wl = conversation_slice
    tiny = LinearCostModel(overhead_ms=1e-9, prefill_token_ms=0.0, decode_seq_ms=0.0)
    res = run(wl, cost_model=tiny, replicas=2, kv_tokens=10**6 * wl.block_size)
    r = res.requests
    assert (r["turn"] > 1).sum() > 50  # the slice has many inferred later turns
    assert np.abs(r["arrival_shift_ms"]).max() < 1e-6
    # a 10x slower (than the default) fleet of one replica delays the later turns
    slow = LinearCostModel(overhead_ms=50.0, prefill_token_ms=0.5, decode_seq_ms=1.0)
    r2 = run(wl, cost_model=slow, replicas=1, kv_tokens=10**5 * wl.block_size).requests
    later = r2["turn"] > 1
    assert (r2.loc[~later, "arrival_shift_ms"] == 0).all()
    assert r2.loc[later, "arrival_shift_ms"].mean() > 1000.0
    by_turn = r2[later].groupby("turn")["arrival_shift_ms"].mean()
    assert by_turn.iloc[-1] > by_turn.iloc[0]
    check_invariants(wl, res)
    check_invariants(wl, run(wl, cost_model=slow, replicas=1, kv_tokens=10**5 * wl.block_size))
