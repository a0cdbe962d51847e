"""Handoffs on the prefill instances' NIC to a KV tier (``Disaggregated(handoff_tier=...)``):
hand-derived transfer times when the handoffs share the link with the tier's writes."""

from __future__ import annotations

import pytest

from inferasim import Workload
from inferasim.sim import Disaggregated, LinearCostModel, Simulator, Tier, Tiers


def one_prefill_one_decode(handoff_tier, duplex=False):
    # Block size 16 at 62,500 bytes a token: 1e6 bytes a block; every link 1 GB/s
    # (1e6 bytes/ms), no latency. R0 (t=0) computes blocks 1, 2, 100; R1 (t=1000)
    # finds 1, 2 in the prefill instance's HBM and computes 101. The pool is written
    # through: each prefill step ends with a write of the blocks it computed, and at
    # that same instant the first token starts the handoff of the whole prompt
    # (48 tokens: 3e6 bytes).
    ids = [[1, 2, 100], [1, 2, 101]]
    wl = Workload.from_requests([0, 1000], [48, 48], [2, 2], ids, block_size=16)
    pool = Tier("pool", 1600, read_gbps=1.0, write_gbps=1.0, shared=True, duplex=duplex)
    fleet = Disaggregated(1, 1, handoff_gbps=1.0, handoff_latency_us=0.0,
                          handoff_tier=handoff_tier)
    return Simulator(replicas=fleet, kv_tokens=64, tiers=Tiers([pool], load_policy="always"),
                     cost_model=LinearCostModel(kv_bytes_per_token=62500.0)).run(wl, progress=False)


def test_handoffs_on_a_link_of_their_own():
    # 3e6 bytes at 1e6 bytes/ms: 3 ms each, whatever the pool's link does.
    assert one_prefill_one_decode(None).requests["transfer_ms"].tolist() == [3.0, 3.0]


def test_handoffs_share_the_nic_with_the_pool_writes():
    # R0: the write of 3 blocks (3e6 bytes) and the handoff (3e6) start together and
    # share the link: 6e6 bytes at 1e6 bytes/ms, both end after 6 ms.
    # R1: the write of 1 block (1e6) and the handoff (3e6): at half the bandwidth each,
    # the write ends after 2 ms (the handoff has 1e6 of its 3e6 done), the handoff's
    # last 2e6 alone take 2 ms more: 4 ms.
    req = one_prefill_one_decode("pool").requests
    assert req["transfer_ms"].tolist() == [6.0, 4.0]
    assert (req["status"] == "finished").all()


def test_a_duplex_tier_shares_only_its_write_link():
    # duplex: the handoffs go on the write link (outbound, as the writes): the same
    # times as above (no read is in flight in this workload).
    assert one_prefill_one_decode("pool", duplex=True).requests["transfer_ms"].tolist() == [
        6.0, 4.0]


def test_handoff_tier_must_name_a_tier():
    with pytest.raises(ValueError, match="replicas.handoff_tier='nic' names no KV tier"):
        one_prefill_one_decode("nic")
    with pytest.raises(ValueError, match="replicas.handoff_tier must be None or a tier's name"):
        Disaggregated(1, 1, handoff_tier=3).checked()
