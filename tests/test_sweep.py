"""inferasim.sweep in process, on a process pool and a thread pool; grid, load, store, errors.

The Dask executor has its own module (tests/test_sweep_dask.py) with a real
LocalCluster.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import inferasim as ism
from inferasim import sweep as sweep_module
from inferasim.sweep import fingerprint, read_store, seed_of

pytest.importorskip("pyarrow")


def small_workload(n: int = 240, seed: int = 3) -> ism.Workload:
    return ism.Workload.from_synthetic(
        n, rate=30.0, input_len=512, output_len=24, range_ratio=0.5,
        num_prefixes=6, prefix_len=512, prefix_zipf=1.0, seed=seed,
    )


COST = ism.LinearCostModel(kv_tokens=48 * 512)
GRID = {
    "replicas": [1, 2, 3],
    "routing": ["random", "cache_aware"],
    "cost_model": [COST],
}
LOAD = [1.0, 0.5]  # scale_time factors: load 1x and 2x


def frames_equal(a: pd.DataFrame, b: pd.DataFrame) -> None:
    a, b = a.copy(), b.copy()
    a.attrs, b.attrs = {}, {}
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.fixture(scope="module")
def wl() -> ism.Workload:
    return small_workload()


@pytest.fixture(scope="module")
def serial(wl) -> pd.DataFrame:
    return ism.sweep(wl, GRID, load=LOAD, progress=False)


def test_rows_in_grid_order_with_configuration_columns(serial):
    # dict of lists: Cartesian product, last key fastest, then the loads
    got = serial[["replicas", "routing", "load", "scale_time"]].to_records(index=False).tolist()
    want = [
        (r, routing, 1.0 / s, s)
        for r in (1, 2, 3)
        for routing in ("random", "cache_aware")
        for s in LOAD
    ]
    assert got == want
    assert serial["cost_model"].unique().tolist() == [repr(COST)]
    assert serial["error"].isna().all()
    assert serial.attrs == {"runs": 12, "stored": 0, "quarantined": []}
    # the summary metrics and the extras are there
    for col in ("ttft_ms_p99", "tpot_ms_p50", "e2e_ms_p90", "token_hit_ratio",
                "throughput_rps", "gpus", "input_tok_s"):
        assert col in serial.columns
    # goodput needs an SLO: without one the summary (and so the sweep) has NaN
    assert serial["goodput_rps"].isna().all() and serial["slo_attainment"].isna().all()
    assert serial["gpus"].tolist() == serial["replicas"].tolist()


def test_each_row_equals_a_direct_simulation(wl, serial):
    # Independent path: build the Simulator by hand with the row's seed and
    # compare its summary with the row.
    for row in serial.iloc[[0, 3, 7, 10]].itertuples():
        sim = ism.Simulator(replicas=row.replicas, routing=row.routing, cost_model=COST,
                            seed=row.seed)
        s = sim.run(wl.scale_time(row.scale_time), progress=False).summary()
        got = serial.loc[row.Index, list(s.index)]
        for k in s.index:
            if isinstance(s[k], float) and math.isnan(s[k]):
                assert math.isnan(got[k]), k
            else:
                assert got[k] == s[k], k
        fin = sim.run(wl.scale_time(row.scale_time), progress=False).requests.query(
            "status == 'finished'")
        assert serial.loc[row.Index, "input_tok_s"] == pytest.approx(
            fin["input_len"].sum() / (s["duration_ms"] / 1000)
        )


def test_seed_comes_from_the_configuration_not_its_place(wl, serial):
    # the same configurations listed in reverse order: same seeds, same values
    configs = [
        {"replicas": r, "routing": routing, "cost_model": COST}
        for r in (3, 2, 1)
        for routing in ("cache_aware", "random")
    ]
    rev = ism.sweep(wl, configs, load=LOAD, progress=False)
    key_cols = ["replicas", "routing", "load"]
    a = serial.set_index(key_cols).sort_index()
    b = rev.set_index(key_cols).sort_index()
    frames_equal(a, b)
    assert serial["seed"].tolist()[0] == seed_of(configs[-1])
    # loads of one configuration share a seed; different configurations differ
    assert serial.groupby(["replicas", "routing"])["seed"].nunique().eq(1).all()
    assert serial["seed"].nunique() == 6


def test_seed_changes_random_routing_results(wl):
    # the seed matters (else the test above could not fail): random routing
    # with two explicit seeds gives two different outcomes
    df = ism.sweep(wl, {"routing": ["random"], "replicas": [3], "cost_model": [COST],
                        "seed": [1, 2]}, progress=False)
    assert df["seed"].tolist() == [1, 2]
    assert df["ttft_ms_p99"].iloc[0] != df["ttft_ms_p99"].iloc[1]


def test_failing_configuration_gives_an_error_row_and_the_sweep_goes_on(wl):
    grid = [
        {"replicas": 1, "cost_model": COST},
        {"replicas": 1, "cost_model": COST, "eviction": "belady"},
        {"replicas": 2, "cost_model": COST},
    ]
    df = ism.sweep(wl, grid, progress=False)
    assert df["error"].isna().tolist() == [True, False, True]
    assert df["error"].iloc[1].startswith("ValueError: eviction must be one of")
    assert np.isnan(df["ttft_ms_p99"].iloc[1])
    assert df["finished"].iloc[[0, 2]].tolist() == [len(wl), len(wl)]


def test_load_forms_agree(wl):
    grid = {"replicas": [2], "cost_model": [COST]}
    by_scale = ism.sweep(wl, grid, load=[0.5, 0.25], progress=False)
    by_load = ism.sweep(wl, grid, load={"load": [2, 4]}, progress=False)
    frames_equal(by_scale, by_load)
    offered = len(wl) * 1000 / (wl.arrival_ms[-1] - wl.arrival_ms[0])
    by_rate = ism.sweep(wl, grid, load={"rate": [offered * 2]}, progress=False)
    assert by_rate["load"].iloc[0] == pytest.approx(2.0)
    assert by_rate["offered_rps"].iloc[0] == pytest.approx(offered * 2)
    assert by_rate["ttft_ms_p99"].iloc[0] == pytest.approx(by_scale["ttft_ms_p99"].iloc[0])


def test_several_workloads_give_a_workload_column(wl):
    other = small_workload(120, seed=9)
    df = ism.sweep({"a": wl, "b": other}, {"replicas": [1, 2], "cost_model": [COST]},
                   progress=False)
    assert df["workload"].tolist() == ["a", "a", "b", "b"]
    assert df["requests"].tolist() == [len(wl)] * 2 + [len(other)] * 2


def test_metrics_list_and_callable(wl):
    df = ism.sweep(wl, {"replicas": [1], "cost_model": [COST]}, metrics=["ttft_ms_p50", "gpus"],
                   progress=False)
    assert list(df.columns[-4:]) == ["ttft_ms_p50", "gpus", "error", "key"]
    df = ism.sweep(wl, {"replicas": [1], "cost_model": [COST]}, metrics=_mean_cached,
                   progress=False)
    assert df["mean_cached"].iloc[0] > 0
    bad = ism.sweep(wl, {"replicas": [1], "cost_model": [COST]}, metrics=["nope"],
                    progress=False)
    assert "metrics ['nope'] are not in the summary" in bad["error"].iloc[0]


def _mean_cached(res) -> dict:
    return {"mean_cached": float(res.requests["cached_tokens"].mean())}


def test_slo_feeds_goodput(wl):
    df = ism.sweep(wl, {"replicas": [1], "cost_model": [COST]}, slo_ttft_ms=1e-9,
                   progress=False)
    assert df["goodput_rps"].iloc[0] == 0.0 and df["slo_attainment"].iloc[0] == 0.0


def test_processes_executor_equals_in_process(wl, serial):
    frames_equal(ism.sweep(wl, GRID, load=LOAD, executor="processes", progress=False), serial)


def test_thread_pool_executor_equals_in_process(wl, serial):
    with ThreadPoolExecutor(3) as pool:
        frames_equal(ism.sweep(wl, GRID, load=LOAD, executor=pool, progress=False), serial)


def test_store_resume_runs_only_missing_configurations(wl, serial, tmp_path: Path):
    store = tmp_path / "runs.parquet"
    first = ism.sweep(wl, GRID, load=LOAD, progress=False, store=store)
    frames_equal(first, serial)
    parts = sorted(store.glob("part-*.parquet"))
    assert len(parts) == 12
    again = ism.sweep(wl, GRID, load=LOAD, progress=False, store=store)
    assert again.attrs == {"runs": 0, "stored": 12, "quarantined": []}
    frames_equal(again, serial)
    # lose four runs: only those four run again, and the frame is the same
    for p in parts[::3]:
        p.unlink()
    resumed = ism.sweep(wl, GRID, load=LOAD, progress=False, store=store)
    assert resumed.attrs == {"runs": 4, "stored": 8, "quarantined": []}
    frames_equal(resumed, serial)
    assert len(read_store(store)) == 12


def test_interrupted_sweep_resumes(wl, tmp_path: Path, monkeypatch):
    # Ctrl-C arrives during the 5th run (the run itself is not part of any key)
    store = tmp_path / "runs.parquet"
    real = sweep_module._run_task
    calls = []

    def interrupted_at_fifth(workload, task):
        calls.append(task.index)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(workload, task)

    monkeypatch.setattr(sweep_module, "_run_task", interrupted_at_fifth)
    with pytest.raises(KeyboardInterrupt):
        ism.sweep(wl, GRID, load=LOAD, progress=False, store=store)
    assert len(list(store.glob("part-*.parquet"))) == 4  # runs 1-4 finished and were kept
    assert not list(store.glob(".part-*"))  # no half-written file
    monkeypatch.setattr(sweep_module, "_run_task", real)
    df = ism.sweep(wl, GRID, load=LOAD, progress=False, store=store)
    assert df.attrs == {"runs": 8, "stored": 4, "quarantined": []}
    assert df["ttft_ms_p99"].notna().all()


def test_store_key_depends_on_workload_content(wl, tmp_path: Path):
    store = tmp_path / "runs.parquet"
    grid = {"replicas": [1], "cost_model": [COST]}
    ism.sweep(wl, grid, progress=False, store=store)
    other = ism.sweep(wl.scale_time(0.9), grid, progress=False, store=store)
    assert other.attrs["runs"] == 1
    same = ism.sweep(wl.scale_time(1.0), grid, progress=False, store=store)
    assert same.attrs["runs"] == 0


def test_failed_runs_are_not_stored_and_retry(wl, tmp_path: Path):
    store = tmp_path / "runs.parquet"
    grid = {"replicas": [1, 0], "cost_model": [COST]}
    df = ism.sweep(wl, grid, progress=False, store=store)
    assert df["error"].notna().tolist() == [False, True]
    again = ism.sweep(wl, grid, progress=False, store=store)
    assert again.attrs == {"runs": 1, "stored": 1, "quarantined": []}


def test_fingerprint_covers_the_simulated_arrays(wl):
    fp = fingerprint(wl)
    assert len(fp) == 64 and fp == fingerprint(small_workload())
    assert fp != fingerprint(small_workload(seed=4))
    assert fp != fingerprint(wl.head(len(wl) - 1))
    # the source label is not part of it
    relabelled = ism.Workload(wl.frame, wl.hash_ids, wl.offsets, block_size=wl.block_size,
                              source="elsewhere")
    assert fingerprint(relabelled) == fp


def test_module_is_callable_and_importable():
    assert callable(ism.sweep) and ism.sweep is sweep_module
    assert sweep_module.sweep.__module__ == "inferasim.sweep"


class _NoRepr:
    pass


@pytest.mark.parametrize(
    "grid, kwargs, error, message",
    [
        ({"replicaz": [1]}, {}, ValueError, "unknown Simulator parameter"),
        ({"replicas": 2}, {}, TypeError, r"grid\['replicas'\] must be a list"),
        ({"replicas": []}, {}, ValueError, "is empty"),
        ({"progress": [True]}, {}, ValueError, "progress"),
        ([], {}, ValueError, "empty list"),
        ("replicas", {}, TypeError, "dict of lists or a list of dicts"),
        ({"replicas": [1]}, {"load": [0]}, ValueError, "positive finite"),
        ({"replicas": [1]}, {"load": {"rps": [1]}}, ValueError, "exactly one key"),
        ({"replicas": [1]}, {"executor": "threads"}, ValueError, "executor must be"),
        ({"cost_model": [_NoRepr()]}, {}, ValueError, "no stable description"),
        ({"replicas": [1]}, {"metrics": "ttft"}, TypeError, "list of names"),
    ],
)
def test_bad_input_is_named(wl, grid, kwargs, error, message):
    with pytest.raises(error, match=message):
        ism.sweep(wl, grid, progress=False, **kwargs)


def test_store_that_is_a_file_is_refused(wl, tmp_path: Path):
    f = tmp_path / "runs.parquet"
    f.write_text("")
    with pytest.raises(ValueError, match="is a file"):
        ism.sweep(wl, {"replicas": [1]}, progress=False, store=f)


def test_processes_executor_uses_the_available_cores():
    assert sweep_module._cpus() == len(os.sched_getaffinity(0))


def test_tier_grid_gives_hit_ratios_by_tier():
    # 40 shared prefixes of 4 blocks (160 blocks) against an HBM of 48 blocks
    # per replica: prefixes get evicted from HBM and a DRAM tier of 200
    # blocks can serve them again. The tier's column appears, the total hit
    # ratio is HBM's plus DRAM's, and the tier adds hits.
    wl = ism.Workload.from_synthetic(
        300, rate=20.0, input_len=2560, output_len=8, num_prefixes=40, prefix_len=2048,
        prefix_zipf=0.0, seed=5,
    )
    cost = ism.LinearCostModel(kv_tokens=48 * 512, kv_bytes_per_token=1024)
    dram = ism.Tier("dram", capacity_tokens=200 * wl.block_size, read_gbps=10.0, write_gbps=10.0)
    df = ism.sweep(wl, {"replicas": [2], "cost_model": [cost], "tiers": [[], [dram]]},
                   progress=False)
    assert df["error"].isna().all()
    assert df["tiers"].tolist() == ["[]", repr([dram])]
    with_tier = df.iloc[1]
    assert with_tier["dram_token_hit_ratio"] > 0
    assert with_tier["token_hit_ratio"] == pytest.approx(
        with_tier["hbm_token_hit_ratio"] + with_tier["dram_token_hit_ratio"]
    )
    assert with_tier["token_hit_ratio"] > df.iloc[0]["token_hit_ratio"]
    # the tier list is part of the configuration: different seeds and keys
    assert df["key"].nunique() == 2 and df["seed"].nunique() == 2


# ------------------------------------------------ nested keys and run options


def test_nested_keys_equal_the_objects_they_describe(wl):
    # engine__max_num_seqs / routing__overlap_weight set on a fresh Simulator()
    # give the frames of a Simulator built with the objects by hand
    grid = {"cost_model": [COST], "replicas": [2], "engine__max_num_seqs": [2],
            "routing__overlap_weight": [0.0, 4.0]}
    df = ism.sweep(wl, grid, progress=False)
    assert df["error"].isna().all()
    assert df["routing__overlap_weight"].tolist() == [0.0, 4.0]
    for row in df.itertuples():
        sim = ism.Simulator(replicas=2, cost_model=COST, seed=row.seed,
                            engine=ism.EngineConfig(max_num_seqs=2),
                            routing=ism.sim.KvCostRouter(overlap_weight=row.routing__overlap_weight))
        s = sim.run(wl, progress=False).summary()
        assert df.loc[row.Index, "ttft_ms_p99"] == s["ttft_ms_p99"]
        assert df.loc[row.Index, "preemptions"] == s["preemptions"]
    # the weight matters here (else the comparison above could not fail)
    assert df["ttft_ms_p99"].nunique() == 2


def test_a_disaggregated_fleet_by_nested_keys(wl):
    cost = ism.LinearCostModel(kv_tokens=48 * 512, kv_bytes_per_token=1024)
    grid = {"cost_model": [cost], "replicas": [ism.Disaggregated(1, 1)],
            "replicas__decode": [1, 2]}
    df = ism.sweep(wl.head(60), grid, progress=False)
    assert df["error"].isna().all() and df["gpus"].tolist() == [2, 3]


def test_grid_objects_are_never_changed(wl):
    # a run tells a KvCostRouter the workload's block size (16 here): the sweep's
    # runs do so on copies, never on the router in the grid, with a nested key
    # (set_params copies) or without (each run deep-copies its simulator)
    wl16 = ism.Workload.from_synthetic(40, rate=30.0, input_len=256, output_len=4,
                                       num_prefixes=2, prefix_len=128, block_size=16, seed=1)
    router = ism.sim.KvCostRouter(overlap_weight=2.0, temperature=1.0)
    for grid in ({"routing": [router], "routing__temperature": [0.0]}, {"routing": [router]}):
        df = ism.sweep(wl16, {"cost_model": [COST], **grid}, progress=False)
        assert df["error"].isna().all()
        assert router.temperature == 1.0  # (run never changes it)
    # a router is known by its parameters (a stable label, store key and seed)
    assert df["routing"].tolist() == [
        "KvCostRouter(overlap_weight=2.0, temperature=1.0)"
    ]


def test_run_options_in_run_and_in_the_grid_agree(wl):
    sessions = ism.Workload.from_synthetic(60, rate=5.0, input_len=512, output_len=8,
                                           num_turns=3, think_time_ms=2000, seed=1)
    grid = {"cost_model": [COST], "replicas": [1]}
    by_run = ism.sweep(sessions, grid, run={"closed_loop": True, "think_time": 500.0},
                       progress=False)
    by_grid = ism.sweep(sessions, {**grid, "closed_loop": [True], "think_time": [500.0]},
                        progress=False)
    frames_equal(by_run, by_grid)
    assert by_run["closed_loop"].tolist() == [True]
    direct = ism.Simulator(cost_model=COST, seed=int(by_run["seed"].iloc[0])).run(
        sessions, closed_loop=True, think_time=500.0, progress=False).summary()
    assert by_run["session_ms_mean"].iloc[0] == direct["session_ms_mean"]
    assert by_run["arrival_shift_ms_mean"].iloc[0] == direct["arrival_shift_ms_mean"]
    # an open loop has no sessions to report
    assert ism.sweep(sessions, grid, progress=False)["sessions"].isna().all()


@pytest.mark.parametrize(
    "grid, run, message",
    [
        ({"replicas": [1]}, {"progress": False}, "run= sets 'progress'"),
        ({"replicas": [1]}, {"replicas": 2}, "run= takes options of Simulator.run"),
        ({"replicas": [1], "closed_loop": [True]}, {"closed_loop": True}, "both set"),
        ({"engine__max_seqs": [1]}, None, "EngineConfig has no parameter 'max_seqs'"),
        ({"routing": ["round_robin"], "routing__overlap_weight": [2.0]}, None,
         "grid configuration 0: RoundRobinRouter has no parameter 'overlap_weight'"),
        ({"closed_loop__x": [1]}, None, "unknown Simulator parameter"),
    ],
)
def test_bad_nested_keys_and_run_options_are_named(wl, grid, run, message):
    with pytest.raises(ValueError, match=message):
        ism.sweep(wl, grid, run=run, progress=False)


def test_run_options_are_the_keywords_of_simulator_run():
    import inspect

    from inferasim._run_options import RUN_OPTIONS

    params = inspect.signature(ism.Simulator.run).parameters
    assert set(RUN_OPTIONS) == {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
