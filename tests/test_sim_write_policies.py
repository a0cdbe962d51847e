"""Tier write policies: the simulator in its timing-free limit equals ``reuse.replay_tiers``.

The limit: requests far apart (each done before the next arrives), links of
1e6 GB/s with no latency, ``load_policy="always"``, prompts of whole blocks
with a unique last block and ``output_len`` 1 (nothing but the running
request's blocks occupies HBM; see ``limit_workloads``). Then the
simulator's per-request hits of HBM and of every tier must equal those of
:func:`inferasim.reuse.replay_tiers`, a replay written from the documented
rules that shares no code with the engine, for every write policy
(evict / through, publish computed / all), per-replica and shared tiers,
one to three replicas. Also hand-computed cases of each policy, and the
README's worked example.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import hypothesis_settings
from hypothesis import given
from hypothesis import strategies as st
from test_sim_tiers_properties import limit_workloads

from inferasim import Workload
from inferasim.reuse import replay_tiers
from inferasim.sim import EngineConfig, LinearCostModel, Simulator, Tier, Tiers

FAST = dict(read_gbps=1e6, write_gbps=1e6, latency_us=0.0)


def limit_sim(wl: Workload, hbm_blocks: int, tiers: list[Tier], replicas: int):
    return Simulator(
        replicas=replicas,
        routing="round_robin",
        kv_tokens=hbm_blocks * wl.block_size,
        tiers=Tiers(tiers, load_policy="always"),
        engine=EngineConfig(max_batched_tokens=max(int(wl.input_len.max()), 256)),
        cost_model=LinearCostModel(kv_bytes_per_token=1000.0),
    ).run(wl, progress=False)


@st.composite
def policy_stacks(draw, bs: int) -> list[Tier]:
    """One to three tiers (DRAM, SSD per replica; a shared pool), each with a drawn
    write policy, publish rule, duplex flag and a capacity of 0 to 20 blocks (the
    pool with or without a fleet-wide budget)."""
    tiers = []
    for name, shared in (("dram", False), ("ssd", False), ("pool", True)):
        if not draw(st.booleans()):
            continue
        write = draw(st.sampled_from(["evict", "through"]))
        publish = draw(st.sampled_from(["computed", "all"])) if write == "through" else "computed"
        pool_gbps = draw(st.sampled_from([None, 1e6])) if shared else None
        tiers.append(Tier(name, draw(st.integers(0, 20)) * bs, shared=shared, write=write,
                          publish=publish, duplex=draw(st.booleans()), pool_gbps=pool_gbps,
                          **FAST))
    if not tiers:
        tiers.append(Tier("pool", draw(st.integers(1, 20)) * bs, shared=True, **FAST))
    if draw(st.booleans()):
        tiers.reverse()  # (a shared tier on top of the per-replica ones)
    return tiers


def _compare(wl: Workload, hbm_blocks: int, tiers: list[Tier], replicas: int) -> None:
    res = limit_sim(wl, hbm_blocks, tiers, replicas)
    req = res.requests
    assert (req["status"] == "finished").all()
    ref = replay_tiers(wl, hbm_blocks * wl.block_size, tiers, replicas=replicas)
    assert req["replica"].tolist() == ref["replica"].tolist()
    for col in ["hbm_hit_tokens"] + [f"{t.name}_hit_tokens" for t in tiers]:
        assert req[col].tolist() == ref[col].tolist(), col


@hypothesis_settings(80)
@given(data=st.data(), wl=limit_workloads(), hbm=st.integers(8, 14), replicas=st.integers(1, 3))
def test_timing_free_limit_equals_the_replay_for_every_write_policy(data, wl, hbm, replicas):
    tiers = data.draw(policy_stacks(wl.block_size))
    _compare(wl, hbm, tiers, replicas)


@pytest.mark.parametrize("top", ["ssd", "pool"])
def test_a_read_delivered_when_it_starts_survives_a_victim_written_onto_its_link(top):
    # Regression (a request was lost: "internal error ... first_token=nan"). Block
    # size 4, HBM 2 blocks, one replica; on top a tier written through with
    # publish="all" (an own SSD, or a shared pool), 2 blocks, and below it an own
    # DRAM written on eviction, 2 blocks. Requests 1e8 ms apart: R0 [1, 10] writes
    # 1, 10 through (top {1, 10}); R1 [11] pushes 1 out of the top into DRAM, R2 [12]
    # pushes 10 (DRAM {1, 10}, top {11, 12}); HBM (2 blocks) now holds 11, 12 only.
    # R3 [1, 13] loads block 1 from DRAM (4 tokens) and publishes it to the top tier
    # when its load starts, which pushes 11 out of the top into DRAM: a write on the
    # DRAM link its read is on. At t = 3e8 ms the read takes 4000 B / 1e12 B/ms = 4e-9
    # ms, under half the spacing of floats there (1.5e-8): it is delivered at t, and
    # the write's start takes it. Before the fix the read was counted off R3 before
    # R3's count of loads was set, and R3 never ran. Now: R3 hits 4 DRAM tokens.
    tiers = [Tier(top, 8, shared=top == "pool", write="through", publish="all", **FAST),
             Tier("dram", 8, write="evict", **FAST)]
    ids = [[1, 10], [11], [12], [1, 13]]
    wl = Workload.from_requests([i * 1e8 for i in range(4)], [4 * len(r) for r in ids],
                                [1] * 4, ids, block_size=4)
    req = limit_sim(wl, 2, tiers, 1).requests
    assert (req["status"] == "finished").all()
    assert req["dram_hit_tokens"].tolist() == [0, 0, 0, 4]
    assert req[f"{top}_hit_tokens"].tolist() == [0, 0, 0, 0]
    _compare(wl, 2, tiers, 1)


def test_limit_on_the_conversation_trace_with_write_through(conversation_path):
    # The conversation trace made to fit the limit (as in test_sim_tiers_properties),
    # 4 replicas, a per-replica DRAM written on eviction above a shared pool written
    # through: every policy path on real prefix chains.
    src = Workload.from_mooncake(conversation_path).head(3000)
    bs = src.block_size
    ids = []
    for i in range(len(src)):
        row = src.block_ids(i).tolist()[: int(src.input_len[i]) // bs]
        ids.append(row + [-(i + 1)])
    P = [len(r) * bs for r in ids]
    wl = Workload.from_requests(np.arange(len(src)) * 1e7, P, [1] * len(src), ids, block_size=bs)
    dram = Tier("dram", 300 * bs, write="evict", **FAST)
    pool = Tier("pool", 3000 * bs, shared=True, **FAST)
    res = limit_sim(wl, 400, [dram, pool], 4)
    ref = replay_tiers(wl, 400 * bs, [dram, pool], replicas=4)
    assert ref["pool_hit_tokens"].sum() > 0 and ref["dram_hit_tokens"].sum() > 0
    for col in ("hbm_hit_tokens", "dram_hit_tokens", "pool_hit_tokens"):
        assert res.requests[col].tolist() == ref[col].tolist(), col


def test_pools_written_on_eviction_give_the_frames_of_before(conversation_path):
    # The shared tier's default moved to write="through"; with write="evict" stated,
    # the reference configuration "trace-tiers" (tests/_frames_digest.py) gives, bit
    # for bit, the frames recorded before write policies existed (its digest in
    # tests/data/frames_reference.json up to this change).
    import _frames_digest as fd

    (name, wl, kw, run), = [c for c in fd.native_configs(str(conversation_path))
                            if c[0] == "trace-tiers"]
    kw = dict(kw, tiers=[Tier(t.name, t.capacity_tokens, t.read_gbps, t.write_gbps,
                              t.latency_us, shared=t.shared, write="evict")
                         for t in kw["tiers"]])
    res = Simulator(**fd.under("whole_blocks", kw)).run(wl, progress=False, **run)
    assert fd.digest(res) == "9340d858cdaf7f9f48690208dd68a0c932377bb7"


def readme_example(tiers: list[Tier]):
    """The README's worked example (section "KV tiers behind HBM", write policies)."""
    wl = Workload.from_requests(
        [0, 1000, 2000, 3000, 4000], [12] * 5, [1] * 5,
        [[1, 2, 9], [1, 2, 8], [5, 6, 7], [5, 6, 3], [1, 2, 4]], block_size=4,
    )
    return Simulator(replicas=2, routing="round_robin", kv_tokens=12, tiers=tiers,
                     cost_model=LinearCostModel(kv_bytes_per_token=1000.0)).run(wl, progress=False)


def test_readme_worked_example():
    # Block size 4, HBM 3 blocks per replica, round robin: R0, R2, R4 on replica 0,
    # R1, R3 on replica 1; each request's last block is its own (never reused).
    # Pool written through (the default): R0 publishes 1, 2 (and 9), so R1 loads
    # 1, 2 from the pool (8 tokens) though replica 0 still holds them in HBM; R2
    # publishes 5, 6, found by R3; R2 also evicts R0's blocks from replica 0's HBM,
    # so R4 finds 1, 2 in the pool: 24 of 60 prompt tokens, 0.4.
    pool = Tier("pool", 400, read_gbps=25.0, write_gbps=25.0, shared=True)
    res = readme_example([pool])
    assert res.requests["pool_hit_tokens"].tolist() == [0, 8, 0, 8, 8]
    # Written on eviction: the pool sees only R2's eviction of 9, 2, 1 from replica
    # 0, so only R4 hits (8 of 60 tokens, 0.133).
    res = readme_example([replace(pool, write="evict")])
    assert res.requests["pool_hit_tokens"].tolist() == [0, 0, 0, 0, 8]
    # A per-replica DRAM written through (vLLM's CPU offload): replica 0's DRAM has
    # 1, 2 from R0's prefill, R4 loads them; replica 1 never computed them: 0.133.
    # Every computed block is written (4 tokens x 1000 bytes each): replica 0
    # computes 1, 2, 9 (R0), 5, 6, 7 (R2) and 4 (R4), replica 1 computes 1, 2, 8 and
    # 5, 6, 3; nothing evicted from HBM is written again.
    dram = Tier("dram", 400, read_gbps=50.0, write_gbps=50.0, write="through")
    res = readme_example([dram])
    assert res.requests["dram_hit_tokens"].tolist() == [0, 0, 0, 0, 8]
    assert res.replicas["dram_bytes_written"].tolist() == [7 * 4000.0, 6 * 4000.0]
    assert round(res.tiers.loc["dram", "token_hit_ratio"], 3) == 0.133
