"""The jumping engine with loads in flight and a shared pool, against the plain loop.

Small random fleets where lower-tier loads take many decode steps (slow
links, costly prefill) and requests wait (tiny HBM, few sequence slots): the
jumping engine (stretches, lazily advanced replicas, the shared-tier
lockstep) must give frames identical to ``Simulator(fast=False)``, the loop
that plans one step at a time and advances every replica through every
change in global time order; and every read and write of a shared tier must
happen in time order across the fleet (its change log is the pool's
timeline).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from helpers import assert_same, hypothesis_settings, simulate
from hypothesis import given
from hypothesis import strategies as st

from conftest import draw_tiers, examples, family_workload
from inferasim import Workload
from inferasim.sim import EngineConfig, LinearCostModel, Tier, Tiers
from inferasim.sim.kv import KVManager
from inferasim.sim.tiers import ReplicaTiers, TierStore

# (no shrinking: a failing case of these multi-replica runs takes minutes to shrink)
SETTINGS = hypothesis_settings(examples(60), slow=True, fixtures=True, shrink=False)


def _workload(seed: int, n: int, gaps: list[float]) -> Workload:
    """``n`` requests in four families sharing up to 10 leading 4-token blocks."""
    rng = np.random.default_rng(seed)
    return family_workload(rng, n, gaps, (8, 48), (1, 60), families=4, shared_max=10)


@st.composite
def loading_workloads(draw) -> Workload:
    gaps = draw(st.sampled_from([[0.0, 1.0, 5.0, 20.0], [0.0, 5.0, 20.0, 60.0]]))
    return _workload(draw(st.integers(0, 2**32 - 1)), draw(st.integers(10, 60)), gaps)


@st.composite
def loading_configs(draw) -> dict:
    """Loads slower than a decode step (a 4-token block of 1e5 B/token is 0.4 MB:
    0.8 ms at 0.5 GB/s, plus latency), cheaper than recomputing (0.2-0.5 ms a
    token), into a tiny HBM behind tiny lower tiers."""
    gbps = st.sampled_from([0.2, 0.5, 2.0])
    lat = st.sampled_from([0.0, 50.0, 500.0])
    tiers = draw_tiers(draw, gbps, lat, dram=120, ssd=200, pool=400)
    max_num_seqs = draw(st.integers(2, 16))
    both = any(t.shared for t in tiers) and not all(t.shared for t in tiers)
    replicas = draw(st.integers(1, 4))
    routing = draw(
        st.sampled_from(["kv_cost", "cache_aware", "round_robin", "least_loaded", "conductor"])
    )
    kv_blocks = draw(st.integers(12, 60))  # of the workload's 4 tokens (helpers.simulate)
    engine = EngineConfig(
        max_num_seqs=max_num_seqs, max_batched_tokens=draw(st.integers(max(max_num_seqs, 16), 64))
    )
    cost_model = LinearCostModel(
        overhead_ms=draw(st.sampled_from([0.3, 1.0])),
        prefill_token_ms=draw(st.sampled_from([0.2, 0.5])),
        decode_seq_ms=draw(st.sampled_from([0.05, 0.1, 0.7])),
        decode_context_ms=draw(st.sampled_from([0.0, 0.003])),
        kv_bytes_per_token=draw(st.sampled_from([1e4, 1e5])),
    )
    if draw(st.booleans()):  # write-through to the first tier
        tiers[0] = replace(tiers[0], write="through")
    stack = Tiers(
        tiers,
        load_policy=draw(st.sampled_from(["faster", "always"])),
        replicate_hot_blocks=draw(st.sampled_from([None, 0, 1])) if both else None,
    )
    return dict(
        replicas=replicas,
        routing=routing,
        kv_blocks=kv_blocks,
        engine=engine,
        cost_model=cost_model,
        tiers=stack,
        timeline_ms=draw(st.sampled_from([None, 0.7, 5.0])),
    )


class _PoolOrder:
    """Records the time of every read and write of a shared tier, in execution order."""

    def __init__(self, monkeypatch) -> None:
        self.times: list[float] = []
        times = self.times
        write, take = ReplicaTiers._write, ReplicaTiers.take
        lower = KVManager.lower_run

        # (a shared tier too small for a block holds nothing and couples nobody)
        def _write(rt, t, k, ids, distinct=False):
            if rt.tiers[k].shared:
                times.append(t)
            return write(rt, t, k, ids, distinct)

        def _lower_run(kv, ids, m, limit, t):  # (admission looks the run up in every tier)
            if any(kv.tiers.tiers[k].shared for k in kv.tiers.active):
                times.append(t)
            return lower(kv, ids, m, limit, t)

        def _take(rt, k, ids, t=0.0):  # (a load from a shared tier refreshes its LRU order)
            if rt.tiers[k].shared:  # (at the time of the admission's look-up)
                times.append(times[-1])
            return take(rt, k, ids, t)

        monkeypatch.setattr(ReplicaTiers, "_write", _write)
        monkeypatch.setattr(ReplicaTiers, "take", _take)
        monkeypatch.setattr(KVManager, "lower_run", _lower_run)


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
@SETTINGS
@given(wl=loading_workloads(), cfg=loading_configs())
def test_jump_with_loads_in_flight_equals_plain_loop(monkeypatch, wl, cfg):
    with monkeypatch.context() as m:
        order = _PoolOrder(m)
        fast = simulate(wl, **cfg, fast=True)
    # the lazy lockstep keeps the shared tier's reads and writes in global time order
    assert order.times == sorted(order.times)
    plain = simulate(wl, **cfg, fast=False)
    assert_same(fast, plain)



# Found by the test above under random seeds: one replica with an SSD tier only.
# Request 14 waits while offload writes are in flight on the SSD link; whether its
# prefix is loaded or recomputed is priced on the link's backlog, which falls as the
# writes drain, so its admission can change at any step start. The jumping loop ran
# a decode stretch there and admitted it 6.4 ms late (its load waited 7.2 ms, not
# 7.944), and the schedule diverged (request 13 finished at 666.489, not 662.385).
# Now steps are planned one at a time while requests wait and transfers are in flight.
_ARRIVAL = [60.0, 65.0, 70.0, 75.0, 95.0, 100.0, 100.0, 120.0, 125.0, 125.0, 145.0, 205.0, 210.0, 210.0, 230.0, 250.0, 255.0, 255.0, 315.0, 375.0, 435.0, 495.0, 515.0, 515.0, 575.0, 580.0, 640.0, 645.0, 705.0, 710.0, 710.0, 710.0, 710.0, 730.0, 790.0, 790.0, 790.0, 850.0, 910.0, 915.0, 915.0, 920.0, 980.0, 1040.0, 1040.0]
_PROMPT = [42, 47, 13, 43, 32, 30, 14, 39, 20, 16, 36, 44, 41, 45, 17, 10, 10, 24, 10, 25, 24, 39, 22, 19, 42, 21, 37, 10, 32, 19, 41, 41, 14, 36, 16, 46, 11, 34, 15, 40, 19, 22, 17, 9, 29]
_OUTPUT = [48, 57, 54, 14, 29, 59, 9, 34, 39, 26, 30, 52, 31, 58, 46, 59, 45, 46, 58, 26, 33, 47, 57, 35, 19, 37, 56, 55, 57, 43, 11, 10, 10, 43, 11, 31, 5, 14, 9, 6, 5, 22, 41, 38, 35]
_IDS = [[0, 1, 2, 3, 4, 10005, 10006, 10007, 10008, 10009, 10010], [200, 201, 202, 10103, 10104, 10105, 10106, 10107, 10108, 10109, 10110, 10111], [100, 101, 102, 103], [300, 301, 302, 303, 304, 305, 306, 10307, 10308, 10309, 10310], [0, 1, 2, 3, 4, 5, 6, 10407], [300, 301, 302, 303, 304, 305, 306, 10507], [0, 1, 10602, 10603], [0, 1, 2, 10703, 10704, 10705, 10706, 10707, 10708, 10709], [300, 301, 302, 303, 304], [10900, 10901, 10902, 10903], [100, 101, 11002, 11003, 11004, 11005, 11006, 11007, 11008], [300, 301, 302, 303, 304, 305, 306, 307, 11108, 11109, 11110], [100, 101, 102, 103, 104, 105, 106, 107, 108, 11209, 11210], [100, 101, 102, 103, 104, 105, 11306, 11307, 11308, 11309, 11310, 11311], [0, 1, 2, 3, 4], [0, 1, 2], [200, 11601, 11602], [100, 101, 102, 103, 104, 105], [11800, 11801, 11802], [0, 1, 2, 3, 11904, 11905, 11906], [300, 301, 302, 303, 304, 305], [300, 301, 302, 303, 304, 305, 12106, 12107, 12108, 12109], [100, 101, 12202, 12203, 12204, 12205], [100, 101, 102, 103, 104], [100, 101, 102, 12403, 12404, 12405, 12406, 12407, 12408, 12409, 12410], [200, 201, 202, 203, 12504, 12505], [100, 12601, 12602, 12603, 12604, 12605, 12606, 12607, 12608, 12609], [12700, 12701, 12702], [200, 201, 202, 203, 204, 205, 206, 207], [300, 301, 302, 303, 12904], [300, 301, 302, 303, 304, 305, 306, 13007, 13008, 13009, 13010], [200, 201, 13102, 13103, 13104, 13105, 13106, 13107, 13108, 13109, 13110], [100, 101, 102, 103], [100, 101, 102, 103, 13304, 13305, 13306, 13307, 13308], [0, 1, 2, 3], [100, 101, 102, 103, 104, 105, 106, 107, 13508, 13509, 13510, 13511], [300, 13601, 13602], [300, 301, 13702, 13703, 13704, 13705, 13706, 13707, 13708], [200, 201, 202, 203], [100, 101, 102, 103, 104, 105, 106, 107, 108, 13909], [300, 301, 302, 14003, 14004], [300, 14101, 14102, 14103, 14104, 14105], [14200, 14201, 14202, 14203, 14204], [300, 14301, 14302], [100, 14401, 14402, 14403, 14404, 14405, 14406, 14407]]


def test_a_waiting_request_sees_the_links_drain_at_every_step():
    wl = Workload.from_requests(_ARRIVAL, _PROMPT, _OUTPUT, _IDS, block_size=4)
    cfg = dict(
        replicas=1, routing="cache_aware", kv_tokens=32 * 4,
        engine=EngineConfig(max_num_seqs=5, max_batched_tokens=33),
        cost_model=LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.2, decode_seq_ms=0.1,
                                   decode_context_ms=0.003, kv_bytes_per_token=1e5),
        tiers=[Tier("ssd", 106, read_gbps=0.5, write_gbps=0.2)],
        timeline_ms=0.7,
    )
    fast = simulate(wl, **cfg, fast=True).requests
    plain = simulate(wl, **cfg, fast=False).requests
    pd.testing.assert_frame_equal(fast, plain, check_exact=True)


def _evictions_shared(*tiers: Tier) -> bool:
    shared = {t.name: TierStore(t.capacity_tokens // 4) for t in tiers if t.shared}
    return ReplicaTiers(list(tiers), shared, 4, 1e5).evictions_shared


def test_a_decode_stretch_is_private_unless_hbm_evictions_reach_a_shared_tier():
    """Which tier stacks let a replica's decode stretch run unseen by a coupled fleet
    (``Replica.next_sync``): HBM's evictions go to the first tier if it is an evict
    tier, and each evict tier's victims to the next tier if that is one too."""
    dram = Tier("dram", 400, read_gbps=50.0, write_gbps=50.0)  # write="evict" (per replica)
    ssd = Tier("ssd", 800, read_gbps=5.0, write_gbps=5.0)  # evict
    pool = Tier("pool", 4000, read_gbps=25.0, write_gbps=25.0, shared=True)  # through
    pool_evict = replace(pool, write="evict")
    # DRAM takes HBM's victims, its own victims are dropped above a through pool
    assert not _evictions_shared(dram, pool)
    # ... and the pool alone, written through, takes no eviction at all
    assert not _evictions_shared(pool)
    # an evict pool takes HBM's victims directly, or DRAM's, or SSD's behind DRAM
    assert _evictions_shared(pool_evict)
    assert _evictions_shared(dram, pool_evict)
    assert _evictions_shared(dram, ssd, pool_evict)
    # a through first tier takes no eviction from HBM: nothing flows down from HBM
    assert not _evictions_shared(replace(dram, write="through"), pool_evict)
    # an empty DRAM is skipped: HBM's victims go straight to the evict pool
    assert _evictions_shared(replace(dram, capacity_tokens=0), pool_evict)
