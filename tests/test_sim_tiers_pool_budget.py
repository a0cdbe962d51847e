"""A shared tier's pool-wide bandwidth (``Tier(pool_gbps=...)``): hand-derived timings.

Every transfer to a capped pool runs on the replica's own link and on one
link shared by the fleet; it is delivered when both are done.
"""

from __future__ import annotations

import pytest

from inferasim import Workload
from inferasim.sim import LinearCostModel, Simulator, Tier, Tiers


def two_waves(pool_gbps, replicas=2):
    # Block size 16 at 62,500 bytes a token: 1e6 bytes a block; links of 1 GB/s move
    # 1e6 bytes/ms, one block a ms. Wave 1 (t=0): replica i computes prefix
    # [10i+1, 10i+2] and a unique block, all published to the pool (written through).
    # Wave 2 (t=1000 ms, long after every write ended): replica i gets the prefix of
    # replica i+1 (round robin), not in its HBM (3 blocks, its own prompt's), so it
    # loads 2 blocks (2e6 bytes) from the pool, every replica at the same instant.
    n = replicas
    ids = [[10 * i + 1, 10 * i + 2, 100 + i] for i in range(n)]
    ids += [[10 * ((i + 1) % n) + 1, 10 * ((i + 1) % n) + 2, 200 + i] for i in range(n)]
    wl = Workload.from_requests([0] * n + [1000] * n, [48] * (2 * n), [1] * (2 * n), ids,
                                block_size=16)
    pool = Tier("pool", 1600, read_gbps=1.0, write_gbps=1.0, shared=True, pool_gbps=pool_gbps)
    return Simulator(replicas=n, routing="round_robin", kv_tokens=48,
                     tiers=Tiers([pool], load_policy="always"),
                     cost_model=LinearCostModel(kv_bytes_per_token=62500.0)).run(wl, progress=False)


@pytest.mark.parametrize(("pool_gbps", "load_ms"), [
    (None, 2.0),  # own links only: 2e6 bytes / 1e6 bytes/ms
    (2.0, 2.0),   # the pool's 2e6 bytes/ms shared by 2 reads: 1e6 each, as the own links
    (1.0, 4.0),   # 4e6 bytes through a 1e6 bytes/ms pool: both end after 4 ms
    (0.5, 8.0),   # 4e6 bytes at 0.5e6 bytes/ms
])
def test_two_replicas_loading_at_once_share_the_pool_budget(pool_gbps, load_ms):
    req = two_waves(pool_gbps).requests
    assert req["pool_hit_tokens"].tolist() == [0, 0, 32, 32]
    assert req["load_ms"].tolist() == [0.0, 0.0, load_ms, load_ms]


def test_three_replicas_share_the_pool_budget_in_three():
    # Three replicas reading 2e6 bytes each at once: 6e6 bytes through the pool. At
    # 3 GB/s (3e6 bytes/ms) that takes 2 ms, what each own link takes alone: 2 ms; at
    # 1.5 GB/s, 6e6 / 1.5e6 = 4 ms.
    assert two_waves(3.0, replicas=3).requests["load_ms"].tolist()[3:] == [2.0] * 3
    assert two_waves(1.5, replicas=3).requests["load_ms"].tolist()[3:] == [4.0] * 3


def test_writes_use_the_pool_budget_too():
    # The pool's bytes: every computed block written once (3 + 1 per replica: 4e6
    # bytes each), reads 2e6 each; the same with or without the fleet-wide budget.
    for g in (None, 0.5):
        rep = two_waves(g).replicas
        assert rep["pool_bytes_written"].tolist() == [4e6, 4e6]
        assert rep["pool_bytes_read"].tolist() == [2e6, 2e6]


def test_pool_gbps_needs_a_shared_tier():
    with pytest.raises(ValueError, match="Tier 'dram': pool_gbps is the aggregate bandwidth"):
        Tier("dram", 1024, 1.0, 1.0, pool_gbps=10.0)
    with pytest.raises(ValueError, match="Tier 'pool': pool_gbps"):
        Tier("pool", 1024, 1.0, 1.0, shared=True, pool_gbps=-1.0)
