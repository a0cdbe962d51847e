"""Prefill/decode disaggregation: hand-computed cases and invariants.

Cost model: ``LinearCostModel(kv_bytes_per_token=1e6)``, a step costs ``5 +
0.05 * prefill_tokens + 0.1 * decode_seqs`` ms; block size 16 tokens; a
16-token prompt's KV is 16 MB, i.e. 1 ms on a 16 GB/s link (16e6 bytes/ms).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import (
    assert_same,
    busy_workloads,
    hypothesis_settings,
    runner,
    sim_configs,
    sim_workloads,
    simulate,
)
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.sim import (
    Disaggregated,
    EngineConfig,
    KvCostRouter,
    LinearCostModel,
    Simulator,
)

BS = 16
LIN = LinearCostModel(kv_bytes_per_token=1e6)
SETTINGS = hypothesis_settings(30, slow=True)


def split(prefill: int = 1, decode: int = 1, **handoff) -> Disaggregated:
    """``prefill`` + ``decode`` instances; the handoff without latency unless given."""
    return Disaggregated(prefill, decode, **{"handoff_latency_us": 0.0, **handoff})


run = runner(kv_tokens=1000 * BS, cost_model=LIN, replicas=split())


@pytest.mark.parametrize("fast", [True, False])
def test_one_request_ttft_and_e2e_include_the_handoff(fast):
    # P=32, O=3. Prefill step: 5 + 0.05 * 32 = 6.6 -> first token at 106.6 (TTFT 6.6).
    # Handoff: 32 MB at 32 GB/s = 1 ms + 10 us latency -> delivered at 107.61.
    # Decode instance: two steps of 5.1 -> 112.71, 117.81. E2E 17.81.
    # The second token comes 1.01 + 5.1 = 6.11 after the first: the largest gap.
    wl = Workload.from_requests([100.0], [32], [3], block_size=BS)
    res = run(wl, replicas=split(handoff_gbps=32.0, handoff_latency_us=10.0), fast=fast)
    r = res.requests.iloc[0]
    assert (r.prefill_replica, r.decode_replica, r.replica) == (0, 1, 0)
    assert r.ttft_ms == pytest.approx(6.6)
    assert r.transfer_ms == pytest.approx(1.01)
    assert r.handoff_wait_ms == 0.0 and r.decode_queue_ms == 0.0 and r.prefill_queue_ms == 0.0
    assert r.finish_ms == pytest.approx(117.81)
    assert r.e2e_ms == pytest.approx(17.81)
    assert r.max_itl_ms == pytest.approx(6.11)
    assert r.itl_ms == pytest.approx((17.81 - 6.6) / 2)
    reps = res.replicas
    assert reps["role"].tolist() == ["prefill", "decode"]
    assert reps["requests"].tolist() == [1, 1]
    assert reps["output_tokens"].tolist() == [1, 2]
    assert reps["steps"].tolist() == [1, 2]
    # the prefill instance held the prompt's 2 blocks, the decode instance 32 + 2 tokens
    assert reps["peak_kv_tokens"].tolist() == [2 * BS, 3 * BS]  # pages of 16 tokens


def test_one_token_output_never_leaves_the_prefill_instance():
    wl = Workload.from_requests([0.0], [32], [1], block_size=BS)
    r = run(wl, replicas=split(handoff_gbps=32.0)).requests.iloc[0]
    assert r.decode_replica == -1 and np.isnan(r.transfer_ms)
    assert r.finish_ms == pytest.approx(6.6)


def test_decode_pool_full_keeps_the_kv_pinned_on_the_prefill_side():
    # 4 KV blocks on each instance, 16 GB/s (16 tokens = 1 ms), no latency.
    # A (16 tokens, 40 out) at 0: first token 5.8; the decode instance reserves
    # ceil(17 / 16) = 2 blocks; delivered at 6.8; decode steps of 5.1 from 6.8: A
    # computes positions 16, 32, 48 at decode steps 1, 17, 33 and holds all 4 blocks
    # from step 33 (starting 6.8 + 32 * 5.1 = 170.0) until it finishes after step 39
    # at 6.8 + 39 * 5.1 = 205.7.
    # B (16 tokens, 2 out) at 171: first token 176.8; needs 2 blocks, the decode
    # instance has 0 free: B's KV (1 block) stays pinned on the prefill instance until
    # A finishes at 205.7; transfer 205.7 -> 206.7; one decode step -> 211.8.
    wl = Workload.from_requests([0.0, 171.0], [16, 16], [40, 2], block_size=BS)
    res = run(wl, kv_tokens=4 * BS, replicas=split(handoff_gbps=16.0), timeline_ms=10.0)
    a, b = res.requests.iloc[0], res.requests.iloc[1]
    assert a.first_token_ms == pytest.approx(5.8)
    assert a.finish_ms == pytest.approx(205.7)
    assert b.first_token_ms == pytest.approx(176.8)
    assert b.handoff_wait_ms == pytest.approx(205.7 - 176.8)
    assert b.transfer_ms == pytest.approx(1.0)
    assert b.finish_ms == pytest.approx(211.8)
    assert b.max_itl_ms == pytest.approx(211.8 - 176.8)
    # pinned: the prefill instance holds B's block while it waits (samples 180..200)
    tl = res.timeline
    pre = tl[(tl["replica"] == 0) & tl["time_ms"].between(180, 200)]
    assert len(pre) == 3 and (pre["kv_running_tokens"] == 1 * BS).all()
    dec = tl[(tl["replica"] == 1) & tl["time_ms"].between(180, 200)]
    assert (dec["kv_running_tokens"] == 4 * BS).all()
    assert res.summary()["handoff_wait_ms_mean"] == pytest.approx((205.7 - 176.8) / 2)


@pytest.mark.parametrize(
    "gbps, layerwise, finish",
    [
        # 32 tokens = 32 MB. 8 GB/s: 4 ms. After the prefill: 6.6 + 4 = 10.6 + 2 * 5.1.
        (8.0, False, 20.8),
        # streamed from the prefill's start: done at 4.0, before the prefill ends at
        # 6.6: the handoff is hidden, as if aggregated: 6.6 + 2 * 5.1
        (8.0, True, 16.8),
        # 2 GB/s: 16 ms. After the prefill: 22.6 + 10.2; streamed: 16.0 + 10.2
        (2.0, False, 32.8),
        (2.0, True, 26.2),
    ],
)
def test_layerwise_overlaps_the_transfer_with_the_prefill(gbps, layerwise, finish):
    wl = Workload.from_requests([0.0], [32], [3], block_size=BS)
    r = run(wl, replicas=split(handoff_gbps=gbps, layerwise=layerwise)).requests.iloc[0]
    assert r.ttft_ms == pytest.approx(6.6)
    assert r.finish_ms == pytest.approx(finish)


def test_transfers_share_the_prefill_link():
    # Two 32-token prompts prefilled together on one prefill instance (first tokens at
    # 5 + 0.05 * 64 = 8.2); both 32 MB transfers start at 8.2 on a 32 GB/s link and
    # share it: 2 ms each -> delivered at 10.2 (alone: 9.2). Two decode instances.
    wl = Workload.from_requests([0.0, 0.0], [32, 32], [2, 2], block_size=BS)
    res = run(wl, replicas=split(decode=2, handoff_gbps=32.0))
    assert res.requests["transfer_ms"].tolist() == pytest.approx([2.0, 2.0])
    assert res.requests["decode_replica"].tolist() == [1, 2]
    assert res.requests["finish_ms"].tolist() == pytest.approx([15.3, 15.3])


def test_bad_topology_arguments():
    wl = Workload.from_requests([0.0], [32], [2], block_size=BS)
    with pytest.raises(TypeError, match="decode"):  # both pools are needed
        Disaggregated(prefill=2)
    with pytest.raises(ValueError, match="replicas.decode must be a positive integer"):
        Simulator(replicas=Disaggregated(2, 0), cost_model=LIN, kv_tokens=10 * BS).run(wl)
    with pytest.raises(ValueError, match=r"replicas.handoff_gbps must be a finite number >= 1e-09 \(GB/s"):
        run(wl, replicas=split(handoff_gbps=0.0))


@st.composite
def disagg_configs(draw) -> dict:
    cfg = draw(sim_configs())
    cfg.pop("replicas")
    if isinstance(cfg["routing"], KvCostRouter) and draw(st.booleans()):
        cfg["routing"] = "conductor"
    cost = cfg["cost_model"]
    cfg["cost_model"] = LinearCostModel(
        overhead_ms=cost.overhead_ms,
        prefill_token_ms=cost.prefill_token_ms,
        prefill_attention_ms=cost.prefill_attention_ms,
        decode_seq_ms=cost.decode_seq_ms,
        decode_context_ms=cost.decode_context_ms,
        kv_bytes_per_token=draw(st.sampled_from([1.0, 1e5, 1e6])),
    )
    cfg["replicas"] = Disaggregated(
        prefill=draw(st.integers(1, 2)),
        decode=draw(st.integers(1, 2)),
        handoff_gbps=draw(st.sampled_from([1.0, 16.0, 400.0])),
        handoff_latency_us=draw(st.sampled_from([0.0, 50.0])),
        layerwise=draw(st.booleans()),
    )
    return cfg


@SETTINGS
@given(wl=st.one_of(sim_workloads(), busy_workloads()), cfg=disagg_configs())
def test_disaggregated_jump_equals_plain_loop(wl, cfg):
    fast = simulate(wl, **cfg, fast=True)
    plain = simulate(wl, **cfg, fast=False)
    assert_same(fast, plain)


@SETTINGS
@given(wl=sim_workloads(), cfg=disagg_configs())
def test_disaggregated_invariants(wl, cfg):
    res = simulate(wl, **cfg)
    req = res.requests
    n = len(wl)
    P_n, D_n = cfg["replicas"].prefill, cfg["replicas"].decode
    assert req.index.tolist() == list(range(n))
    fin = req[req["status"] == "finished"]
    assert set(req["status"]) <= {"finished", "rejected"}
    # every request once: on one prefill instance, and on one decode instance iff it
    # has a second token
    assert fin["prefill_replica"].between(0, P_n - 1).all()
    many = fin["output_len"] > 1
    assert fin.loc[many, "decode_replica"].between(P_n, P_n + D_n - 1).all()
    assert (fin.loc[~many, "decode_replica"] == -1).all()
    reps = res.replicas
    assert reps["requests"][:P_n].sum() == len(fin)
    assert reps["requests"][P_n:].sum() == int(many.sum())
    assert reps["output_tokens"].sum() == fin["output_len"].sum()
    # times ordered: first token, (wait), transfer, decode
    h = fin[many]
    assert (h["first_token_ms"] <= h["finish_ms"]).all()
    assert (h["handoff_wait_ms"] >= 0).all() and (h["transfer_ms"] >= 0).all()
    assert (h["decode_queue_ms"] >= 0).all()
    # the decode steps come after the handoff: finish > delivery + decode queue
    if not cfg["replicas"].layerwise:  # (layerwise transfers start with the prefill or later)
        delivered = h["first_token_ms"] + h["handoff_wait_ms"] + h["transfer_ms"]
        assert (h["finish_ms"] > delivered + h["decode_queue_ms"] - 1e-9).all()
    assert (h["finish_ms"] > h["first_token_ms"]).all()
    # each instance's memory within capacity, on both pools
    cap = res.config["kv_tokens"]
    tl = res.timeline
    assert (tl["kv_running_tokens"] + tl["kv_cached_tokens"] <= cap).all()
    assert (reps["peak_kv_tokens"] <= cap).all() and (reps["kv_capacity_tokens"] == cap).all()
    assert (reps["peak_running"] <= cfg["engine"].max_num_seqs).all()


def test_compare_topologies_rows_are_the_runs_they_name():
    from inferasim.sim import compare_topologies

    wl = Workload.from_requests(
        [0.0, 5.0, 9.0, 30.0], [32, 48, 16, 64], [3, 5, 2, 4], block_size=BS
    )
    kw = dict(kv_tokens=50 * BS, cost_model=LIN)
    same = dict(handoff={"handoff_latency_us": 0.0}, run={"progress": False})
    df = compare_topologies(wl, gpus=3, splits=[(1, 2), (2, 1)], slo_ttft_ms=10.0, **same, **kw)
    assert df["topology"].tolist() == ["aggregated", "1:2", "2:1"]
    agg = Simulator(replicas=3, **kw).run(wl, progress=False).summary(slo_ttft_ms=10.0)
    two_one = Simulator(replicas=split(2, 1), **kw).run(wl, progress=False).summary(slo_ttft_ms=10.0)
    for col in ("ttft_ms_mean", "e2e_ms_p99", "slo_attainment", "finished"):
        assert df.loc[0, col] == agg[col]
        assert df.loc[2, col] == two_one[col]
    with pytest.raises(ValueError, match="adding up to gpus=3"):
        compare_topologies(wl, gpus=3, splits=[(1, 1)], **same, **kw)


def test_layerwise_handoff_of_a_preempted_prefill_is_called_off():
    # Found by hypothesis (jump_equals_plain_loop): 13 requests at 0, block size 4,
    # 27 blocks on each instance, 23-token chunks. A layerwise handoff reserves its
    # decode blocks when its prefill starts; here such a prefill (request 2) is
    # preempted on the prefill instance while request 1's finished prompt (20
    # blocks) is pinned there waiting for decode room that request 2's reservation
    # (8 blocks of 27) holds: request 2 can't be recomputed before request 1
    # leaves, request 1 can't leave before request 2 is delivered. The preemption
    # must call the handoff off (stop the transfer, free the reservation; it
    # starts again with the recompute): then every request finishes, in both loops.
    inp = [37, 80, 29, 32, 32, 37, 58, 57, 68, 23, 19, 71, 3]
    outp = [37, 12, 7, 10, 20, 20, 1, 30, 17, 39, 27, 39, 21]
    ids, h = [], 10000
    for n in inp:  # distinct blocks (no prefix sharing)
        ids.append(list(range(h, h + -(-n // 4))))
        h += len(ids[-1])
    wl = Workload.from_requests([0.0] * 13, inp, outp, hash_ids=ids, block_size=4)
    cost = LinearCostModel(
        overhead_ms=1.0,
        prefill_token_ms=0.0,
        prefill_attention_ms=0.0,
        decode_seq_ms=0.7,
        decode_context_ms=0.0,
        kv_bytes_per_token=1e6,
    )
    kw = dict(
        kv_tokens=27 * 4,
        engine=EngineConfig(max_num_seqs=6, max_batched_tokens=23),
        eviction="fifo",
        seed=2,
        cost_model=cost,
        timeline_ms=0.7,
        replicas=split(handoff_gbps=1.0, handoff_latency_us=50.0, layerwise=True),
    )
    fast, plain = run(wl, fast=True, **kw), run(wl, fast=False, **kw)
    req = fast.requests
    # request 11 never fits (71 + 39 tokens: 28 blocks > 27); every other one finishes
    assert req["status"].tolist() == ["finished"] * 11 + ["rejected", "finished"]
    pd.testing.assert_frame_equal(fast.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.replicas, plain.replicas, check_exact=True)
    pd.testing.assert_frame_equal(fast.timeline, plain.timeline, check_exact=True)


@pytest.mark.parametrize("fast", [True, False])
def test_conductor_adds_the_handoff_estimate_to_the_ttft(fast):
    # Two prefill instances, one decode, a 1 GB/s handoff (1e6 bytes/ms), no hash ids.
    # r0 (t=0, P=32) goes to prefill 0 (all equal: the lowest index); its prefill step
    # is 5 + 0.05 * 32 = 6.6 ms, then its 32 MB take 32 ms on prefill 0's link
    # (6.6 -> 38.6). r1 (t=10, P=32) finds both prefill instances idle: TTFT estimate
    # 6.6 on each. Its handoff from prefill 0 would share the link with r0's 28.6 MB
    # left (both at half rate: 57.2 ms, then 3.4 MB alone: 60.6 ms), from prefill 1 it
    # takes 32 ms: 6.6 + 32 < 6.6 + 60.6, so r1 goes to prefill 1.
    wl = Workload.from_requests([0.0, 10.0], [32, 32], [2, 2], block_size=BS)
    res = run(wl, replicas=split(2, 1, handoff_gbps=1.0), routing="conductor", fast=fast)
    assert res.requests["prefill_replica"].tolist() == [0, 1]
    assert res.requests["transfer_ms"].tolist() == pytest.approx([32.0, 32.0])
