"""Tier presets (``ism.tiers.<system>``): their write semantics, and their timing-free limits.

Each preset's stack, with its links made 1e6 GB/s and latency-free, run on
a limit workload (see tests/test_sim_write_policies.py) must give the hits
of ``reuse.replay_tiers`` for the same stack; and the policies each preset
states (written through, shared, on eviction) are checked by hand on a
two-request case: a block computed by replica 0 is found by replica 1 only
in a shared tier, and a per-replica through tier holds what its replica
computed without any eviction.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import inferasim as ism
from inferasim import Workload
from inferasim.reuse import replay_tiers
from inferasim.sim import EngineConfig, LinearCostModel, Simulator, Tiers

BS = 4
PRESETS = {
    "vllm_offload": lambda: ism.tiers.vllm_offload(12 * BS),
    "lmcache": lambda: ism.tiers.lmcache(6 * BS, 10 * BS, 30 * BS),
    "mooncake_store": lambda: ism.tiers.mooncake_store(8 * BS, 20 * BS),
    "dynamo_kvbm": lambda: ism.tiers.dynamo_kvbm(6 * BS, 20 * BS, shared_disk=True),
    "dynamo_kvbm_local": lambda: ism.tiers.dynamo_kvbm(6 * BS, 20 * BS),
    "hicache_through": lambda: ism.tiers.sglang_hicache(6 * BS, 30 * BS),
    "hicache_back": lambda: ism.tiers.sglang_hicache(6 * BS, 30 * BS, write_policy="write_back"),
}


def fast(tiers):
    return [replace(t, read_gbps=1e6, write_gbps=1e6, latency_us=0.0) for t in tiers]


def limit_workload(seed: int) -> Workload:
    """Prefix-closed chains of whole blocks, a unique last block, output 1, far apart."""
    rng = np.random.default_rng(seed)
    ids = []
    for i in range(120):
        fam, shared = int(rng.integers(0, 6)), int(rng.integers(0, 8))
        ids.append([100 * fam + j for j in range(shared)] + [10_000 + i])
    return Workload.from_requests(np.arange(120) * 1e7, [BS * len(r) for r in ids], [1] * 120,
                                  ids, block_size=BS)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("replicas", [1, 3])
def test_preset_in_the_timing_free_limit_equals_its_replay(preset, replicas):
    tiers = fast(PRESETS[preset]())
    wl = limit_workload(replicas)
    res = Simulator(
        replicas=replicas, routing="round_robin", kv_tokens=10 * BS,
        tiers=Tiers(tiers, load_policy="always"),
        engine=EngineConfig(max_batched_tokens=256),
        cost_model=LinearCostModel(kv_bytes_per_token=1000.0),
    ).run(wl, progress=False)
    ref = replay_tiers(wl, 10 * BS, tiers, replicas=replicas)
    assert ref["hit_tokens"].sum() > ref["hbm_hit_tokens"].sum()  # the tiers serve hits
    for col in ["hbm_hit_tokens"] + [f"{t.name}_hit_tokens" for t in tiers]:
        assert res.requests[col].tolist() == ref[col].tolist(), col


def two_requests(tiers, replicas: int = 2):
    # A [1, 2, 9] on replica 0 at t=0, B [1, 2, 8] on replica 1 at t=1000 (round
    # robin); HBM holds both (8 blocks): nothing is ever evicted.
    wl = Workload.from_requests([0.0, 1000.0], [3 * BS, 3 * BS], [1, 1],
                                [[1, 2, 9], [1, 2, 8]], block_size=BS)
    return Simulator(replicas=replicas, routing="round_robin", kv_tokens=8 * BS,
                     tiers=Tiers(tiers, load_policy="always"),
                     cost_model=LinearCostModel(kv_bytes_per_token=1000.0)).run(wl, progress=False)


def test_vllm_offload_stores_every_computed_block_per_replica():
    # Through, per replica: A's 3 blocks reach replica 0's CPU tier with no eviction
    # (3 blocks x 4 tokens x 1000 bytes = 12 kB written); B on replica 1 finds nothing.
    res = two_requests(fast(ism.tiers.vllm_offload(100 * BS)))
    assert res.replicas.loc[0, "cpu_bytes_written"] == 3 * BS * 1000
    assert res.requests["cached_tokens"].tolist() == [0, 0]


@pytest.mark.parametrize("preset", ["mooncake_store", "lmcache", "dynamo_kvbm", "hicache_through"])
def test_shared_tiers_publish_what_a_prefill_computes(preset):
    # The shared tier is written through: B on replica 1 loads A's blocks 1 and 2
    # from it (its last block is computed: the run stops before the last token).
    tiers = fast(PRESETS[preset]())
    shared = [t.name for t in tiers if t.shared]
    res = two_requests([t for t in tiers if t.shared])
    assert res.requests.loc[1, f"{shared[0]}_hit_tokens"] == 2 * BS


def test_hicache_write_back_writes_host_memory_only_on_eviction():
    # write_back: no eviction here, so nothing reaches L2; L3 (through) has A's blocks.
    res = two_requests(fast(ism.tiers.sglang_hicache(100 * BS, 100 * BS,
                                                     write_policy="write_back")))
    assert res.replicas["l2_bytes_written"].tolist() == [0.0, 0.0]
    assert res.requests.loc[1, "l3_hit_tokens"] == 2 * BS


def test_preset_errors_name_the_parameter():
    with pytest.raises(ValueError, match="write_policy must be one of"):
        ism.tiers.sglang_hicache(1024, write_policy="write_through_selective")
    with pytest.raises(ValueError, match="capacity_tokens must be an int"):
        ism.tiers.vllm_offload(-1)
