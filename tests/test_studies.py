"""The studies: hand-checked small cases, invariants, cross-checks against reuse and the simulator."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from inferasim import Workload, reuse, studies
from inferasim.studies import settings


@pytest.fixture(scope="module")
def pool() -> dict[str, Workload]:
    """Two small synthetic workloads standing in for the traces."""
    common = {"output_len": 16, "range_ratio": 0.5, "seed": 1}
    return {
        "conversation": Workload.from_synthetic(
            300, 4.0, input_len=1500, num_prefixes=12, prefix_len=2048, **common
        ),
        "synthetic": Workload.from_synthetic(
            200, 4.0, input_len=3000, num_prefixes=40, prefix_len=1024, prefix_zipf=0.5, **common
        ),
    }


# ----------------------------------------------------------------- settings
def test_capacity_grid_by_hand():
    # 1e4..1e6 tokens, 1 point per decade: 10000/512 = 19.5 -> 20,
    # 1e5/512 = 195.3 -> 195, 1e6/512 = 1953.1 -> 1953 blocks.
    assert studies.capacity_grid(1e4, 1e6, per_decade=1).tolist() == [20, 195, 1953]
    # Tiny capacities never round to 0 blocks and duplicates merge.
    assert studies.capacity_grid(1, 10, per_decade=4).tolist() == [1]


# -------------------------------------------------------------- trace structure
def test_overview_by_hand():
    # r0 [1,2], r1 [1,3], r2 [1,2], 1024 tokens each, arrivals 0, 30, 60 s:
    # hits are r1's block 1 and r2's blocks 1, 2 -> 3 of 6 blocks, 1536 of 3072
    # tokens; 3 requests over 60 s -> 0.05 requests/s.
    wl = Workload.from_requests([0, 30_000, 60_000], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    row = studies.overview({"t": wl}).iloc[0]
    assert row["trace"] == "t"
    assert (row["requests"], row["prompt_tokens"], row["unique_tokens"]) == (3, 3072, 1536)
    assert row["ceiling_block_hit_ratio"] == row["ceiling_token_hit_ratio"] == 0.5
    assert row["duration_min"] == 1.0 and row["rate_rps"] == pytest.approx(0.05)


def test_cached_prefix_tokens_by_hand():
    # r0 [1,2] (1024 tokens) cold; r1 [1,3] of 1000 tokens reuses block 1 (512);
    # r2 [4,2]: block 2 was seen but its predecessor 4 was not -> 0 (prefix rule);
    # r3 [1,2,5] of 1100 tokens: leading run 1,2 -> 1024.
    wl = Workload.from_requests(
        [0, 1, 2, 3], [1024, 1000, 1024, 1100], [1] * 4, [[1, 2], [1, 3], [4, 2], [1, 2, 5]]
    )
    assert studies.cached_prefix_tokens(wl).tolist() == [0, 512, 0, 1024]
    req = studies.requests(wl)
    assert req["reusable_tokens"].tolist() == [0, 512, 0, 1024]
    assert req["reusable_share"].tolist() == pytest.approx([0, 0.512, 0, 1024 / 1100])


def test_requests_reuse_agrees_with_the_infinite_ceiling(pool):
    req = studies.requests(pool)
    assert list(dict.fromkeys(req["trace"])) == ["conversation", "synthetic"]
    for name, wl in pool.items():
        part = req[req["trace"] == name]
        assert len(part) == len(wl)
        ceiling = reuse.infinite_hit_ratio(wl).token_hit_ratio
        assert part["reusable_tokens"].sum() / wl.input_len.sum() == pytest.approx(ceiling)


def test_requests_without_hash_ids_keep_lengths_and_leave_reuse_empty():
    wl = Workload.from_requests([0, 5], [100, 300], [5, 7])
    req = studies.requests(wl)
    assert req["input_len"].tolist() == [100, 300]
    assert req["reusable_tokens"].isna().all() and req["gap_ms"].isna().all()


def test_reuse_distances_by_hand():
    # blocks 1, 2, 1, 2 in four one-block requests: the third and fourth find
    # their block under one other -> stack distance 2 blocks = 1024 tokens.
    wl = Workload.from_requests([0, 1, 2, 3], [512] * 4, [1] * 4, [[1], [2], [1], [2]])
    d = studies.reuse_distances(wl)
    assert d["stack_distance_tokens"].tolist() == [np.inf, np.inf, 1024.0, 1024.0]
    assert d["time_since_ms"].tolist()[2:] == [2.0, 2.0]
    # one row per block reference, in the order of the flat hash ids
    assert len(d) == wl.hash_ids.size


def test_block_popularity_counts_requests_per_block(pool):
    pop = studies.block_popularity(pool)
    for name, wl in pool.items():
        part = pop[pop["trace"] == name]
        _, counts = np.unique(wl.hash_ids, return_counts=True)
        assert sorted(part["requests"], reverse=True) == sorted(counts.tolist(), reverse=True)
        assert part["rank"].tolist() == list(range(1, len(part) + 1))


def test_structure_stats_by_hand():
    # r1 continues r0 two seconds later (one chain of two turns); r2 stands alone
    # and starts with another block: 2 distinct first blocks; r1 reuses 1024
    # tokens (two blocks), more than one block.
    wl = Workload.from_requests(
        [0, 2000, 5000], [1024, 2048, 512], [1] * 3, [[1, 2], [1, 2, 3, 4], [9]]
    )
    s = studies.structure_stats(wl).set_index("statistic")["value"]
    assert s["multi-turn sessions"] == 1
    assert s["requests in multi-turn sessions"] == pytest.approx(2 / 3)
    assert s["median gap between turns (s)"] == 2.0
    assert s["distinct first blocks"] == 2
    assert s["requests reusing more than one block"] == pytest.approx(1 / 3)


# ------------------------------------------------------------------ capacity
def test_policy_curve_beyond_the_working_set_is_the_ceiling(pool):
    wl = pool["conversation"]
    working_set = np.unique(wl.hash_ids).size
    caps = [working_set // 4, working_set, 10 * working_set]
    curve = studies.policy_curve(wl, caps, "lru")
    ceiling = reuse.infinite_hit_ratio(wl).token_hit_ratio
    assert curve["token_hit_ratio"].iloc[1:].tolist() == pytest.approx([ceiling, ceiling])
    assert curve["capacity_tokens"].tolist() == [c * 512 for c in caps]
    direct = reuse.replay_cache(wl, working_set // 4, policy="lru")
    assert curve["token_hit_ratio"].iloc[0] == pytest.approx(
        direct["hit_tokens"].sum() / wl.input_len.sum()
    )


@pytest.mark.parametrize("policy", ["opt", "lfu", "fifo"])
def test_policy_curve_shortcut_equals_replaying_every_capacity(pool, policy):
    # Stopping the optimum's replay at the ceiling must not change a number.
    wl = pool["synthetic"]
    caps = studies.capacity_grid(512, 5e6, per_decade=3)
    fast = studies.policy_curve(wl, caps, policy)
    slow = studies.policy_curve(wl, caps, policy, stop_at_ceiling=False)
    pd.testing.assert_frame_equal(fast, slow)


def test_hit_rates_are_monotone_and_bounded_by_the_ceiling(pool):
    hr = studies.hit_rate_vs_capacity(pool)
    ceilings = studies.overview(pool).set_index("trace")["ceiling_token_hit_ratio"]
    assert set(hr["policy"]) == set(settings.POLICIES)
    for (trace, policy), curve in hr.groupby(["trace", "policy"]):
        ratios = curve["token_hit_ratio"].to_numpy()
        assert ratios.max() <= ceilings[trace] + 1e-12, (trace, policy)
        if policy in ("lru", "opt"):  # stack policies: no Belady anomaly
            assert np.all(np.diff(ratios) >= -1e-12), (trace, policy)
        assert curve["capacity_tokens"].min() <= settings.CAPACITY_RANGE[0] * 1.05
        assert curve["capacity_tokens"].max() >= settings.CAPACITY_RANGE[1] * 0.95
        # the 3M-token point is on every curve, exactly
        assert (curve["capacity_blocks"] == settings.NODE_CACHE_TOKENS // 512).sum() == 1
    # at_capacity reads the 3M point; LRU there equals a direct replay
    at = studies.at_capacity(hr, settings.NODE_CACHE_TOKENS, studies.overview(pool))
    assert len(at) == 2 * len(settings.POLICIES)
    np.testing.assert_allclose(
        at["share_of_ceiling"], at["token_hit_ratio"] / at["ceiling_token_hit_ratio"]
    )
    wl = pool["synthetic"]
    row = at[(at["trace"] == "synthetic") & (at["policy"] == "fifo")].iloc[0]
    direct = reuse.replay_cache(wl, settings.NODE_CACHE_TOKENS // 512, policy="fifo")
    assert row["token_hit_ratio"] == pytest.approx(direct["hit_tokens"].sum() / wl.input_len.sum())


def test_at_capacity_takes_the_largest_capacity_not_above():
    c = pd.DataFrame(
        {
            "trace": "t",
            "policy": "lru",
            "capacity_blocks": [1, 2, 4],
            "capacity_tokens": [512, 1024, 2048],
            "block_hit_ratio": [0.1, 0.2, 0.3],
            "token_hit_ratio": [0.1, 0.2, 0.3],
        }
    )
    assert studies.at_capacity(c, 2047)["capacity_tokens"].tolist() == [1024]
    assert studies.at_capacity(c, 2048)["capacity_tokens"].tolist() == [2048]


# ------------------------------------------------------------ local vs pooled
def test_local_vs_pooled_by_hand():
    # Four requests of one block [1]; two nodes of one block, round-robin:
    # node 0 sees r0, r2 -> r2 hits; node 1 sees r1, r3 -> r3 hits: 2 of 4.
    # The pooled cache hits r1, r2, r3: 3 of 4, the ceiling.
    wl = Workload.from_requests([0, 1, 2, 3], [512] * 4, [1] * 4, [[1], [1], [1], [1]])
    t = studies.local_vs_pooled({"t": wl}, 2, 512, ["round_robin"])
    assert t["cache"].tolist() == ["local", "pooled"]
    assert t["token_hit_ratio"].tolist() == [0.5, 0.75]
    assert t["ceiling_token_hit_ratio"].tolist() == [0.75, 0.75]
    assert t["capacity_tokens"].tolist() == [512, 1024]


def test_local_vs_pooled_is_bounded_by_the_ceiling(pool):
    t = studies.local_vs_pooled(pool, replicas=4, capacity_tokens=20_000)
    assert (t["token_hit_ratio"] <= t["ceiling_token_hit_ratio"] + 1e-12).all()
    assert t.groupby("trace")["cache"].apply(list).tolist() == [["local"] * 3 + ["pooled"]] * 2


# ------------------------------------------------------------------- routing
@pytest.fixture(scope="module")
def routed(pool) -> pd.DataFrame:
    return studies.compare_routing(
        pool, ["round_robin", "least_loaded", "longest_match"], replicas=3, capacity_tokens=40_000
    )


def test_routing_summary_matches_the_simulator_summary(pool, routed):
    # An independent reduction: SimResult.summary() of the same seeded run.
    summary = studies.routing_summary(routed)
    assert len(summary) == 2 * 3
    for row in summary.itertuples():
        res = studies.run_routing(
            pool[row.trace], row.routing, replicas=3, capacity_tokens=40_000
        ).summary()
        assert row.ttft_p99_ms == pytest.approx(res["ttft_ms_p99"])
        assert row.ttft_p50_ms == pytest.approx(res["ttft_ms_p50"])
        assert row.token_hit_ratio == pytest.approx(res["token_hit_ratio"])
        assert row.busiest_share == pytest.approx(res["max_replica_share"])
        assert 1 / 3 - 1e-12 <= row.busiest_share <= 1


def test_replica_load_counts_every_replica(routed):
    load = studies.replica_load(routed)
    per_run = load.groupby(["trace", "routing"])
    assert (per_run.size() == 3).all()  # idle replicas included
    totals = per_run["requests"].sum()
    expected = routed[routed["replica"] >= 0].groupby(["trace", "routing"]).size()
    pd.testing.assert_series_equal(totals, expected, check_names=False)


def test_routing_summary_by_hand():
    # Replica 0 gets three requests, replica 1 one: the busiest holds 3/4.
    # Finished TTFTs 1, 2, 3 ms (the rejected one has none): p50 = 2 ms.
    req = pd.DataFrame(
        {
            "trace": "t",
            "routing": "r",
            "replica": [0, 0, 0, 1, -1],
            "status": ["finished"] * 3 + ["finished", "rejected"],
            "input_len": [100, 100, 100, 100, 50],
            "cached_tokens": [0, 50, 50, 0, 0],
            "ttft_ms": [1.0, 2.0, 3.0, np.nan, np.nan],
            "tpot_ms": 1.0,
        }
    )
    row = studies.routing_summary(req).iloc[0]
    assert (row["requests"], row["rejected"]) == (5, 1)
    assert row["ttft_p50_ms"] == 2.0
    assert row["token_hit_ratio"] == 0.25  # 100 of 400 routed prompt tokens
    assert row["busiest_share"] == 0.75


def test_studies_give_the_same_frames_on_a_process_pool(pool):
    with ProcessPoolExecutor(max_workers=2) as ex:
        par = studies.compare_routing(pool, ["round_robin", "kv_cost"], replicas=2, executor=ex)
        hr = studies.hit_rate_vs_capacity(pool, ["lru", "opt", "fifo", "lfu"], per_decade=2, executor=ex)
    ser = studies.compare_routing(pool, ["round_robin", "kv_cost"], replicas=2)
    pd.testing.assert_frame_equal(par, ser)
    serial = studies.hit_rate_vs_capacity(pool, ["lru", "opt", "fifo", "lfu"], per_decade=2)
    pd.testing.assert_frame_equal(hr, serial)  # fifo/lfu: one task a capacity, same rows


# ------------------------------------------------------------------ teaching
def test_teaching_experiment_varies_only_its_knob():
    table = studies.teaching("prefix_len", [512, 2048, 4096], quick=True)
    assert table["value"].tolist() == [512, 2048, 4096]
    assert set(table["knob"]) == {"prefix_len"}
    # Longer shared prefixes leave a larger share of each prompt reusable.
    assert np.all(np.diff(table["infinite_token_hit_ratio"]) > 0)
    assert (table["token_hit_ratio"] <= table["infinite_token_hit_ratio"] + 1e-12).all()


def test_teaching_run_uses_the_base_workload():
    # Same knob value as the base setting: the workload is the base workload.
    run = studies.teaching_run("prefix_zipf", 1.0, num_requests=60)
    base = studies.teaching_workload(60)
    assert run["infinite_token_hit_ratio"] == reuse.infinite_hit_ratio(base).token_hit_ratio
    with pytest.raises(ValueError, match="unknown knob"):
        studies.teaching_run("colour", 1.0)


# ------------------------------------------------------------ real traces
def test_real_trace_overview(conversation_path, synthetic_trace_path):
    wls = studies.load_traces(conversation_path.parent, names=["conversation", "synthetic"])
    ov = studies.overview(wls).set_index("trace")
    assert ov.loc["conversation", "requests"] == 12_031
    assert ov.loc["synthetic", "requests"] == 3_993
    for name, wl in wls.items():
        assert ov.loc[name, "ceiling_token_hit_ratio"] == pytest.approx(
            reuse.infinite_hit_ratio(wl).token_hit_ratio
        )


def _write_trace(path: Path, n: int) -> None:
    lines = [
        f'{{"timestamp": {i * 1000}, "input_length": 1024, "output_length": 4, "hash_ids": [1, {i + 2}]}}'
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")


def test_load_traces_takes_toolagent_only_when_present(tmp_path):
    _write_trace(tmp_path / "conversation_trace.jsonl", 3)
    _write_trace(tmp_path / "synthetic_trace.jsonl", 2)
    assert {k: len(v) for k, v in studies.load_traces(tmp_path).items()} == {
        "conversation": 3,
        "synthetic": 2,
    }
    _write_trace(tmp_path / "toolagent_trace.jsonl", 4)
    assert list(studies.load_traces(tmp_path)) == ["conversation", "synthetic", "toolagent"]
    (tmp_path / "synthetic_trace.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="synthetic"):
        studies.load_traces(tmp_path)


def test_ci_mode_reads_the_environment(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert studies.ci_mode()
    monkeypatch.setenv("CI", "0")
    assert not studies.ci_mode()
    monkeypatch.delenv("CI")
    assert not studies.ci_mode() and "CI" not in os.environ
