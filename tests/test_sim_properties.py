"""Property tests of the simulator on random small workloads and fleets.

* the decode jump gives frames identical to the plain step-by-step loop;
* every request appears exactly once, times are ordered, KV use never
  exceeds capacity, pinned blocks are never evicted (checked inside the run);
* same inputs and seed give identical frames;
* the built-in routers place every request as their plain references do
  (tests/helpers.py: every replica scored from the public views);
* the roofline's compiled kernel prices steps and decode runs bit for bit
  as its ``step_time_ms``;
* one replica with unbounded KV and non-overlapping requests reproduces the
  reuse analysis' infinite-cache token hit ratio (an independent
  implementation).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    InvariantChecks,
    assert_same,
    busy_workloads,
    hypothesis_settings,
    reference_router,
    sim_configs,
    sim_workloads,
    simulate,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.reuse import infinite_hit_ratio
from inferasim.sim import EngineConfig, LinearCostModel, Simulator

SETTINGS = hypothesis_settings(60, slow=True)


@SETTINGS
@given(wl=sim_workloads(), cfg=sim_configs())
def test_jump_equals_plain_loop(wl, cfg):
    fast = simulate(wl, **cfg, fast=True)
    plain = simulate(wl, **cfg, fast=False)
    assert_same(fast, plain)


@SETTINGS
@given(wl=sim_workloads(allow_no_ids=False), cfg=sim_configs())
def test_jump_equals_plain_loop_closed_loop(wl, cfg):
    # sessions inferred from the hash ids; next turns wait for the previous answer
    fast = simulate(wl, **cfg, fast=True, closed_loop=True)
    plain = simulate(wl, **cfg, fast=False, closed_loop=True)
    assert_same(fast, plain)


@SETTINGS
@given(wl=sim_workloads(), cfg=sim_configs())
def test_frame_invariants(wl, cfg):
    res = simulate(wl, **cfg)
    req = res.requests
    n = len(wl)
    assert req.index.tolist() == list(range(n))
    assert set(req["status"]) <= {"finished", "rejected"}
    fin = req[req["status"] == "finished"]
    rej = req[req["status"] == "rejected"]
    assert (rej["replica"] == -1).all() and rej["reason"].notna().all()
    assert (fin["reason"] == "").all()  # an empty cell, not None
    assert fin["replica"].between(0, cfg["replicas"] - 1).all()
    # times ordered
    assert (fin["arrival_ms"] <= fin["scheduled_ms"]).all()
    assert (fin["scheduled_ms"] < fin["first_token_ms"]).all()
    assert (fin["first_token_ms"] <= fin["finish_ms"]).all()
    # reuse bookkeeping
    bs = wl.block_size
    # whole hash blocks; with smaller KV pages also the leading pages of the next one
    whole = fin["cached_blocks"] * bs
    if cfg["engine"].page_tokens in (None, bs):
        assert (fin["cached_tokens"] == whole).all()
    else:
        assert ((whole <= fin["cached_tokens"]) & (fin["cached_tokens"] < whole + bs)).all()
    assert (fin["cached_tokens"] < fin["input_len"]).all()
    # (a preempted request may find more of its prompt cached when it is readmitted,
    # so only requests never preempted compute exactly the uncached part)
    assert (fin["computed_prefill_tokens"] >= 1).all()
    no_preempt = fin["preemptions"] == 0
    assert (
        fin.loc[no_preempt, "computed_prefill_tokens"]
        == fin.loc[no_preempt, "input_len"] - fin.loc[no_preempt, "cached_tokens"]
    ).all()
    # memory
    cap = res.config["kv_tokens"]
    tl = res.timeline
    assert (tl["kv_running_tokens"] + tl["kv_cached_tokens"] <= cap).all()
    assert (tl[["queue", "running", "kv_running_tokens", "kv_cached_tokens"]] >= 0).all().all()
    assert (res.replicas["peak_kv_tokens"] <= cap).all()
    # whole pages: every HBM count is a multiple of the page
    page = res.config["page_tokens"]
    assert (tl[["kv_running_tokens", "kv_cached_tokens"]] % page == 0).all().all()
    assert (res.replicas["peak_running"] <= cfg["engine"].max_num_seqs).all()
    # per-replica totals add up
    assert res.replicas["requests"].sum() == len(fin)
    assert res.replicas["preemptions"].sum() == req["preemptions"].sum()


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(wl=sim_workloads(), cfg=sim_configs(), fast=st.booleans())
def test_pinned_never_evicted_and_memory_bounded(monkeypatch, wl, cfg, fast):
    with monkeypatch.context() as m:
        checked = InvariantChecks(m)
        res = simulate(wl, **cfg, fast=fast)
    assert checked.evicted == res.replicas["evictions"].sum()


@settings(max_examples=25, deadline=None)
@given(wl=sim_workloads(), cfg=sim_configs())
def test_same_inputs_same_frames(wl, cfg):
    assert_same(simulate(wl, **cfg), simulate(wl, **cfg))


def _spaced(wl: Workload, gap_ms: float = 1e7) -> Workload:
    frame = wl.frame.assign(arrival_ms=np.arange(len(wl)) * gap_ms)
    return Workload(frame, wl.hash_ids, wl.offsets, block_size=wl.block_size)


def expected_hit_tokens(wl: Workload) -> int:
    """Infinite-cache hit tokens (reuse analysis, full blocks only), minus the one
    difference in semantics: the engine computes at least one token, so a prompt
    of whole blocks that is entirely cached recomputes its last block."""
    ceiling = infinite_hit_ratio(wl, full_blocks_only=True)
    hit_blocks = ceiling.per_request["hit_blocks"].to_numpy()
    P = wl.input_len
    bs = wl.block_size
    whole = (P % bs == 0) & (hit_blocks == P // bs) & (P >= bs)
    return int(ceiling.hit_tokens) - bs * int(whole.sum())


@settings(max_examples=40, deadline=None)
@given(wl=sim_workloads(max_n=30, allow_no_ids=False))
def test_unbounded_single_replica_matches_infinite_cache(wl):
    wl = _spaced(wl)
    res = Simulator(kv_tokens=10**9 * wl.block_size, cost_model=LinearCostModel()).run(wl, progress=False)
    assert int(res.requests["cached_tokens"].sum()) == expected_hit_tokens(wl)


@pytest.mark.parametrize("page_tokens", [None, "block"])  # vLLM's 16-token pages; one per hash block
def test_unbounded_single_replica_matches_infinite_cache_on_the_trace(conversation_path, page_tokens):
    wl = _spaced(Workload.from_mooncake(conversation_path))
    res = Simulator(kv_tokens=10**9 * wl.block_size, cost_model=LinearCostModel(),
                    engine=EngineConfig(page_tokens=page_tokens)).run(wl, progress=False)
    assert res.config["page_tokens"] == (16 if page_tokens is None else 512)
    expected = expected_hit_tokens(wl)
    ceiling = infinite_hit_ratio(wl, full_blocks_only=True)
    assert int(res.requests["cached_tokens"].sum()) == expected
    assert res.summary()["token_hit_ratio"] == pytest.approx(expected / ceiling.tokens, rel=1e-12)
    # the recompute-last-block rule costs little on this trace
    assert abs(res.summary()["token_hit_ratio"] - ceiling.token_hit_ratio) < 0.01


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    wl=st.one_of(sim_workloads(), busy_workloads()),
    cfg=sim_configs(),
    policy=st.sampled_from(["kv_cost", "cache_aware", "least_loaded", "conductor"]),
)
def test_builtin_routers_equal_their_plain_references(wl, cfg, policy):
    # Each built-in policy is written once (inferasim/sim/routing.py), compiled,
    # reading the views lazily and pruning where it can; its reference scores every
    # replica from the public ReplicaView attributes and sorts (tests/helpers.py).
    # Both must place every request alike: the same frames.
    cfg = {**cfg, "replicas": max(cfg["replicas"], 2)}
    builtin = cfg["routing"] if policy == "kv_cost" and not isinstance(cfg["routing"], str) else policy
    a = simulate(wl, **{**cfg, "routing": builtin})
    b = simulate(wl, **{**cfg, "routing": reference_router(builtin)})
    assert_same(a, b)


ROOFLINES = [
    ("llama-3.1-8b", "h100-80gb", 1),
    ("llama-3.1-70b", "h100-80gb", 4),  # tp > 1: the all-reduce term
    ("deepseek-v3", "h200", 8),  # MoE: the expert-touch power term
]


@pytest.mark.filterwarnings("ignore:RooflineCostModel.*the step time is a what-if:UserWarning")  # (extreme KV on purpose)
@pytest.mark.parametrize(("model", "gpu", "tp"), ROOFLINES)
def test_roofline_kernel_decode_runs_are_bit_identical(model, gpu, tp):
    # The engine prices decode stretches through the model's compiled kernel
    # (kernel().run): the ends it appends must be the running sums, left to right
    # from the run's start, of the public step_time_ms; step by step (k <= 3) and
    # long runs (200 steps), batches from 0 to 300, contexts up to 900,000 tokens.
    import pickle

    from inferasim.sim import RooflineCostModel

    m = RooflineCostModel(model, gpu, tp=tp)
    kernel = m.kernel()
    cases = [(1, 0, 5), (7, 1000, 40), (64, 64 * 4000, 30), (0, 0, 2), (300, 5, 3), (3, 50, 300)]
    cases += [(7, 10, 50), (7, 900_000, 20), (7, 1000, 40), (5, 3000, 200), (9, 70_000, 50)]
    for b, s, k in cases:
        ends: list[float] = [1.0]  # (appended to)
        last = kernel.run(ends, 12.5, b, s, k)
        e = 12.5
        for j in range(k):
            e += m.step_time_ms(0, 0, b, s + b * j)
            assert ends[j + 1] == e
        assert last == e and len(ends) == k + 1
    # the kernel is not pickled: rebuilt from the constants, the same
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.kernel() is not kernel
    assert m2.kernel().run([], 12.5, 7, 1000, 40) == kernel.run([], 12.5, 7, 1000, 40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wl=sim_workloads(max_n=12), cfg=sim_configs(), outputs=st.integers(30, 200))
def test_jump_equals_plain_loop_with_the_roofline_and_long_outputs(wl, cfg, outputs):
    # Long decode stretches (priced lazily, in growing chunks) with the roofline's
    # compiled kernel.
    from inferasim.sim import RooflineCostModel

    wl = Workload.from_requests(
        wl.arrival_ms * 10,
        wl.input_len,
        np.minimum(wl.output_len * 5, outputs),
        [wl.block_ids(i).tolist() for i in range(len(wl))] if wl.has_hash_ids else None,
        block_size=wl.block_size,
    )
    cfg = {**cfg, "cost_model": RooflineCostModel(), "kv_blocks": cfg["kv_blocks"] * 4}
    fast = simulate(wl, **cfg, fast=True)
    plain = simulate(wl, **cfg, fast=False)
    assert_same(fast, plain)


@SETTINGS
@given(wl=sim_workloads(), cfg=sim_configs())
def test_itl_columns_bound_each_other(wl, cfg):
    # ITL is the mean gap, max_itl_ms the largest: mean <= max <= the whole decode span
    req = simulate(wl, **cfg).requests
    fin = req[req["status"] == "finished"]
    many = fin[fin["output_len"] > 1]
    one = fin[fin["output_len"] <= 1]
    assert one["itl_ms"].isna().all() and one["max_itl_ms"].isna().all()
    assert many["itl_ms"].notna().all() and many["max_itl_ms"].notna().all()
    span = many["finish_ms"] - many["first_token_ms"]
    assert (many["itl_ms"] == span / (many["output_len"] - 1)).all()
    assert (many["max_itl_ms"] >= many["itl_ms"] * (1 - 1e-9)).all()
    assert (many["max_itl_ms"] <= span * (1 + 1e-9)).all()


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
def test_invariant_checker_sees_inside_the_jump(monkeypatch):
    # a 200-token decode stretch cut by arrivals at 30 and 31 ms: the jump applies
    # its steps in DecodeStretch.progress/_uniform, which the checker wraps (issue 12)
    wl = Workload.from_requests([0, 30, 31], [16, 16, 16], [200, 5, 5], [[1], [1], [2]], block_size=16)
    with monkeypatch.context() as m:
        checked = InvariantChecks(m)
        Simulator(kv_tokens=40 * 16, cost_model=LinearCostModel()).run(wl, progress=False)
    assert checked.jump_checks > 0
    assert checked.plan_checks > 0


@pytest.mark.filterwarnings("ignore:RooflineCostModel.*the step time is a what-if:UserWarning")  # (extreme KV on purpose)
@pytest.mark.parametrize(("model", "gpu", "tp"), ROOFLINES)
@settings(max_examples=60, deadline=None)
@given(
    b=st.integers(0, 600),
    s=st.integers(0, 3_000_000),
    k=st.integers(0, 150),
    p=st.integers(0, 20_000),
    c0=st.integers(0, 200_000),
)
def test_roofline_kernel_equals_step_time_ms_bit_for_bit(model, gpu, tp, b, s, k, p, c0):
    # The scheduler calls the model's compiled kernel directly: its decode run must
    # be the sequential sum of step_time_ms(0, 0, b, s + b * j), and its scalar step
    # step_time_ms itself (scalars and arrays), for prefill chunks with decodes beside.
    from inferasim.sim import RooflineCostModel

    m = _rooflines(model, gpu, tp)
    kernel = m.kernel()
    ends: list[float] = [-1.0]
    last = kernel.run(ends, 7.25, b, s, k)
    e = 7.25
    for j in range(k):
        e += m.step_time_ms(0, 0, b, s + b * j)
        assert ends[j + 1] == e
    assert last == e and len(ends) == k + 1
    a = p * c0 + p * (p + 1) // 2  # attention pairs of a chunk of p after c0 cached
    assert kernel.step(p, a, b, s) == m.step_time_ms(p, a, b, s)
    arr = m.step_time_ms(np.array([p]), np.array([a]), np.array([b]), np.array([s]))
    assert kernel.step(p, a, b, s) == arr[0]
    assert isinstance(m, RooflineCostModel) and m.kernel() is kernel


_MODELS: dict = {}


def _rooflines(model, gpu, tp):
    from inferasim.sim import RooflineCostModel

    if (model, gpu, tp) not in _MODELS:
        _MODELS[model, gpu, tp] = RooflineCostModel(model, gpu, tp=tp)
    return _MODELS[model, gpu, tp]


def test_a_roofline_subclass_overriding_step_time_is_not_bypassed():
    # The simulator prices a roofline's steps with its compiled kernel only when the
    # model's class leaves step_time_ms alone: a subclass's kernel() is None, and then
    # every step, prefill and decode, goes through its own step_time_ms. A subclass
    # pricing every step twice: one request of 512 tokens and 3 outputs runs one
    # prefill step (its TTFT) and two decode steps, and every time doubles (doubling
    # is exact in floating point, so is a sum of doubled terms). Pickling keeps the
    # kernel (rebuilt from the constants).
    import pickle

    from inferasim.sim import RooflineCostModel

    class Twice(RooflineCostModel):
        def step_time_ms(self, p, a, d, c):
            return 2 * super().step_time_ms(p, a, d, c)

    base, twice = RooflineCostModel(), Twice()
    assert base.kernel() is not None and twice.kernel() is None
    wl = Workload.from_requests([0.0], [512], [3], [[1, 2, 3]], block_size=16)
    r0 = Simulator(kv_tokens=100 * 16, cost_model=base).run(wl, progress=False).requests.iloc[0]
    r1 = Simulator(kv_tokens=100 * 16, cost_model=twice).run(wl, progress=False).requests.iloc[0]
    assert r0.ttft_ms == base.step_time_ms(512, 512 * 513 // 2, 0, 0)
    assert r0.e2e_ms == r0.ttft_ms + base.step_time_ms(0, 0, 1, 513) + base.step_time_ms(0, 0, 1, 514)
    assert r1.ttft_ms == 2 * r0.ttft_ms
    assert r1.e2e_ms == 2 * r0.e2e_ms
    again = pickle.loads(pickle.dumps(base))
    assert again.kernel() is not base.kernel() and again.kernel().run([], 1.0, 3, 900, 5) == (
        base.kernel().run([], 1.0, 3, 900, 5)
    )
