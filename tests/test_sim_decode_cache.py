"""Decode instances that keep a prefix cache (``Disaggregated(decode_cache=True)``):
hand-computed handoffs that move only what the decode instance lacks, and
invariants against ``decode_cache=False``.

Cost model: ``LinearCostModel(kv_bytes_per_token=1e6)``, a step costs ``5 +
0.05 * prefill_tokens + 0.1 * decode_seqs`` ms; block size 16 tokens; the
handoff link moves 16 GB/s = 16e6 bytes/ms, i.e. one 16-token block a ms,
without latency.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
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
from test_sim_disagg import disagg_configs

from inferasim import Workload
from inferasim.sim import Disaggregated, LinearCostModel, Simulator

BS = 16
LIN = LinearCostModel(kv_bytes_per_token=1e6)
SETTINGS = hypothesis_settings(30, slow=True)


def split(prefill: int = 1, decode: int = 1, decode_cache: bool = True) -> Disaggregated:
    """``prefill`` + ``decode`` instances, 16 GB/s handoffs without latency."""
    return Disaggregated(
        prefill, decode, handoff_gbps=16.0, handoff_latency_us=0.0, decode_cache=decode_cache
    )


run = runner(kv_tokens=1000 * BS, cost_model=LIN)


@pytest.mark.parametrize("fast", [True, False])
def test_second_request_moves_only_its_unshared_tail(fast):
    # A at 0: 48 tokens (blocks 1, 2, 3), 3 out. Prefill 5 + 0.05 * 48 = 7.4; the
    # decode instance holds nothing: 48 MB at 16e6 B/ms = 3 ms, delivered at 10.4;
    # two decode steps of 5.1 -> 20.6. A's blocks 1, 2, 3 stay cached on the decode
    # instance (registered on delivery, evictable after its finish).
    # B at 100: 40 tokens (blocks 1, 2 and 8 tokens of block 9), 3 out. The prefill
    # instance reuses 2 blocks ((40 - 1) // 16): 5 + 0.05 * 8 = 5.4 -> first token
    # 105.4. The decode instance holds blocks 1, 2 (32 tokens): the handoff moves
    # the 8 other tokens, 8 MB = 0.5 ms -> delivered 105.9; decode 111.0, 116.1.
    # Without the decode cache it moves all 40 tokens: 2.5 ms -> 107.9, 113.0, 118.1.
    wl = Workload.from_requests(
        [0.0, 100.0], [48, 40], [3, 3], hash_ids=[[1, 2, 3], [1, 2, 9]], block_size=BS
    )
    req = run(wl, replicas=split(), fast=fast).requests
    assert req["transfer_ms"].tolist() == pytest.approx([3.0, 0.5])
    assert req["decode_hit_tokens"].tolist() == [0, 32]
    assert req["ttft_ms"].tolist() == pytest.approx([7.4, 5.4])
    assert req["finish_ms"].tolist() == pytest.approx([20.6, 116.1])
    base = run(wl, replicas=split(decode_cache=False), fast=fast).requests
    assert base["transfer_ms"].tolist() == pytest.approx([3.0, 2.5])
    assert base["finish_ms"].tolist() == pytest.approx([20.6, 118.1])
    assert "decode_hit_tokens" not in base.columns


@pytest.mark.parametrize("fast", [True, False])
def test_a_tie_goes_to_the_decode_instance_holding_the_prefix(fast):
    # A at 0: 48 tokens (blocks 1, 2, 3), 40 out: decode instance 1 (both empty: the
    # lowest index), delivered at 7.4 + 3 = 10.4, finishing at 10.4 + 39 * 5.1 =
    # 209.3 (each step 5.1: one sequence, no prefill). B at 20: 48 tokens (blocks
    # 7, 8, 9), 2 out: decode instance 2 (A holds blocks on 1), finishing at 20 +
    # 7.4 + 3 + 5.1 = 35.5. C at 300: 48 tokens (blocks 7, 8, 4), 2 out: both decode
    # instances hold no active block. Without the decode cache the tie goes to
    # instance 1 and C moves all 48 tokens (3 ms); with it, to instance 2, which
    # holds blocks 7, 8 (evictable since B's finish): C pins them, reserves only
    # ceil(49 / 16) - 2 = 2 pages and moves 16 tokens (1 ms).
    wl = Workload.from_requests(
        [0.0, 20.0, 300.0], [48, 48, 48], [40, 2, 2],
        hash_ids=[[1, 2, 3], [7, 8, 9], [7, 8, 4]], block_size=BS,
    )
    with_cache = run(wl, replicas=split(decode=2), fast=fast).requests
    without = run(wl, replicas=split(decode=2, decode_cache=False), fast=fast).requests
    assert without["decode_replica"].tolist() == [1, 2, 1]
    assert with_cache["decode_replica"].tolist() == [1, 2, 2]
    assert with_cache["decode_hit_tokens"].tolist() == [0, 0, 32]
    assert with_cache["transfer_ms"].tolist() == pytest.approx([3.0, 3.0, 1.0])
    assert without["transfer_ms"].tolist() == pytest.approx([3.0, 3.0, 3.0])
    assert with_cache["finish_ms"].tolist()[:2] == pytest.approx([209.3, 35.5])


@pytest.mark.parametrize("fast", [True, False])
def test_a_shared_prefix_pinned_by_a_running_sequence_is_held(fast):
    # A at 0: 48 tokens (blocks 1, 2, 3), 40 out, decoding on the one decode instance
    # from 10.4 to 209.3. B at 60: 48 tokens (blocks 1, 2, 4), 2 out, while A runs:
    # the decode instance holds blocks 1, 2 pinned by A; B pins them too and moves
    # 16 tokens (1 ms). Both finish: the shared blocks' references are counted.
    wl = Workload.from_requests(
        [0.0, 60.0], [48, 48], [40, 2], hash_ids=[[1, 2, 3], [1, 2, 4]], block_size=BS,
    )
    req = run(wl, replicas=split(), fast=fast).requests
    assert req["decode_hit_tokens"].tolist() == [0, 32]
    assert req["transfer_ms"].tolist() == pytest.approx([3.0, 1.0])
    assert (req["status"] == "finished").all()


def test_full_prompt_held_moves_no_bytes():
    # Twice the same 32-token prompt (blocks 1, 2), 2 out, the second after the first
    # finished: the decode instance holds both blocks, the handoff moves 0 bytes and
    # takes no time (no latency); the first moves 32 MB (2 ms).
    wl = Workload.from_requests(
        [0.0, 100.0], [32, 32], [2, 2], hash_ids=[[1, 2], [1, 2]], block_size=BS
    )
    req = run(wl, replicas=split()).requests
    assert req["decode_hit_tokens"].tolist() == [0, 32]
    assert req["transfer_ms"].tolist() == pytest.approx([2.0, 0.0])


def test_decode_cache_must_be_a_bool():
    wl = Workload.from_requests([0.0], [32], [2], block_size=BS)
    bad = Disaggregated(1, 1, decode_cache=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=(
        r"replicas\.decode_cache \(Disaggregated\(decode_cache=\.\.\.\)\) must be a bool, got 1"
    )):
        Simulator(replicas=bad, cost_model=LIN, kv_tokens=10 * BS).run(wl, progress=False)


def test_config_names_the_decode_cache_only_when_on():
    wl = Workload.from_requests([0.0], [32], [2], block_size=BS)
    assert run(wl, replicas=split()).config["decode_cache"] is True
    assert "decode_cache" not in run(wl, replicas=split(decode_cache=False)).config


def _with_cache(cfg: dict, on: bool = True) -> dict:
    """``cfg`` with its disaggregated fleet's ``decode_cache`` set to ``on``."""
    return {**cfg, "replicas": replace(cfg["replicas"], decode_cache=on)}


@SETTINGS
@given(wl=sim_workloads(), cfg=disagg_configs())
def test_decode_cache_finishes_everything_and_moves_no_more(wl, cfg):
    on = simulate(wl, **_with_cache(cfg))
    off = simulate(wl, **_with_cache(cfg, False))
    req, base = on.requests, off.requests
    # the same requests finish (rejections are decided before the run)
    assert req["status"].tolist() == base["status"].tolist()
    assert set(req["status"]) <= {"finished", "rejected"}
    assert (req["decode_replica"] >= 0).tolist() == (base["decode_replica"] >= 0).tolist()
    # what the decode instance held is a run of whole prompt blocks, none of it moved
    hit = req["decode_hit_tokens"].to_numpy()
    assert (hit % wl.block_size == 0).all() and (hit >= 0).all()
    assert (hit <= req["input_len"].to_numpy() // wl.block_size * wl.block_size).all()
    assert (hit[req["decode_replica"].to_numpy() < 0] == 0).all()
    assert moved_prompt_tokens(req).sum() <= moved_prompt_tokens(base).sum()
    assert (moved_prompt_tokens(req) == moved_prompt_tokens(base) - hit).all()
    # memory within capacity on every instance
    cap = on.config["kv_tokens"]
    tl = on.timeline
    assert (tl["kv_running_tokens"] + tl["kv_cached_tokens"] <= cap).all()
    assert (on.replicas["peak_kv_tokens"] <= cap).all()


@SETTINGS
@given(wl=sim_workloads(), cfg=disagg_configs())
def test_decode_cache_jump_equals_plain_loop(wl, cfg):
    cfg = _with_cache(cfg)
    assert_same(simulate(wl, **cfg, fast=True), simulate(wl, **cfg, fast=False))


def _unshared(wl: Workload) -> Workload:
    """``wl`` with every block id fresh (no request shares a block with another)."""
    fresh = iter(range(1, 10**6))
    ids = [[next(fresh) for _ in wl.block_ids(i)] for i in range(len(wl))]
    return Workload.from_requests(
        wl.arrival_ms, wl.input_len, wl.output_len, ids, block_size=wl.block_size
    )


@SETTINGS
@given(wl=sim_workloads(allow_no_ids=False), cfg=disagg_configs())
def test_without_shared_prefixes_the_requests_are_the_same(wl, cfg):
    # Nothing is held on a decode instance unless its own sequence was preempted
    # there and recomputes (it then hits its own delivered blocks, which the run
    # without the cache recomputes): with no decode-side preemption the request
    # frames agree bit for bit (the timeline differs: the decode instances' cached
    # pages are counted).
    wl = _unshared(wl)
    on = simulate(wl, **_with_cache(cfg)).requests
    off = simulate(wl, **_with_cache(cfg, False)).requests
    assert (on["decode_hit_tokens"] == 0).all()
    decode_preempted = (off["preemptions"] > 0) & (off["decode_replica"] >= 0)
    if not decode_preempted.any():
        pd.testing.assert_frame_equal(on.drop(columns="decode_hit_tokens"), off, check_exact=True)


BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_decode_cache.py"


def _bench():
    """benchmarks/bench_decode_cache.py as a module (its folder on sys.path while loading)."""
    spec = importlib.util.spec_from_file_location("bench_decode_cache", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH.parent))
    return mod


def test_readme_decode_cache_numbers(conversation_path):
    # The README's "Disaggregation" section quotes the benchmark's table on the
    # conversation trace: handoff GB, held share, mean TTFT and TPOT of both runs.
    (_, off_gb, _, off_ttft, off_tpot), (_, on_gb, on_share, on_ttft, on_tpot) = (
        _bench().handoff_table(Workload.from_mooncake(conversation_path))
    )
    assert on_gb < off_gb
    section = _disaggregation_section()
    quoted = (
        f"move {on_gb:,.0f} GB instead of {off_gb:,.0f} GB ({100 * on_share:.1f}% of the "
        f"handed-off prompt tokens were already on the decode instance), mean TTFT "
        f"{on_ttft:.1f} / {off_ttft:.1f} ms and TPOT {on_tpot:.2f} / {off_tpot:.2f} ms"
    )
    assert quoted in section


def _disaggregation_section() -> str:
    """The README's "Disaggregation" section, whitespace collapsed."""
    text = (BENCH.parents[1] / "README.md").read_text()
    return " ".join(text.split("### Disaggregation", 1)[1].split("\n### ", 1)[0].split())


def test_readme_decode_tier_numbers(conversation_path):
    # The README's "Disaggregation" section quotes the benchmark's second table:
    # handoff GB and held share with and without tiers on the decode instances.
    bench = _bench()
    sys.path.insert(0, str(BENCH.parent))
    try:
        from bench_simulator import tiers
    finally:
        sys.path.remove(str(BENCH.parent))
    (_, off_gb, off_share, *_), (_, on_gb, on_share, *_) = bench.decode_tier_table(
        Workload.from_mooncake(conversation_path), tiers()
    )
    assert on_gb < off_gb and on_share > off_share
    section = _disaggregation_section()
    quoted = (
        f"the handoffs then move {on_gb:,.0f} GB instead of {off_gb:,.0f} GB "
        f"({100 * on_share:.1f}% of the handed-off prompt tokens held instead of "
        f"{100 * off_share:.1f}%)"
    )
    assert quoted in section
