"""The disaggregated loop's bookkeeping between events (issue 9's speed pass).

* the loop keeps the prefill instances' next changes and the links' next
  deliveries up to date instead of reading them afresh at every event: with
  the engine's check hook on, every event compares them with fresh reads;
* a decode instance's KV at ``t`` is read off its stretch's plan
  (:meth:`Replica.kv_at`) instead of advancing it: checked against a copy of
  the instance advanced to ``t`` at every call;
* a reservation keeps a decode stretch whose later allocations still fit:
  the jumping loop (stretches, read-offs) equals the step-by-step loop
  (``fast=False``: one step at a time, no stretch, no read-off);

on small random prefill/decode fleets with a tiny shared pool, long enough
decode runs for stretches with finishes, layerwise handoffs or not.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from helpers import assert_same, hypothesis_settings
from hypothesis import given
from hypothesis import strategies as st

from conftest import examples
from inferasim import LinearCostModel, Simulator, Workload
from inferasim.sim import Disaggregated, EngineConfig, Tier, engine
from inferasim.sim.scheduler import Replica

SETTINGS = hypothesis_settings(examples(15), slow=True, fixtures=True)


@st.composite
def fleets(draw) -> tuple[Workload, dict]:
    bs = draw(st.sampled_from([4, 16]))
    n = draw(st.integers(4, 24))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 3.0, 20.0]), min_size=n, max_size=n))
    plen = draw(st.lists(st.integers(1, 80), min_size=n, max_size=n))
    olen = draw(st.lists(st.sampled_from([1, 2, 9, 30, 60]), min_size=n, max_size=n))
    ids = []
    fresh = 1000
    for p in plen:
        nb = -(-p // bs)
        shared = draw(st.integers(0, 3))
        ids.append(list(range(shared))[:nb] + list(range(fresh, fresh + max(nb - shared, 0))))
        fresh += nb
    wl = Workload.from_requests(
        np.cumsum(gaps).tolist(), plen, olen, ids, block_size=bs
    )
    pool = Tier("pool", draw(st.sampled_from([32, 128])), read_gbps=0.5, write_gbps=0.5,
                latency_us=50.0, shared=True)
    seqs = draw(st.integers(2, 16))
    prefill, decode = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    routing = draw(st.sampled_from(["conductor", "round_robin", "kv_cost"]))
    kv_blocks = draw(st.sampled_from([30, 64, 400]))
    engine = EngineConfig(max_num_seqs=seqs, max_batched_tokens=draw(st.integers(seqs, 96)))
    layerwise = draw(st.booleans())
    fleet = Disaggregated(prefill, decode, layerwise=layerwise,
                          handoff_gbps=draw(st.sampled_from([0.05, 1.0, 100.0])))
    sim = dict(
        replicas=fleet,
        routing=routing,
        kv_tokens=kv_blocks * bs,
        engine=engine,
        tiers=[pool] if draw(st.booleans()) else None,
        cost_model=LinearCostModel(kv_bytes_per_token=1e5),
    )
    return wl, sim


@SETTINGS
@given(case=fleets())
def test_jump_equals_step_by_step(case, monkeypatch):
    wl, sim = case
    monkeypatch.setattr(engine, "_CHECK_SYNC", True)  # kept wakes == fresh reads
    fast = Simulator(**sim).run(wl, progress=False)
    slow = Simulator(**sim, fast=False).run(wl, progress=False)
    assert_same(fast, slow)
    assert len(fast.requests) == len(wl)


def run_checked(wl: Workload, sim: dict, monkeypatch) -> dict[str, int]:
    """Run with every :meth:`Replica.kv_at` read-off compared with a copy of the
    instance advanced to ``t``; return the counts of read-offs (``read``) and of
    those across a finish of the stretch (``finish``)."""
    kv_at = Replica.kv_at
    seen = {"read": 0, "finish": 0}

    def checked(self, t):
        across = bool(self.p_K) and t >= self.h_weak
        kv = kv_at(self, t)
        if kv >= 0:
            twin = copy.deepcopy(self)  # (with its peers: the fleet, copied)
            twin.advance(t)
            seen["read"] += 1
            seen["finish"] += across
            assert kv == twin.n_private + twin.cache.pinned, (self.index, t)
        return kv

    monkeypatch.setattr(Replica, "kv_at", checked)
    Simulator(**sim).run(wl, progress=False)
    return seen


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
@SETTINGS
@given(case=fleets())
def test_kv_at_equals_the_advance(case, monkeypatch):
    run_checked(*case, monkeypatch)


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
def test_kv_at_reads_stretches_through_finishes(monkeypatch):
    # a decode instance serving many sequences of mixed lengths while handoffs
    # keep arriving: read-offs inside stretches, some across finishes, all equal
    # to the advance (the random cases may miss the finish branch)
    rng = np.random.default_rng(7)
    n = 60
    wl = Workload.from_requests(
        np.cumsum(rng.choice([0.0, 2.0, 8.0], n)).tolist(),
        rng.integers(1, 40, n).tolist(),
        rng.choice([2, 5, 20, 50], n).tolist(),
        block_size=4,
    )
    sim = dict(replicas=Disaggregated(prefill=2, decode=2), routing="round_robin",
               kv_tokens=400 * 4, engine=EngineConfig(max_num_seqs=32),
               cost_model=LinearCostModel(kv_bytes_per_token=1e5))
    seen = run_checked(wl, sim, monkeypatch)
    assert seen["read"] > 20 and seen["finish"] > 0, seen
