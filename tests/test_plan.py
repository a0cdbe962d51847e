"""Capacity planning: max_rate and min_replicas on hand-computable queues, pareto, cost."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferasim as ism
from inferasim import plan

# A D/D/1 queue by construction: one replica that runs one sequence at a time
# (max_num_seqs=1), prompts of P=100 tokens in one step (max_batched_tokens=100),
# one output token, no hash ids (no reuse). LinearCostModel() defaults: step =
# 5 ms overhead + 0.05 ms/token * 100 = S = 10 ms, and the one output token comes
# with the prefill step (TTFT of a lone request = S).
S = 10.0
G0 = 10.0  # ms between arrivals at load 1
N = 50


def dd1_workload(n: int = N, gap: float = G0) -> ism.Workload:
    return ism.Workload.from_requests([gap * k for k in range(n)], [100] * n, [1] * n)


def dd1_simulator(**kw) -> ism.Simulator:
    params = dict(
        engine=ism.EngineConfig(max_num_seqs=1, max_batched_tokens=100),
        kv_tokens=8 * 512,
        cost_model=ism.LinearCostModel(),
    )
    params.update(kw)
    return ism.Simulator(**params)


QUIET = {"progress": False}  # the probes' Simulator.run options


def test_the_queue_is_the_one_the_derivation_assumes():
    # At load x the gap is G0/x; above x = 1 request k waits k * (S - G0/x).
    # x = 1.25: gap 8 ms, TTFT_k = 10 + 2k.
    r = dd1_simulator().run(dd1_workload().scale_time(1 / 1.25), progress=False).requests
    np.testing.assert_allclose(r["ttft_ms"].to_numpy(), S + 2.0 * np.arange(N))


@pytest.mark.parametrize("slo", [30.0, 60.0])
@pytest.mark.parametrize("rtol", [0.01, 0.05])
def test_max_rate_matches_the_hand_derived_threshold(slo, rtol):
    # TTFT_k = S + k * (S - G0/x) for k = 0..N-1 (0 queueing while x <= 1).
    # numpy's linear p99 of this arithmetic sequence sits at position
    # q = 0.99 * (N - 1) = 48.51: p99 = S + q * (S - G0/x). The objective
    # p99 <= slo holds exactly while x <= G0 / (S - (slo - S) / q).
    q = 0.99 * (N - 1)
    x_exact = G0 / (S - (slo - S) / q)  # 1.0430 for slo=30, 1.0955 for slo=60
    cap = plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=slo, rtol=rtol, run=QUIET)
    assert x_exact / (1 + rtol) <= cap.load <= x_exact
    assert cap.scale_time == pytest.approx(1 / cap.load)
    # offered rate = n * 1000 / span (the package's convention) times the load
    assert cap.rate_rps == pytest.approx(N * 1000 / (G0 * (N - 1)) * cap.load)
    # every probe above the threshold failed, every probe below it met
    p = cap.probes
    assert p.loc[p["load"] <= x_exact, "meets_slo"].all()
    assert not p.loc[p["load"] > x_exact, "meets_slo"].any()
    assert cap.ttft_ms <= slo


def test_max_rate_searches_down_when_the_start_is_too_high():
    q = 0.99 * (N - 1)
    x_exact = G0 / (S - 20.0 / q)
    cap = plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=30.0, start=8.0, rtol=0.01, run=QUIET)
    assert x_exact / 1.01 <= cap.load <= x_exact


def test_max_rate_is_zero_when_no_load_meets_the_objective():
    # a lone request already takes S = 10 ms to its first token
    cap = plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=9.0, min_load=0.25, run=QUIET)
    assert cap.load == 0.0 and cap.rate_rps == 0.0
    assert not cap.probes["meets_slo"].any()


def test_max_rate_tpot_objective_hand_case():
    # Two-token outputs: one decode step after the prefill. With one sequence at
    # a time and no queueing (gap 100 ms at load 1 > S + decode) TPOT = one
    # decode step = 5 ms + 0.1 ms * 1 sequence = 5.1 ms at every load below
    # saturation; a TPOT bound of 5.0 can never be met, 5.2 always (TTFT may
    # grow, TPOT does not), so max_rate runs to max_load.
    wl = ism.Workload.from_requests([100.0 * k for k in range(20)], [100] * 20, [2] * 20)
    sim = dd1_simulator()
    assert plan.max_rate(wl, sim, slo_tpot_ms=5.0, min_load=0.5, run=QUIET).load == 0.0
    cap = plan.max_rate(wl, sim, slo_tpot_ms=5.2, max_load=16.0, run=QUIET)
    assert cap.load == 16.0 and cap.tpot_ms == pytest.approx(5.1)


@pytest.mark.parametrize("gap, expect", [(3.0, 4), (5.0, 2), (2.4, 5)])
def test_min_replicas_hand_case(gap, expect):
    # Round-robin over R replicas: each sees one request every R * gap ms and
    # serves it in S = 10 ms, so it keeps up iff R * gap >= S: R = ceil(S / gap).
    # With fewer, its k-th request waits k * (S - R * gap) > 1 ms for k >= 2
    # (there are >= 60 requests per replica): the 11 ms objective fails.
    n = 300
    wl = dd1_workload(n, gap)
    res = plan.min_replicas(wl, dd1_simulator(routing="round_robin"), slo_ttft_ms=11.0, run=QUIET)
    assert expect == math.ceil(S / gap)
    assert res.replicas == expect and res.gpus == expect
    tried = res.probes.set_index("replicas")["meets_slo"]
    assert tried[expect] and not tried[expect - 1]


def test_min_replicas_rate_form_equals_load_form():
    wl = dd1_workload(300, 6.0)
    sim = dd1_simulator(routing="round_robin")
    offered = 300 * 1000 / (6.0 * 299)
    a = plan.min_replicas(wl, sim, load=2.0, slo_ttft_ms=11.0, run=QUIET)
    b = plan.min_replicas(wl, sim, rate=2.0 * offered, slo_ttft_ms=11.0, run=QUIET)
    # load 2: gap 3 ms -> ceil(10 / 3) = 4 replicas
    assert a.replicas == b.replicas == 4


def test_min_replicas_gives_up_at_max_replicas():
    # load 4: a request every 2.5 ms, 10 ms each; round-robin over r <= 3 replicas gives each
    # one every 2.5 * r <= 7.5 ms < 10 ms, so requests share a replica on every probe, and a
    # 9 ms TTFT (below the 10 ms of a lone request) is never met
    res = plan.min_replicas(dd1_workload(), dd1_simulator(routing="round_robin"), load=4.0,
                            slo_ttft_ms=9.0, max_replicas=3, run=QUIET)
    assert res.replicas == 0
    assert sorted(res.probes["replicas"]) == [1, 2, 3]
    assert res.note == "no fleet meets the objective: it is missed up to max_replicas=3"


def test_min_replicas_stops_when_every_request_already_runs_alone():
    # load 1: one 10 ms request every 10 ms on one replica: each runs alone (one finishes as
    # the next arrives) with TTFT 10 ms > 9 ms; more replicas cannot lower it, so one probe
    res = plan.min_replicas(dd1_workload(), dd1_simulator(), slo_ttft_ms=9.0, run=QUIET)
    assert res.replicas == 0 and res.probes["replicas"].tolist() == [1]
    assert res.note.startswith("no fleet meets the objective: with 1 replicas no two requests")


def test_cost_per_million_tokens_by_hand():
    # At load 1 the D/D/1 fleet serves 50 requests of 101 tokens (100 prompt +
    # 1 output) from 0 to the last finish at 49 * 10 + 10 = 500 ms: 10,100
    # tokens/s. One GPU at $3.6/h costs $0.001/s: $0.001 / 10,100 * 1e6 per
    # million tokens.
    cap = plan.max_rate(
        dd1_workload(), dd1_simulator(), slo_ttft_ms=10.5, rtol=0.05, usd_per_gpu_hour=3.6, run=QUIET
    )
    assert cap.usd_per_million_tokens == pytest.approx(0.001 / 10_100 * 1e6)


def test_pareto_hand_case():
    df = pd.DataFrame(
        {
            "gpus": [8, 4, 8, 16, 4, 12, 16, 2],
            "ttft": [300.0, 900.0, 500.0, 300.0, 900.0, np.nan, 100.0, 5000.0],
        },
        index=list("abcdefgh"),
    )
    # h (2 GPUs) is cheapest; b and e tie at (4, 900) and are both kept; a beats c
    # (same GPUs, lower TTFT) and d (fewer GPUs, same TTFT); f failed (NaN); g is
    # the fastest.
    front = plan.pareto(df, "gpus", "ttft")
    assert front.index.tolist() == ["h", "b", "e", "a", "g"]
    # maximizing the second column flips the order of preference on it
    front = plan.pareto(df, "gpus", "ttft", maximize=["ttft"])
    assert front.index.tolist() == ["h"]


def _dominated_brute_force(xs, ys):
    keep = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        dom = any(
            (x2 <= x and y2 <= y) and (x2 < x or y2 < y)
            for j, (x2, y2) in enumerate(zip(xs, ys, strict=True))
            if j != i
        )
        if not dom:
            keep.append(i)
    return keep


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=25
    )
)
def test_pareto_equals_the_quadratic_definition(points):
    df = pd.DataFrame(points, columns=["x", "y"]).astype(float)
    got = sorted(plan.pareto(df, "x", "y").index.tolist())
    assert got == _dominated_brute_force(df["x"].tolist(), df["y"].tolist())


def test_with_cost_columns():
    df = pd.DataFrame({"gpus": [1, 4], "input_tok_s": [1000.0, 3000.0], "output_tok_s": [0.0, 1000.0]})
    out = plan.with_cost(df, 2.0)
    # 4 GPUs at $2/h = $8/h = $1/450 per s; 4000 tok/s -> $1/450/4000*1e6 = 0.5556
    assert out["usd_per_hour"].tolist() == [2.0, 8.0]
    assert out["usd_per_million_tokens"].iloc[1] == pytest.approx(8 / 3600 / 4000 * 1e6)
    assert out["usd_per_million_output_tokens"].iloc[1] == pytest.approx(8 / 3600 / 1000 * 1e6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "give an objective"),
        ({"slo_ttft_ms": -1}, "slo_ttft_ms must be"),
        ({"slo_ttft_ms": 10, "percentile": 0}, "percentile"),
        ({"slo_ttft_ms": 10, "rtol": 0}, "rtol"),
    ],
)
def test_max_rate_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan.max_rate(dd1_workload(), dd1_simulator(), **kwargs, run=QUIET)


def test_bad_input_names_the_problem():
    with pytest.raises(TypeError, match="simulator must be a Simulator"):
        plan.max_rate(dd1_workload(), object(), slo_ttft_ms=10)
    with pytest.raises(KeyError, match="no column 'nope'"):
        plan.pareto(pd.DataFrame({"a": [1]}), "a", "nope")
    with pytest.raises(ValueError, match="spans no time"):
        plan.min_replicas(dd1_workload(1), dd1_simulator(), slo_ttft_ms=10, run=QUIET)


def test_probes_run_on_copies_with_the_run_options():
    # min_replicas sets replicas on its own copies: the simulator and its router
    # (told the 16-token block size by every run) stay as they were; run= holds
    # Simulator.run options only
    router = ism.sim.KvCostRouter(overlap_weight=3.0)
    sim = dd1_simulator(routing=router)
    wl = dd1_workload(300, 3.0)
    wl16 = ism.Workload.from_requests(wl.arrival_ms, wl.input_len, wl.output_len, block_size=16)
    res = plan.min_replicas(wl16, sim, slo_ttft_ms=11.0,
                            run={"timeline_ms": 1.0, "progress": False})
    assert res.replicas >= 2 and sim.replicas == 1
    assert router.overlap_weight == 3.0
    with pytest.raises(ValueError, match="run= takes options of Simulator.run"):
        plan.max_rate(dd1_workload(), sim, slo_ttft_ms=30.0, run={"replicas": 2})


def test_min_replicas_refuses_a_disaggregated_fleet_and_max_rate_takes_one():
    # sizing replaces replicas= by an int: a P/D fleet must not silently become one
    cost = ism.LinearCostModel(kv_bytes_per_token=1e3)
    pd_sim = dd1_simulator(replicas=ism.Disaggregated(prefill=1, decode=1), cost_model=cost)
    with pytest.raises(ValueError, match="sizes an aggregated fleet"):
        plan.min_replicas(dd1_workload(), pd_sim, slo_ttft_ms=30.0, run=QUIET)
    cap = plan.max_rate(dd1_workload(), pd_sim, slo_ttft_ms=30.0, run=QUIET)
    assert (cap.probes["replicas"] == 2).all() and cap.gpus == 2


# ---------------------------------------------- reliability (issue 23, class 6)


@pytest.mark.parametrize("kwargs, name", [
    ({"max_load": math.inf}, "max_load"),
    ({"min_load": math.nan}, "min_load"),
    ({"start": math.nan}, "start"),
    ({"max_load": True}, "max_load"),
])
def test_max_rate_refuses_unbounded_limits(kwargs, name):
    # Before: max_load=inf doubled the load ~1,000 times, then "factor ... got 0.0"
    with pytest.raises(ValueError, match=rf"^{name} must be a finite number"):
        plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=1e9, run=QUIET, **kwargs)


def test_max_rate_stops_where_a_higher_load_is_the_same_run():
    # The D/D/1 arrivals span 49 * 10 = 490 ms; at load 490 / 1e-3 = 490,000 they all fall
    # within 1 µs. Doubling from 1 probes 2**0 .. 2**18 = 262,144 (19 probes, all met with
    # a 1e9 ms objective), then 490,000 (the 20th) instead of 2**19.
    cap = plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=1e9, max_load=1e300,
                        run=QUIET)
    assert len(cap.probes) == 20 and cap.probes["meets_slo"].all()
    assert cap.load == pytest.approx(490e3, rel=1e-12)
    assert cap.note.startswith("at load 4.9e+05 every request arrives within 1 µs")


def test_an_unreachable_objective_is_reported_not_a_scale_time_error():
    # TTFT of a lone request is S = 10 ms > 9 ms. At load 1 one request finishes as the next
    # arrives (none at once): a lower load cannot help, one probe is enough.
    # Before: the search halved down towards min_load=1e-300 and failed in scale_time.
    cap = plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=9.0, min_load=1e-300,
                        run=QUIET)
    assert (cap.load, len(cap.probes)) == (0.0, 1)
    assert cap.note == (
        "no load meets the objective: at load 1 no two requests were in service at once "
        "(each ran alone), so no lower load can do better"
    )


def test_an_unreachable_objective_stops_at_the_workloads_time_limit():
    # Two requests arrive together at 0 (they always share the replica), one at 100 ms.
    # scale_time(1/x) keeps the 100 ms arrival within 2**43 ms for x >= 100 / 2**43
    # = 1.137e-11; halving from 1 reaches 2**-36 = 1.455e-11 (37 probes), then that floor.
    wl = ism.Workload.from_requests([0.0, 0.0, 100.0], [100] * 3, [1] * 3)
    cap = plan.max_rate(wl, dd1_simulator(), slo_ttft_ms=9.0, min_load=1e-300, run=QUIET)
    floor = 100.0 / 2.0**43
    assert cap.load == 0.0 and len(cap.probes) == 38
    assert cap.probes["load"].iloc[-1] == pytest.approx(floor, rel=1e-6)
    assert cap.note == (
        "no load meets the objective: it is missed down to load 1.137e-11, below which the "
        "workload's arrivals would pass 2**43 ms"
    )


def test_min_replicas_refuses_a_prefill_decode_fleet_before_any_probe(monkeypatch):
    # Before (issue 23): probes set replicas=1..16 while the fleet stayed at 2 GPUs, answer 0
    sim = dd1_simulator(replicas=ism.Disaggregated(prefill=1, decode=1))
    monkeypatch.setattr(ism.Simulator, "run", lambda *a, **k: pytest.fail("a probe ran"))
    with pytest.raises(ValueError, match=r"prefill/decode fleet .* replicas__prefill and "
                                         r"replicas__decode"):
        plan.min_replicas(dd1_workload(), sim, slo_ttft_ms=50.0, run=QUIET)


def test_min_replicas_names_a_rate_the_workload_cannot_take():
    # offered rate 50 / 0.49 s = 102 rps; 1e-12 rps would stretch arrivals past 2**43 ms
    with pytest.raises(ValueError, match=r"^rate=1e-12 is below load .* 2\*\*43 ms"):
        plan.min_replicas(dd1_workload(), dd1_simulator(), rate=1e-12, slo_ttft_ms=50.0,
                          run=QUIET)


def test_max_rate_counts_a_ttft_exactly_at_the_objective_as_met():
    # At load x <= 1 no request waits: every TTFT is S = 5 + 0.05 * 100 = 10 ms exactly
    # (0.05 * 100 rounds to 5.0), so p99 = 10 = slo meets the objective (<=); above
    # x = 1, p99 = S + 48.51 * (S - G0/x) > 10. The largest load found is in
    # [1 / (1 + rtol), 1]; a strict comparison would find none (load 0).
    cap = plan.max_rate(dd1_workload(), dd1_simulator(), slo_ttft_ms=S, rtol=0.01, run=QUIET)
    assert 1 / 1.01 <= cap.load <= 1.0


def test_max_rate_counts_a_rejection_as_missing_the_objective():
    # The D/D/1 queue plus one prompt of 5000 tokens, more than the replica's 4096
    # tokens of KV: it is rejected at every load, so no load meets even a 1e6 ms
    # objective (the finished requests alone would meet it up to high loads).
    base = dd1_workload()
    wl = ism.Workload.from_requests(
        [*base.arrival_ms.tolist(), G0 * N], [100] * N + [5000], [1] * (N + 1)
    )
    cap = plan.max_rate(wl, dd1_simulator(), slo_ttft_ms=1e6, run=QUIET)
    assert cap.load == 0.0
