"""What the engine keeps between reads of a replica's state (issue 9's speed pass,
issue 20's engine).

* a replica keeps its next wake (``Replica.next_wake``, recomputed by each of
  its public methods that change its state) and the disaggregated fleet
  keeps its prefill instances' wakes within one instant (``pre_wake``,
  from ``next_event`` to ``advance_to``): checked against fresh reads
  (``Replica._wake()``) after every public method call and at every read;
* a decode instance's KV at ``t`` is read off its stretch's plan
  (:meth:`Replica.kv_at`) instead of advancing it: checked against a copy of
  the instance advanced to ``t`` at every call;
* a reservation keeps a decode stretch whose later allocations still fit:
  the jumping loop (stretches, read-offs) equals the step-by-step loop
  (``fast=False``: one step at a time, no stretch, no read-off);

on small random prefill/decode fleets with a tiny shared pool, long enough
decode runs for stretches with finishes, layerwise handoffs or not, decode
instances with a prefix cache (and the pool behind it) or not (the wake
check also on the same replicas aggregated, and in closed loops).
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
from inferasim.sim import Disaggregated, EngineConfig, Tier
from inferasim.sim.fleet import DisaggregatedFleet
from inferasim.sim.replica import Replica
from inferasim.sim.views import View

SETTINGS = hypothesis_settings(examples(15), slow=True, fixtures=True)

#: The public methods of a replica that change its state (each keeps next_wake).
CHANGERS = ("advance", "arrive", "reserve", "unreserve", "deliver", "release_kv", "pin_prefix",
            "load_held")


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
    # (decode_cache: the decode instances keep a prefix cache, with the pool behind it)
    fleet = Disaggregated(prefill, decode, layerwise=layerwise,
                          handoff_gbps=draw(st.sampled_from([0.05, 1.0, 100.0])),
                          decode_cache=draw(st.booleans()))
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
def test_jump_equals_step_by_step(case):
    wl, sim = case
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
        across = bool(self.stretch.steps) and t >= self.stretch.weak
        kv = kv_at(self, t)
        if kv >= 0:
            twin = copy.deepcopy(self)  # (with its peers: the fleet, copied)
            twin.advance(t)
            seen["read"] += 1
            seen["finish"] += across
            assert kv == twin.kv.running, (self.index, t)
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


class _WakeCheck:
    """Every kept wake equals a fresh one: ``Replica.next_wake`` after each public
    method that changes the replica and wherever it is read (``wake()``, a view's
    settling), and the disaggregated fleet's ``pre_wake`` when ``advance_to`` reads
    it. Counts the checks (``calls``)."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0

        def fresh(rep, where):
            assert rep.next_wake == rep._wake(), (where, rep.index, rep.next_wake, rep._wake())
            self.calls += 1

        def checked(name):
            orig = getattr(Replica, name)

            def after(rep, *args):
                out = orig(rep, *args)
                fresh(rep, name)
                return out

            return after

        for name in CHANGERS:
            monkeypatch.setattr(Replica, name, checked(name))
        wake, settle = Replica.wake, View._settle
        advance_to = DisaggregatedFleet.advance_to

        def checked_wake(rep):
            fresh(rep, "wake")
            return wake(rep)

        def checked_settle(view):
            fresh(view.rep, "view")
            return settle(view)

        def checked_advance_to(fleet, T):
            assert fleet.pre_wake == [rep._wake() for rep in fleet.pre], T
            self.calls += 1
            return advance_to(fleet, T)

        monkeypatch.setattr(Replica, "wake", checked_wake)
        monkeypatch.setattr(View, "_settle", checked_settle)
        monkeypatch.setattr(DisaggregatedFleet, "advance_to", checked_advance_to)


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
@SETTINGS
@given(case=fleets(), aggregated=st.booleans(), closed=st.booleans())
def test_kept_wakes_equal_fresh_ones(case, aggregated, closed, monkeypatch):
    wl, sim = case
    if aggregated:  # the same replicas serving both phases (coupled by a shared pool)
        sim = {**sim, "replicas": sim["replicas"].prefill + sim["replicas"].decode}
    with monkeypatch.context() as m:
        check = _WakeCheck(m)
        res = Simulator(**sim).run(wl, closed_loop=closed, progress=False)
    assert check.calls >= len(wl)
    assert len(res.requests) == len(wl)
