"""Headless tests of the cache-sizing widget: set control values, read the figure data."""

from __future__ import annotations

import numpy as np
import pytest

from inferasim import Workload, reuse
from inferasim.widgets import CURVE_POINTS_PER_DECADE, cache_sizing


@pytest.fixture(scope="module")
def workloads() -> dict[str, Workload]:
    # Two small prefix-pool workloads with very different reuse: "skewed"
    # draws 16 prefixes of 4 blocks with Zipf 1.2, "flat" 256 prefixes uniformly.
    common = {"input_len": 512, "output_len": 8, "prefix_len": 2048, "seed": 3}
    return {
        "skewed": Workload.from_synthetic(600, 50.0, num_prefixes=16, prefix_zipf=1.2, **common),
        "flat": Workload.from_synthetic(600, 50.0, num_prefixes=256, prefix_zipf=0.0, **common),
    }


def lru_ratio(wl: Workload, blocks: int, policy: str = "lru") -> float:
    """Token hit ratio of one cache of ``blocks`` blocks, straight from the reuse module."""
    return float(reuse.hit_rate_curve(wl, [blocks], policy=policy)["token_hit_ratio"].iloc[0])


def test_capacity_slider_moves_the_marker_to_the_curve(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5)
    wl = workloads["skewed"]
    grid = w.curve()["capacity_blocks"].to_numpy()
    # About 24 points per decade (fewer where blocks round together).
    assert 0.5 * CURVE_POINTS_PER_DECADE * 4 < grid.size <= CURVE_POINTS_PER_DECADE * 4 + 2
    # Capacities on the widget's own grid are read off the curve without
    # interpolation: compare with the reuse module directly.
    for blocks in grid[[2, 20, 40, 60]]:  # grid[0:2] lie below the slider's 1e4 minimum
        tokens = float(blocks * wl.block_size)
        w.controls["capacity"].value = tokens
        assert w.marker.get_xdata()[0] == pytest.approx(tokens)
        assert w.marker.get_ydata()[0] == pytest.approx(w.hit_ratio)
        assert w.hit_ratio == pytest.approx(lru_ratio(wl, int(blocks)), abs=1e-12)
    # Between grid points the readout interpolates, staying between neighbours.
    a, b = int(grid[30]), int(grid[31])
    w.controls["capacity"].value = (a + b) / 2 * wl.block_size
    lo, hi = sorted((lru_ratio(wl, a), lru_ratio(wl, b)))
    assert lo - 1e-12 <= w.hit_ratio <= hi + 1e-12


def test_hit_ratio_grows_with_capacity_and_readout_follows(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e4)
    image_small = w.hit_image.value
    small = w.hit_ratio
    assert f"{small:.1%}" in w.readout.value
    w.controls["capacity"].value = 1e7
    assert w.hit_ratio >= small
    # 1e7 tokens exceed the working set: the infinite-cache ceiling.
    assert w.hit_ratio == pytest.approx(workloads["skewed"].describe()["infinite_token_hit_ratio"])
    assert f"{w.hit_ratio:.1%}" in w.readout.value
    assert w.hit_image.value != image_small


def test_trace_switch_redraws_the_curve_and_ceiling(workloads):
    w = cache_sizing(workloads, capacity_tokens=3e5)
    skewed_y = np.array(w.curve_line.get_ydata())
    w.controls["trace"].value = "flat"
    flat = workloads["flat"]
    assert not np.array_equal(np.array(w.curve_line.get_ydata()), skewed_y)
    assert w.ceiling_line.get_ydata()[0] == pytest.approx(
        flat.describe()["infinite_token_hit_ratio"]
    )
    assert w.hit_ratio == pytest.approx(
        np.interp(
            np.log10(3e5 // 512),
            np.log10(w.curve()["capacity_blocks"]),
            w.curve()["token_hit_ratio"],
        )
    )
    # Uniform popularity over 256 prefixes reuses less than 16 skewed ones at the same size.
    w.controls["trace"].value = "skewed"
    skewed_hit = w.hit_ratio
    w.controls["trace"].value = "flat"
    assert w.hit_ratio < skewed_hit


def test_policy_switch_uses_that_policys_curve(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5)
    w.controls["policy"].value = "fifo"
    curve = w.curve()
    assert list(w.curve_line.get_ydata()) == list(curve["token_hit_ratio"])
    blocks = int(curve["capacity_blocks"].iloc[3])
    assert curve["token_hit_ratio"].iloc[3] == pytest.approx(
        lru_ratio(workloads["skewed"], blocks, "fifo")
    )
    assert "FIFO" in w.readout.value


def test_curves_are_computed_once_per_trace_and_policy(workloads, monkeypatch):
    w = cache_sizing(workloads)
    calls = []
    import inferasim.widgets as widgets_module

    real = widgets_module.hit_rate_curve
    monkeypatch.setattr(
        widgets_module, "hit_rate_curve", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    for value in np.geomspace(1e4, 1e8, 25):
        w.controls["capacity"].value = float(value)
    assert calls == []  # slider moves never recompute
    w.controls["trace"].value = "flat"
    w.controls["trace"].value = "skewed"
    assert len(calls) == 1  # "flat" once; "skewed" was cached


def test_simulate_button_runs_the_fleet_and_draws_latency(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5, replicas=3, routing="round_robin")
    assert w.result is None
    with pytest.raises(RuntimeError, match="simulate"):
        w.summary()
    w.controls["simulate"].click()
    req = w.result.requests
    assert len(req) == len(workloads["skewed"])
    assert sorted(req["replica"].unique()) == [0, 1, 2]
    # The load panel has one bar per replica, each the replica's request count.
    load_ax = w.sim_axes[2]
    assert [p.get_height() for p in load_ax.patches] == req.groupby("replica").size().tolist()
    assert "simulated" in w.status.value and w.progress.value == 1.0
    assert "ttft_ms" in w.sim_table.value
    p99 = w.summary().loc["ttft_ms", "p99"]
    assert p99 == pytest.approx(req["ttft_ms"].quantile(0.99))
    first_image = w.sim_image.value
    # A changed setting marks the plots stale until the next run.
    w.controls["replicas"].value = 1
    assert "settings changed" in w.status.value
    w.simulate()
    assert w.result.requests["replica"].unique().tolist() == [0]
    assert [p.get_height() for p in w.sim_axes[2].patches] == [len(workloads["skewed"])]
    assert w.sim_image.value != first_image


def test_load_scale_compresses_arrivals(workloads):
    w = cache_sizing(workloads, load=4.0, sim_window_ms=5_000)
    wl = w.simulation_workload()
    original = workloads["skewed"].window(0, 5_000)
    assert len(wl) == len(original)
    np.testing.assert_allclose(wl.arrival_ms, original.arrival_ms / 4.0)


def test_cache_capacity_reaches_the_simulator(workloads):
    w = cache_sizing(workloads, capacity_tokens=2e5)
    assert w.settings()["kv_blocks"] == int(2e5 // 512)


def test_bad_arguments_are_named(workloads):
    with pytest.raises(ValueError, match="policy 'mru'"):
        cache_sizing(workloads, policy="mru")
    with pytest.raises(ValueError, match="capacity_tokens"):
        cache_sizing(workloads, capacity_tokens=10)
    with pytest.raises(ValueError, match="no hash ids"):
        cache_sizing(Workload.from_requests([0], [10], [1]))
    with pytest.raises(ValueError, match="at least one"):
        cache_sizing({})
    with pytest.raises(TypeError, match="not a Workload"):
        cache_sizing({"x": [1, 2]})


def test_policy_without_a_simulator_eviction_falls_back_to_lru_and_says_so(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5, policy="opt")
    w.simulate()
    assert "no opt eviction" in w.status.value and "LRU" in w.status.value
    # FIFO exists in the simulator: no note.
    w.controls["policy"].value = "fifo"
    w.simulate()
    assert "eviction" not in w.status.value
