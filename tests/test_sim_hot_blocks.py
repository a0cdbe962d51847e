"""Hot-block replication: ``Simulator(tiers=Tiers([...], replicate_hot_blocks=k))``, hand-computed.

Cost model ``LinearCostModel(kv_bytes_per_token=1e5)``; block size 16, so a
block is 1.6 MB: 1.6 ms on the pool's 1 GB/s link, 0.1 ms on the DRAM's
16 GB/s link (no latency). Tiers in the order pool, then DRAM: HBM evicts
into the pool (the first tier), so without the option a block reaches a
replica's DRAM only when the pool evicts it (never here: the pool is large).
"""

from __future__ import annotations

import pandas as pd
import pytest

from inferasim import Disaggregated, LinearCostModel, Simulator, Tier, Tiers, Workload

COST = LinearCostModel(kv_bytes_per_token=1e5)
POOL = Tier("pool", 16 * 100, read_gbps=1.0, write_gbps=1.0, shared=True, write="evict")
DRAM = Tier("dram", 16 * 10, read_gbps=16.0, write_gbps=16.0)
X = 1  # the hot block
MB = 1.6e6  # bytes of a block


def workload() -> Workload:
    # one request every 100 ms (each finishes long before the next): [X, own block]
    # requests alternate with 3-block fillers that evict everything from HBM
    ids = [[X, 10], [20, 21, 22], [X, 11], [23, 24, 25], [X, 12], [26, 27, 28], [X, 13]]
    return Workload.from_requests(
        [100.0 * i for i in range(7)], [16 * len(r) for r in ids], [1] * 7, hash_ids=ids,
        block_size=16,
    )


def run(hot, replicas: int = 1, wl: Workload | None = None, fast: bool = True):
    return Simulator(
        replicas, routing="round_robin", kv_tokens=3 * 16, cost_model=COST, fast=fast,
        tiers=Tiers([POOL, DRAM], load_policy="always", replicate_hot_blocks=hot),
    ).run(workload() if wl is None else wl, progress=False)


@pytest.mark.parametrize("fast", [True, False])
def test_a_block_read_k_plus_1_times_is_copied_and_then_loaded_from_dram(fast):
    # One replica, 3 HBM blocks. Request 1 (filler) evicts X and block 10 into the
    # pool. Requests 2, 4 and 6 ([X, n]) each find X in a lower tier and load it
    # (load_policy="always"); their second block needs room too: two of the last
    # filler's blocks are evicted into the pool at the same step start, 3.2 MB on
    # the pool link beside X's 1.6 MB read, so (processor sharing) the read ends
    # at 3.2 ms. Fillers 3 and 5 evict X again (into the pool, which holds it:
    # a refresh, no bytes).
    # With k = 1: request 2's read is X's first (1 <= 1: no copy); request 4's its
    # second (2 > 1): X is also written into the replica's DRAM (1.6 MB on the DRAM
    # link). Request 6 looks in its own tier first and loads X from the DRAM, alone
    # on that link: 0.1 ms instead of 3.2, credited to the DRAM tier; its first
    # token 3.1 ms sooner (609.0 -> 605.9).
    off, on = run(None, fast=fast).requests, run(1, fast=fast).requests
    assert off["pool_hit_tokens"].tolist() == [0, 0, 16, 0, 16, 0, 16]
    assert off["dram_hit_tokens"].tolist() == [0] * 7
    assert on["pool_hit_tokens"].tolist() == [0, 0, 16, 0, 16, 0, 0]
    assert on["dram_hit_tokens"].tolist() == [0, 0, 0, 0, 0, 0, 16]
    assert off.loc[6, "load_ms"] == pytest.approx(3.2, abs=1e-9)
    assert on.loc[6, "load_ms"] == pytest.approx(0.1, abs=1e-9)
    assert off.loc[6, "first_token_ms"] - on.loc[6, "first_token_ms"] == pytest.approx(3.1, abs=1e-9)
    pd.testing.assert_frame_equal(on.iloc[:6], off.iloc[:6], check_exact=True)  # same until then


def test_the_copy_uses_the_dram_link_and_saves_a_pool_read():
    off, on = run(None).replicas.iloc[0], run(1).replicas.iloc[0]
    assert off["pool_bytes_read"] == 3 * MB and on["pool_bytes_read"] == 2 * MB
    assert off["dram_bytes_written"] == 0 and on["dram_bytes_written"] == MB  # the copy
    assert off["dram_bytes_read"] == 0 and on["dram_bytes_read"] == MB  # request 6's load
    assert on["pool_bytes_written"] == off["pool_bytes_written"]


def test_reads_are_counted_over_the_fleet():
    # Two replicas, round robin, 100 ms apart: [X, a] on replica 0 computes X;
    # a filler on replica 1; a filler on replica 0 evicts X into the pool; then
    # [X, b] on replica 1 (read 1 of X: no copy with k = 1) and [X, c] on replica 0
    # (read 2, by another replica: 2 > 1, copied into replica 0's DRAM).
    ids = [[X, 10], [30, 31, 32], [20, 21, 22], [X, 11], [X, 12]]
    wl = Workload.from_requests(
        [100.0 * i for i in range(5)], [16 * len(r) for r in ids], [1] * 5, hash_ids=ids,
        block_size=16,
    )
    res = run(1, replicas=2, wl=wl)
    assert res.requests["replica"].tolist() == [0, 1, 0, 1, 0]
    assert res.requests["pool_hit_tokens"].tolist() == [0, 0, 0, 16, 16]
    assert res.replicas["dram_bytes_written"].tolist() == [MB, 0.0]


def test_with_no_copy_the_run_equals_the_run_without_the_option():
    # a threshold never reached copies nothing; the own-tier-first lookup changes
    # nothing while no block is in two tiers: the same frames (an independent
    # path: the plain ReplicaTiers against its subclass)
    a, b = run(None), run(10**9)
    for name in ("requests", "replicas", "timeline"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert b.config["replicate_hot_blocks"] == 10**9 and "replicate_hot_blocks" not in a.config


def test_disaggregated_fleet_copies_on_the_prefill_instance():
    # the same requests on one prefill and one decode instance (the tiers sit
    # behind the prefill instance): the same pool/DRAM hits as aggregated
    kw = dict(kv_tokens=3 * 16, cost_model=COST, replicas=Disaggregated(prefill=1, decode=1),
              tiers=Tiers([POOL, DRAM], load_policy="always", replicate_hot_blocks=1))
    on = Simulator(**kw).run(workload(), progress=False)
    plain = Simulator(**kw, fast=False).run(workload(), progress=False)
    assert on.requests["dram_hit_tokens"].tolist() == [0, 0, 0, 0, 0, 0, 16]
    assert on.replicas["dram_bytes_written"].tolist() == [MB, 0.0]
    pd.testing.assert_frame_equal(on.requests, plain.requests, check_exact=True)


@pytest.mark.parametrize(
    "tiers, hot, match",
    [
        ([POOL], 1, "the tiers have none: add one, e.g. Tier\\('dram'"),
        ([DRAM], 1, "read from a shared tier, and the tiers have none"),
        (None, 1, "the tiers have none: add one"),
        ([POOL, DRAM], -1, "tiers.replicate_hot_blocks must be None or an int >= 0, got -1"),
        ([POOL, DRAM], True, "must be None or an int >= 0, got True"),
        ([POOL, DRAM], 1.5, "must be None or an int >= 0, got 1.5"),
    ],
)
def test_bad_options(tiers, hot, match):
    with pytest.raises(ValueError, match=match):
        Simulator(kv_tokens=3 * 16, cost_model=COST,
                  tiers=Tiers(tiers, replicate_hot_blocks=hot)).run(workload(), progress=False)
