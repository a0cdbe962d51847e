"""Admission (early rejection) and the conductor router.

* hand-computed SLO rejections with ``LinearCostModel`` (5 ms + 0.05 ms per
  prefill token + 0.1 ms per decode sequence a step, block size 16);
* a generous SLO rejects nothing and gives the admit-all frames;
* rejected requests consume nothing: the run equals the run of the workload
  without them;
* the conductor picks what a brute-force TTFT estimate picks, computed here
  from the replica's internal queues with an independent chunk loop (the
  views' estimates are memoised); a subclass that checks it routes as the
  built-in does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import assert_same, hypothesis_settings, runner, sim_configs, sim_workloads, simulate
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.sim import EngineConfig, LinearCostModel, SloAdmission
from inferasim.sim.router import ConductorRouter

BS = 16
LIN = LinearCostModel()
SETTINGS = hypothesis_settings(40, slow=True)
run = runner(kv_tokens=1000 * BS, cost_model=LIN)


def test_slo_rejects_a_request_queued_behind_a_long_prompt():
    # A (640 tokens, 2 out) arrives at 0: its prefill runs in chunks of 256
    # (max_batched_tokens): 256 + 256 + 128 -> steps of 17.8, 17.8, 11.4 ms (first token
    # at 47.0). B (64 tokens) arrives at 1: predicted wait = rest of step 1 (17.8 - 1 =
    # 16.8) + A's remaining 384 tokens (17.8 + 11.4 = 29.2) = 46.0, plus B's own
    # prefill 5 + 3.2 = 8.2: TTFT 54.2 > 50 -> rejected. C (64 tokens) arrives at 100,
    # after A finished (47.0 + 5.1 = 52.1): predicted 8.2 -> admitted, TTFT 8.2.
    wl = Workload.from_requests([0, 1, 100], [640, 64, 64], [2, 2, 2], block_size=BS)
    res = run(wl, engine=EngineConfig(max_batched_tokens=256), admission=SloAdmission(ttft_ms=50.0))
    req = res.requests
    assert req["status"].tolist() == ["finished", "rejected", "finished"]
    assert req["replica"].tolist() == [0, -1, 0]
    assert req["reason"][1] == "admission: predicted TTFT 54.2 ms > ttft_ms 50.0"
    assert req["ttft_ms"][0] == pytest.approx(47.0)
    assert req["ttft_ms"][2] == pytest.approx(8.2)
    assert np.isnan(req["first_token_ms"][1]) and np.isnan(req["finish_ms"][1])
    assert req["computed_prefill_tokens"].tolist() == [640, 0, 64]
    s = res.summary(slo_ttft_ms=50.0)
    assert s["rejected"] == 1 and s["slo_attainment"] == pytest.approx(2 / 3)


def test_slo_rejects_on_predicted_tpot():
    # decode_seq_ms = 3: with one sequence decoding, a second one makes a decode step
    # 5 + 2 * 3 = 11 ms > 10 -> B is rejected; alone, C's step is 5 + 3 = 8 -> admitted.
    cost = LinearCostModel(decode_seq_ms=3.0)
    wl = Workload.from_requests([0, 20, 1000], [32, 32, 32], [20, 20, 20], block_size=BS)
    res = run(wl, cost_model=cost, admission=SloAdmission(tpot_ms=10.0))
    assert res.requests["status"].tolist() == ["finished", "rejected", "finished"]
    assert res.requests["reason"][1] == "admission: predicted TPOT 11.0 ms > tpot_ms 10.0"


def test_admission_callable_sees_the_chosen_replica_at_arrival():
    seen = []

    def admit(request, views, now):
        seen.append((request.request_id, now, [v.index for v in views], views[0].queue_len))
        return request.request_id != 1

    wl = Workload.from_requests([0, 0, 5], [32, 32, 32], [2, 2, 2], block_size=BS)
    res = run(wl, replicas=2, routing="round_robin", admission=admit)
    assert seen == [(0, 0.0, [0], 0), (1, 0.0, [1], 0), (2, 5.0, [0], 0)]
    assert res.requests["status"].tolist() == ["finished", "rejected", "finished"]
    assert res.requests["reason"][1] == "rejected by admission"


def test_bad_admission_arguments():
    wl = Workload.from_requests([0], [32], [2], block_size=BS)
    with pytest.raises(ValueError, match="needs ttft_ms= or tpot_ms="):
        run(wl, admission=SloAdmission())
    with pytest.raises(TypeError, match="admission must be None or a callable"):
        run(wl, admission="early")
    # (the constructor checks its objectives, by the rule of every SLO)
    with pytest.raises(ValueError, match=r"admission.ttft_ms must be None or a finite number > 0"):
        run(wl, admission=SloAdmission(ttft_ms=-1))


@SETTINGS
@given(wl=sim_workloads(), cfg=sim_configs(), routing=st.sampled_from([None, "conductor"]))
def test_generous_slo_rejects_nothing_and_changes_nothing(wl, cfg, routing):
    if routing is not None:
        cfg = {**cfg, "routing": routing}
    base = simulate(wl, **cfg)
    slo = simulate(wl, **cfg, admission=SloAdmission(ttft_ms=1e12, tpot_ms=1e12))
    assert_same(base, slo)


def _without(wl: Workload, drop: set[int]) -> Workload:
    keep = [i for i in range(len(wl)) if i not in drop]
    return Workload.from_requests(
        wl.arrival_ms[keep],
        wl.input_len[keep],
        wl.output_len[keep],
        [wl.block_ids(i).tolist() for i in keep] if wl.has_hash_ids else None,
        block_size=wl.block_size,
    )


@SETTINGS
@given(
    wl=sim_workloads(),
    cfg=sim_configs(),
    routing=st.sampled_from(["least_loaded", "cache_aware", "conductor"]),
    data=st.data(),
)
def test_rejected_requests_consume_nothing(wl, cfg, routing, data):
    # Rejecting a set of requests gives, for the others, exactly the run of the
    # workload without them (state-driven routers: no counter or RNG per request).
    n = len(wl)
    drop = set(data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=n)))
    drop.discard(0)  # keep the first arrival: it anchors the timeline
    drop = {i for i in drop if i < n}
    cfg = {**cfg, "routing": routing, "timeline_ms": 3.0}
    rej = simulate(wl, **cfg, admission=lambda r, v, t: r.request_id not in drop)
    ref = simulate(_without(wl, drop), **cfg)
    rq = rej.requests
    assert (rq.loc[sorted(drop), "status"] == "rejected").all()
    assert (rq.loc[sorted(drop), "replica"] == -1).all()
    assert (rq.loc[sorted(drop), "computed_prefill_tokens"] == 0).all()
    # the kept requests renumbered 0..k-1 (the index, request_id) are the other run's
    kept = rq.drop(index=sorted(drop)).reset_index(drop=True).rename_axis("request_id")
    other = ref.requests
    pd.testing.assert_frame_equal(kept, other, check_exact=True)
    pd.testing.assert_frame_equal(rej.replicas, ref.replicas, check_exact=True)
    pd.testing.assert_frame_equal(rej.timeline, ref.timeline, check_exact=True)


# ------------------------------------------------------------------ conductor


def _brute_ttft(rep, ids, limit, input_len, now, cost) -> float:
    """TTFT estimate from the replica's internals (its scheduler's queues and current
    step, its decode group, its prefix cache), chunk by chunk (independent loop)."""
    sched, B, S = rep.sched, rep.group.batch, rep.group.context
    budget = max(sched.max_tokens - B, 1)

    def prefill(tokens: int, start: int) -> float:
        chunks = [budget] * (tokens // budget) + ([tokens % budget] if tokens % budget else [])
        t, c = 0.0, start
        for n in chunks:
            t += cost.step_time_ms(n, sum(range(c + 1, c + n + 1)), B, S)
            c += n
        return t

    in_flight = {id(s): n for s, n in sched.chunks} if sched.in_step else {}
    pending = sum(s.tokens for s in sched.waiting) + sum(
        s.tokens - s.computed - in_flight.get(id(s), 0) for s in sched.prefilling
    )
    wait = max(sched.step_end - now, 0.0) if sched.in_step else 0.0
    hit = 0
    for h in ids[:limit]:
        if h not in rep.kv.cache.ref:
            break
        hit += 1
    cached = hit * rep.kv.bs
    return wait + prefill(pending, 0) + prefill(input_len - cached, cached)


class _Checking(ConductorRouter):
    """The conductor, checked against the brute force at every arrival."""

    def __init__(self, cost):
        self.cost = cost
        self.calls = 0

    def __call__(self, request, replicas):
        choice = super().__call__(request, replicas)
        reps = [v.rep for v in replicas]  # the replicas behind the views (advanced to now)
        ids = list(request.hash_ids)
        limit = min((request.input_len - 1) // reps[0].kv.bs, len(ids))
        est = [
            _brute_ttft(r, ids, limit, request.input_len, request.arrival_ms, self.cost)
            for r in reps
        ]
        best = min(est)
        ties = [i for i, e in enumerate(est) if e == best]
        loads = [reps[i].sched.outstanding for i in ties]
        want = ties[loads.index(min(loads))]
        assert choice == want, (est, choice, want)
        self.calls += 1
        return choice


@SETTINGS
@given(wl=sim_workloads(allow_no_ids=False), cfg=sim_configs())
def test_conductor_picks_the_brute_force_minimum(wl, cfg):
    router = _Checking(cfg["cost_model"])
    res = simulate(wl, **{**cfg, "routing": router})
    assert router.calls == int((res.requests["status"] == "finished").sum())
    assert_same(res, simulate(wl, **{**cfg, "routing": "conductor"}))


def test_conductor_prefers_the_cached_replica_until_its_queue_costs_more():
    # Replica 0 caches blocks 1..4 (64 tokens) from A (80 tokens, 1 out, done at 9.0).
    # B (80 tokens, blocks 1..5) at 100: replica 0 computes 16 tokens (5.8 ms),
    # replica 1 all 80 (9.0 ms) -> replica 0.
    # C at 100.5, the same prompt: replica 0 is busy with B until 105.8 (5.3 ms) and
    # then C computes 16 tokens (5.8): 11.1 > 9.0 on idle replica 1 -> replica 1.
    wl = Workload.from_requests(
        [0, 100, 100.5],
        [80, 80, 80],
        [1, 1, 1],
        [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]],
        block_size=BS,
    )
    res = run(wl, replicas=2, routing="conductor")
    assert res.requests["replica"].tolist() == [0, 0, 1]
    assert res.requests["ttft_ms"].tolist() == pytest.approx([9.0, 5.8, 9.0])
