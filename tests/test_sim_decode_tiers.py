"""KV tiers on decode instances that keep a prefix cache (``Disaggregated(decode_cache=True)``
with ``Simulator(tiers=...)``): a prefix a decode instance holds in its own tiers is
loaded from there, and the handoff moves only the rest.

Cost model: ``LinearCostModel(kv_bytes_per_token=1e6)``, a step costs ``5 +
0.05 * prefill_tokens + 0.1 * decode_seqs`` ms; block size 16 tokens (a block
is 16e6 bytes); the handoff link moves 16 GB/s = 16e6 bytes/ms, one block a
ms, without latency.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import (
    assert_same,
    hypothesis_settings,
    moved_prompt_tokens,
    runner,
    sim_workloads,
    simulate,
)
from hypothesis import given
from hypothesis import strategies as st
from test_sim_disagg import disagg_configs

from conftest import draw_tiers
from inferasim import Workload
from inferasim.sim import Disaggregated, LinearCostModel, Simulator, Tier, Tiers

BS = 16
LIN = LinearCostModel(kv_bytes_per_token=1e6)
# (no shrinking: a failing case of these multi-replica runs takes minutes to shrink)
SETTINGS = hypothesis_settings(30, slow=True, shrink=False)

run = runner(kv_tokens=7 * BS, cost_model=LIN)


def split(decode_tiers: bool = True, decode_cache: bool = True) -> Disaggregated:
    """One prefill and one decode instance, 16 GB/s handoffs without latency."""
    return Disaggregated(1, 1, handoff_gbps=16.0, handoff_latency_us=0.0,
                         decode_cache=decode_cache, decode_tiers=decode_tiers)


#: A 256-token DRAM tier per replica at 32 GB/s (32e6 bytes/ms: a block in 0.5 ms),
#: reads and writes on one link, written on HBM eviction.
DRAM = Tier("dram", 16 * BS, read_gbps=32.0, write_gbps=32.0)

#: A keeps blocks 1, 2, 3 on the decode instance; B's growth pushes them out to its
#: DRAM; C (blocks 1, 2, 3 and 8 tokens more) finds them there.
THREE = Workload.from_requests(
    [0.0, 100.0, 400.0], [48, 64, 56], [3, 40, 3],
    hash_ids=[[1, 2, 3], [4, 5, 6, 8], [1, 2, 3, 9]], block_size=BS,
)


@pytest.mark.parametrize("fast", [True, False])
def test_a_prefix_evicted_to_the_decode_dram_is_loaded_from_there(fast):
    # HBM: 7 pages of 16 tokens on every instance.
    # A at 0: 48 tokens (blocks 1, 2, 3), 3 out: prefill 5 + 0.05 * 48 = 7.4, handoff
    # 48 MB = 3 ms -> 10.4, two decode steps of 5.1 -> 20.6. The decode instance keeps
    # 1, 2, 3 cached (evictable; released tail first, so 3 is the LRU, then 2, 1).
    # B at 100: 64 tokens (blocks 4, 5, 6, 8), 40 out: the prefill instance has 4 free
    # pages for its 4 (no eviction there). The decode instance reserves ceil(65 / 16)
    # = 5 pages (4 free: evicts block 3) and grows to ceil(104 / 16) = 7 pages while
    # it decodes (evicts 2, then 1): all three go to its DRAM (48 MB written). B
    # finishes at 108.2 + 4 + 39 * 5.1 = 311.1; its blocks 4, 5, 6, 8 stay cached.
    # C at 400: 56 tokens (blocks 1, 2, 3, then 8 tokens): the prefill instance
    # still holds 1, 2, 3 (HBM hit, no DRAM load: dram_hit_tokens 0), computes 8
    # tokens: 5 + 0.4 = 5.4 -> first token 405.4. On the decode instance block 1
    # is not in HBM, blocks 1, 2, 3 are in its DRAM: a held run of 3 blocks
    # (decode_hit_tokens 48). They start loading at 405.4 (48 MB); the reservation
    # of ceil(57 / 16) = 4 pages (3 free) evicts B's LRU block 8, a 16 MB write on
    # the same DRAM link at 405.4: both share 32e6 B/ms, the write ends after 1 ms
    # (16e6 each), the read's last 32 MB take 1 ms more -> loaded at 407.4. The
    # handoff moves the 8 other tokens: 8 MB = 0.5 ms -> delivered 405.9; C waits
    # for its loads (decode_queue_ms 407.4 - 405.9 = 1.5), then two decode steps
    # -> 407.4 + 10.2 = 417.6.
    # Without decode tiers the decode instance holds nothing of C: the handoff moves
    # 56 tokens = 3.5 ms -> 408.9, finish 408.9 + 10.2 = 419.1.
    res = run(THREE, replicas=split(), tiers=[DRAM], fast=fast)
    req = res.requests
    assert req["decode_hit_tokens"].tolist() == [0, 0, 48]
    assert req["dram_hit_tokens"].tolist() == [0, 0, 0]
    assert req["transfer_ms"].tolist() == pytest.approx([3.0, 4.0, 0.5])
    assert req["decode_queue_ms"].tolist() == pytest.approx([0.0, 0.0, 1.5])
    assert req["finish_ms"].tolist() == pytest.approx([20.6, 311.1, 417.6])
    dec = res.replicas.loc[1]
    assert dec["dram_bytes_read"] == 48e6
    assert dec["dram_bytes_written"] == 64e6  # blocks 3, 2, 1, then 8
    base = run(THREE, replicas=split(decode_tiers=False), tiers=[DRAM], fast=fast).requests
    assert base["decode_hit_tokens"].tolist() == [0, 0, 0]
    assert base["transfer_ms"].tolist() == pytest.approx([3.0, 4.0, 3.5])
    assert base["finish_ms"].tolist() == pytest.approx([20.6, 311.1, 419.1])
    assert res.replicas.loc[0, "dram_bytes_written"] == pytest.approx(
        run(THREE, replicas=split(decode_tiers=False), tiers=[DRAM]).replicas.loc[
            0, "dram_bytes_written"])


def test_a_load_done_before_the_handoff_joins_at_the_delivery():
    # As above with a 64 GB/s DRAM link (a block in 0.25 ms) and a 2 GB/s handoff
    # link (2e6 bytes/ms): C's loads end at 405.4 + 0.5 (the 16 MB write and the
    # read share: 16 MB each after 0.5 ms) + 0.5 (the read's last 32 MB) = 406.4,
    # its 8 MB handoff at 405.4 + 4 = 409.4: C joins at once (decode_queue_ms 0)
    # and finishes at 409.4 + 10.2 = 419.6.
    fast = Tier("dram", 16 * BS, read_gbps=64.0, write_gbps=64.0)
    fleet = replace(split(), handoff_gbps=2.0)
    req = run(THREE, replicas=fleet, tiers=[fast]).requests
    assert req["decode_hit_tokens"].tolist()[2] == 48
    assert req["transfer_ms"].tolist()[2] == pytest.approx(4.0)
    assert req["decode_queue_ms"].tolist()[2] == 0.0
    assert req["finish_ms"].tolist()[2] == pytest.approx(419.6)


@pytest.mark.parametrize("policy", ["faster", "always"])
def test_a_tier_slower_than_the_handoff_is_read_only_when_always(policy):
    # As the first case with a 4 GB/s DRAM link (4e6 bytes/ms, a block in 4 ms). At
    # C's placement (405.4) loading its 3 blocks would take 12 ms (the estimate, on
    # the idle link), handing all 56 tokens over takes 3.5 ms: with "faster" the
    # decode instance leaves its DRAM alone (decode_hit_tokens 0, transfer 3.5 ms,
    # finish 408.9 + 10.2 = 419.1). With "always" it loads them: the 48 MB read
    # shares the link with the 16 MB write of block 8 (both at 2e6 B/ms: the write
    # ends after 8 ms, the read's last 32 MB take 8 ms more) -> 421.4; the 8-token
    # handoff is delivered at 405.9 (decode_queue_ms 15.5); finish 421.4 + 10.2 = 431.6.
    slow = Tier("dram", 16 * BS, read_gbps=4.0, write_gbps=4.0)
    req = run(THREE, replicas=split(), tiers=Tiers([slow], load_policy=policy)).requests
    c = req.loc[2]
    if policy == "faster":
        assert (c["decode_hit_tokens"], c["transfer_ms"]) == (0, pytest.approx(3.5))
        assert c["finish_ms"] == pytest.approx(419.1)
    else:
        assert (c["decode_hit_tokens"], c["transfer_ms"]) == (48, pytest.approx(0.5))
        assert c["decode_queue_ms"] == pytest.approx(15.5)
        assert c["finish_ms"] == pytest.approx(431.6)


@pytest.mark.parametrize("fast", [True, False])
def test_a_prefix_the_prefill_published_to_a_shared_pool_is_read_from_it(fast):
    # A shared pool written through (its default) at 32 GB/s. A at 0: 48 tokens
    # (blocks 1, 2, 3), 3 out: the prefill step ends at 7.4 and writes 1, 2, 3 to
    # the pool (48 MB on the prefill instance's link). The handoff placed at 7.4
    # finds them in the pool, the decode instance's own tier: loading them (48 MB at
    # 32e6 B/ms = 1.5 ms on its own idle link) beats handing 48 tokens over (3 ms),
    # so the handoff moves nothing (delivered at once: transfer_ms 0) and the
    # sequence waits for the load (decode_queue_ms 1.5): two decode steps from 8.9
    # -> 19.1. The decode instance writes nothing to the pool (it computed nothing;
    # the blocks it loaded came from the pool itself).
    pool = Tier("pool", 64 * BS, read_gbps=32.0, write_gbps=32.0, shared=True)
    res = run(THREE.head(1), replicas=split(), tiers=[pool], fast=fast)
    req = res.requests
    assert req["decode_hit_tokens"].tolist() == [48]
    assert req["transfer_ms"].tolist() == [0.0]
    assert req["decode_queue_ms"].tolist() == pytest.approx([1.5])
    assert req["finish_ms"].tolist() == pytest.approx([19.1])
    assert res.replicas["pool_bytes_read"].tolist() == [0.0, 48e6]
    assert res.replicas["pool_bytes_written"].tolist() == [48e6, 0.0]
    assert res.tiers.loc["pool", "bytes_read"] == 48e6


def test_decode_tiers_must_be_a_bool():
    bad = Disaggregated(1, 1, decode_cache=True, decode_tiers="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=(
        r"replicas\.decode_tiers \(Disaggregated\(decode_tiers=\.\.\.\)\) must be a bool, "
        r"got 'yes'"
    )):
        Simulator(replicas=bad, cost_model=LIN, kv_tokens=10 * BS).run(THREE, progress=False)


def test_config_names_decode_tiers_only_when_off():
    assert "decode_tiers" not in run(THREE, replicas=split(), tiers=[DRAM]).config
    assert run(THREE, replicas=split(decode_tiers=False), tiers=[DRAM]).config[
        "decode_tiers"] is False


@st.composite
def decode_tier_configs(draw) -> dict:
    """A disaggregated config with ``decode_cache`` and a random tier stack."""
    cfg = draw(disagg_configs())
    cfg["replicas"] = replace(cfg["replicas"], decode_cache=True)
    cost = cfg["cost_model"]
    cfg["cost_model"] = replace(cost, kv_bytes_per_token=draw(st.sampled_from([1e4, 1e5, 1e6])))
    gbps = st.sampled_from([0.5, 2.0, 20.0])
    lat = st.sampled_from([0.0, 50.0])
    cfg["tiers"] = Tiers(draw_tiers(draw, gbps, lat, dram=200, ssd=400, pool=600),
                         load_policy=draw(st.sampled_from(["faster", "always"])))
    return cfg


def _fleet(cfg: dict, **kw) -> dict:
    """``cfg`` with its fleet's fields replaced by ``kw``."""
    return {**cfg, "replicas": replace(cfg["replicas"], **kw)}


@SETTINGS
@given(wl=sim_workloads(), cfg=decode_tier_configs())
def test_decode_tiers_finish_everything_and_move_no_more(wl, cfg):
    res = simulate(wl, **cfg)
    req = res.requests
    off = simulate(wl, **_fleet(cfg, decode_cache=False)).requests
    assert req["status"].tolist() == off["status"].tolist()
    fin = req[req["status"] == "finished"]
    assert len(fin) + (req["status"] == "rejected").sum() == len(wl)
    times = fin[["arrival_ms", "scheduled_ms", "first_token_ms", "finish_ms"]].to_numpy()
    assert np.isfinite(times).all() and (np.diff(times, axis=1) >= 0).all()
    handed = fin[fin["decode_replica"] >= 0][["transfer_ms", "decode_queue_ms"]]
    assert np.isfinite(handed.to_numpy()).all() and (handed >= 0).all().all()
    # what the decode instance held is a run of whole prompt blocks, none of it moved
    hit = req["decode_hit_tokens"].to_numpy()
    assert (hit % wl.block_size == 0).all() and (hit >= 0).all()
    assert (hit <= req["input_len"].to_numpy() // wl.block_size * wl.block_size).all()
    # (bounded by the run without decode_cache, which moves every prompt; a run
    # with decode_tiers=False is no bound: its decode HBM keeps other blocks, and
    # hypothesis finds runs where it holds more)
    assert moved_prompt_tokens(req).sum() <= moved_prompt_tokens(off).sum()
    # memory and tiers within capacity on every instance
    cap = res.config["kv_tokens"]
    tl = res.timeline
    assert (tl["kv_running_tokens"] + tl["kv_cached_tokens"] <= cap).all()
    assert (res.replicas["peak_kv_tokens"] <= cap).all()
    for t in cfg["tiers"]:
        tcap = (t.capacity_tokens // wl.block_size) * wl.block_size
        assert (res.replicas[f"{t.name}_peak_tokens"] <= tcap).all()


@SETTINGS
@given(wl=sim_workloads(), cfg=decode_tier_configs())
def test_decode_tiers_jump_equals_plain_loop(wl, cfg):
    assert_same(simulate(wl, **cfg, fast=True), simulate(wl, **cfg, fast=False))


@SETTINGS
@given(wl=sim_workloads(), cfg=decode_tier_configs())
def test_without_decode_cache_decode_tiers_change_nothing(wl, cfg):
    # Without decode_cache a decode instance keeps nothing and gets no tiers,
    # whatever decode_tiers says: the frames are the same bit for bit, and the
    # decode instances read and write no tier.
    on = simulate(wl, **_fleet(cfg, decode_cache=False))
    off = simulate(wl, **_fleet(cfg, decode_cache=False, decode_tiers=False))
    assert_same(on, off)
    dec = on.replicas.iloc[cfg["replicas"].prefill:]
    for t in cfg["tiers"]:
        assert (dec[f"{t.name}_bytes_read"] == 0).all()
        assert (dec[f"{t.name}_bytes_written"] == 0).all()
