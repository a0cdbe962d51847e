"""Tests of ``inferasim simulate`` and of the cache and cost-model plumbing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from inferasim import Workload
from inferasim.cli import main
from inferasim.sim import EngineConfig, LinearCostModel, RooflineCostModel, Simulator
from inferasim.sim.cache import BlockCache

MOONCAKE = "".join(
    json.dumps({"timestamp": t, "input_length": 1100, "output_length": 20, "hash_ids": ids}) + "\n"
    for t, ids in [(0, [1, 2, 3]), (5000, [1, 2, 4]), (10000, [1, 2, 5])]
)


def rows(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def test_simulate_trace_file_and_out_csv(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text(MOONCAKE)
    out = tmp_path / "req.csv"
    assert (
        main(["simulate", str(trace), "--replicas", "1", "--no-progress", "--out", str(out)]) == 0
    )
    text = capsys.readouterr().out
    r = rows(text)
    assert r["requests"] == "3" and r["finished"] == "3"
    # requests 2 and 3 reuse blocks 1 and 2 of request 1 (3 x 1100 tokens in all)
    assert float(r["token_hit_ratio"]) == pytest.approx(2 * 1024 / 3300, abs=1e-4)
    frame = pd.read_csv(out)
    assert frame["cached_tokens"].tolist() == [0, 1024, 1024]
    # the index (request_id) is written as the first column, once
    assert list(frame.columns[:4]) == ["request_id", "replica", "arrival_ms", "scheduled_ms"]
    assert frame["request_id"].tolist() == [0, 1, 2] and list(frame.columns).count("request_id") == 1


def test_simulate_parquet_and_bad_out(tmp_path, capsys):
    out = tmp_path / "req.parquet"
    assert main(["simulate", "--num-requests", "30", "--no-progress", "--out", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 30
    assert main(["simulate", "--num-requests", "5", "--out", str(tmp_path / "x.txt")]) == 2
    assert "--out must end in .csv or .parquet" in capsys.readouterr().err


def test_simulate_default_runs_the_embedded_workload(capsys):
    assert main(["simulate", "--num-requests", "40", "--replicas", "2", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "40 requests on 2 replicas (kv_cost routing" in text
    assert "per replica:" in text


def test_simulate_conversation_trace(conversation_path, capsys):
    assert main(["simulate", str(conversation_path), "--replicas", "8", "--no-progress"]) == 0
    r = rows(capsys.readouterr().out)
    assert r["requests"] == "12,031" and r["finished"] == "12,031"


def test_default_cost_model_is_the_roofline_llama_8b_on_h100():
    # KV memory is allocated in vLLM's 16-token blocks (pages) of the 512-token trace blocks
    wl = Workload.from_requests([0], [1024], [4], [[1, 2]])
    res = Simulator().run(wl, progress=False)
    expected = RooflineCostModel("llama-3.1-8b", "h100-80gb").kv_capacity_blocks(16)
    assert res.config["kv_tokens"] == expected * 16 and res.config["page_tokens"] == 16
    assert res.replicas["kv_capacity_tokens"].tolist() == [expected * 16]


def test_jump_equals_plain_loop_with_the_roofline_model():
    wl = Workload.from_synthetic(
        300,
        rate=30.0,
        input_len=600,
        output_len=200,
        range_ratio=0.9,
        num_prefixes=4,
        prefix_len=512,
        seed=3,
    )
    kw = dict(replicas=3, routing="kv_cost", kv_tokens=40 * 512)
    fast = Simulator(**kw).run(wl, progress=False, timeline_ms=50.0)
    plain = Simulator(**kw, fast=False).run(wl, progress=False, timeline_ms=50.0)
    pd.testing.assert_frame_equal(fast.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.timeline, plain.timeline, check_exact=True)
    pd.testing.assert_frame_equal(fast.replicas, plain.replicas, check_exact=True)


def test_bad_configuration_is_a_clear_error():
    wl = Workload.from_requests([0], [32], [2], block_size=16)
    lin = LinearCostModel()
    with pytest.raises(ValueError, match="replicas must be a positive integer"):
        Simulator(replicas=0, kv_tokens=10 * 16, cost_model=lin).run(wl)
    with pytest.raises(ValueError, match="max_batched_tokens .* must be >= engine.max_num_seqs"):
        Simulator(kv_tokens=10 * 16, cost_model=lin,
                  engine=EngineConfig(max_num_seqs=64, max_batched_tokens=16)).run(wl)
    with pytest.raises(ValueError, match="eviction must be one of"):
        Simulator(kv_tokens=10 * 16, cost_model=lin, eviction="random").run(wl)
    with pytest.raises(ValueError, match="give kv_tokens"):
        Simulator(cost_model=lin).run(wl)
    with pytest.raises(ValueError, match="holds no whole KV block of 16 tokens"):
        Simulator(kv_tokens=15, cost_model=lin).run(wl)
    with pytest.raises(TypeError, match="step_time_ms"):
        Simulator(kv_tokens=10 * 16, cost_model=object()).run(wl)
    with pytest.raises(TypeError, match="needs a Workload"):
        Simulator(kv_tokens=10 * 16, cost_model=lin).run([1, 2])


def test_empty_workload():
    wl = Workload.from_requests([], [], [], block_size=16)
    res = Simulator(kv_tokens=10 * 16, cost_model=LinearCostModel()).run(wl, progress=False)
    assert len(res.requests) == 0 and res.summary()["requests"] == 0


def test_cache_policies_order_by_hand():
    # Blocks 1, 2, 3 are cached and released in that order, then block 1 is hit once
    # and released again. LRU evicts 2 (1 is recent again); FIFO evicts 1 (cached
    # first); LFU evicts 2 (1 has a hit; 2 and 3 tie on zero hits, 2 is older).
    for policy, expected in (("lru", 2), ("fifo", 1), ("lfu", 2)):
        c = BlockCache(policy)
        for h in (1, 2, 3):
            c.register(h)
            c.release([h])
        c.acquire([1])
        c.release([1])
        c.evict(1)
        assert {1, 2, 3} - set(c.ref) == {expected}, policy
        assert (c.evictions, c.size, c.pinned, c.evictable) == (1, 2, 0, 2)
    with pytest.raises(RuntimeError, match="cannot evict"):
        BlockCache().evict(1)
    with pytest.raises(ValueError, match="eviction must be one of"):
        BlockCache("mru")


def test_progress_bar_option_runs(capsys):
    wl = Workload.from_requests(np.arange(10.0), [32] * 10, [2] * 10, block_size=16)
    res = Simulator(kv_tokens=10 * 16, cost_model=LinearCostModel()).run(wl, progress=True)
    assert len(res.requests) == 10


def test_simulate_kv_tokens_and_overlap_weight_options(tmp_path, capsys):
    # --kv-tokens is the HBM KV capacity per replica in tokens (whole 16-token KV
    # blocks, vLLM's pages, count). Each request of MOONCAKE needs
    # ceil((1100 + 20 - 1) / 16) = 70 blocks = 1,120 tokens: 1,119 tokens (69 whole
    # blocks) reject all three, 1,120 serve them; less than a block is an error.
    trace = tmp_path / "t.jsonl"
    trace.write_text(MOONCAKE)
    argv = ["simulate", str(trace), "--replicas", "1", "--no-progress"]
    assert main([*argv, "--kv-tokens", "1119"]) == 0
    r = rows(capsys.readouterr().out)
    assert (r["finished"], r["rejected"]) == ("0", "3")
    assert main([*argv, "--kv-tokens", "1120"]) == 0
    assert rows(capsys.readouterr().out)["finished"] == "3"
    assert main([*argv, "--kv-tokens", "15"]) == 1
    assert "kv_tokens (15) holds no whole KV block of 16 tokens" in capsys.readouterr().err
    # --overlap-weight weighs kv_cost's cost; with another policy it is an error
    assert main([*argv, "--overlap-weight", "4"]) == 0
    capsys.readouterr()
    assert main([*argv, "--routing", "round_robin", "--overlap-weight", "4"]) == 1
    assert "--overlap-weight weighs the cache overlap of --routing kv_cost" in (
        capsys.readouterr().err
    )
