"""Headless tests of the cache-sizing widget: set control values, read the figure data."""

from __future__ import annotations

import numpy as np
import pytest

from inferasim import Workload, reuse
from inferasim.widgets import (
    CURVE_POINTS_PER_DECADE,
    cache_sizing,
    capacity_options,
    tiered_cache_sizing,
)


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
    # About 24 points per decade (fewer where blocks round together), plus the
    # slider's stops (7 a decade), so the readout at a stop is exact.
    stops = {int(c // wl.block_size) for c in capacity_options()}
    assert stops <= set(grid.tolist())
    assert 0.5 * CURVE_POINTS_PER_DECADE * 4 < grid.size <= CURVE_POINTS_PER_DECADE * 4 + 2 + len(stops)
    # Capacities on the widget's own grid are read off the curve without
    # interpolation: compare with the reuse module directly.
    for blocks in grid[[2, 20, 40, 60]]:  # grid[0:2] lie below the slider's 1e4 minimum
        tokens = float(blocks * wl.block_size)
        w.capacity_tokens = tokens  # off the slider's round stops: added to them
        assert w.controls["capacity"].value == tokens
        assert w.marker.get_xdata()[0] == pytest.approx(tokens)
        assert w.marker.get_ydata()[0] == pytest.approx(w.hit_ratio)
        assert w.hit_ratio == pytest.approx(lru_ratio(wl, int(blocks)), abs=1e-12)
    # Between grid points the readout interpolates, staying between neighbours.
    a, b = int(grid[30]), int(grid[31])
    w.capacity_tokens = (a + b) / 2 * wl.block_size
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
    for value in capacity_options()[::2]:
        w.controls["capacity"].value = value
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
    html = w.sim_output.outputs[1]["data"]["text/html"]
    assert "ttft_ms" in html and "3</b> replicas" in html
    p99 = w.summary().loc["ttft_ms", "p99"]
    assert p99 == pytest.approx(req["ttft_ms"].quantile(0.99))
    first_image = w.sim_png
    # A changed setting marks the plots stale until the next run.
    w.controls["replicas"].value = 1
    assert "settings changed" in w.status.value
    w.simulate()
    assert w.result.requests["replica"].unique().tolist() == [0]
    assert [p.get_height() for p in w.sim_axes[2].patches] == [len(workloads["skewed"])]
    assert w.sim_png != first_image


def test_load_scale_compresses_arrivals(workloads):
    w = cache_sizing(workloads, load=4.0, sim_window_ms=5_000)
    wl = w.simulation_workload()
    original = workloads["skewed"].window(0, 5_000)
    assert len(wl) == len(original)
    np.testing.assert_allclose(wl.arrival_ms, original.arrival_ms / 4.0)


def test_cache_capacity_reaches_the_simulator(workloads):
    w = cache_sizing(workloads, capacity_tokens=2e5)
    assert w.settings()["kv_tokens"] == int(2e5 // 512) * 512  # whole blocks


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


# ------------------------------------------------------- consistency (issue 11)


def test_built_and_simulated_widget_says_nothing_changed(workloads):
    w = cache_sizing(workloads, capacity_tokens=3e6)
    assert "settings changed" not in w.status.value
    w.simulate()
    assert "settings changed" not in w.status.value and "simulated" in w.status.value
    # Setting a control to the value it has is no change either.
    w.controls["capacity"].value = 3e6
    w.controls["replicas"].value = w.controls["replicas"].value
    assert "settings changed" not in w.status.value
    w.controls["capacity"].value = 1e6
    assert "settings changed" in w.status.value


def test_a_3e6_capacity_stays_3e6(workloads):
    w = cache_sizing(workloads, capacity_tokens=3e6)
    slider = w.controls["capacity"]
    assert slider.value == 3e6 and w.capacity_tokens == 3_000_000.0
    assert slider.label == "3M"  # what the slider shows
    # 3,000,000 // 512 = 5,859 blocks: 5,859 * 512 = 2,999,808 tokens
    assert w.settings()["kv_tokens"] == 5859 * 512
    assert "3,000,000</b> tokens" in w.readout.value and "5,859 blocks" in w.readout.value
    # Every stop of the slider is a round number: mantissa in CAPACITY_STEPS.
    for value in capacity_options():
        mantissa = value / 10 ** np.floor(np.log10(value))
        assert round(mantissa, 9) in (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
    # A capacity between stops set from code is kept exactly, and the other stops stay.
    w.capacity_tokens = 2_500_000
    assert slider.value == 2.5e6 and slider.label == "2.5M"
    w.controls["capacity"].value = 3e6
    assert w.capacity_tokens == 3e6
    with pytest.raises(ValueError, match="capacity_tokens"):
        w.capacity_tokens = 5e8


def test_readout_and_simulation_text_name_their_numbers_and_agree():
    # One replica, requests 2 s apart (each finishes well within that), prompts of
    # 2,000 + ~1,000 tokens: no request waits on another's prefill, and 5e4 tokens
    # (97 blocks) hold all 6 prefixes, so the simulated cache, the reuse replay of
    # one LRU cache and the infinite cache all serve the same tokens.
    wl = Workload.from_synthetic(120, 0.5, arrival="deterministic", input_len=1000,
                                 output_len=2, num_prefixes=6, prefix_len=2000, seed=1)
    w = cache_sizing({"sparse": wl}, capacity_tokens=5e4, replicas=1, routing="round_robin")
    readout = w.readout.value
    for words in ("one <b>LRU</b> cache", "50,000</b> tokens", "97 blocks of 512 tokens",
                  "replaying the whole sparse trace", "token hit ratio", "(reuse analysis)",
                  "an infinite cache"):
        assert words in readout, words
    res = w.simulate()
    text = w.sim_text
    fleet = float(res.requests["cached_tokens"].sum() / res.requests["input_len"].sum())
    whole = float(reuse.hit_rate_curve(wl, [97], full_blocks_only=True)["token_hit_ratio"].iloc[0])
    one = float(reuse.hit_rate_curve(wl, [97])["token_hit_ratio"].iloc[0])
    assert fleet == pytest.approx(whole, abs=1e-12)  # they agree here, and the texts say so
    assert f"fleet token hit ratio <b>{fleet:.1%}</b>" in text
    # the readout's measure and the simulator's (whole blocks), each named
    assert f"(reuse analysis, as the readout above): {one:.1%}, or {whole:.1%} caching whole blocks" in text
    assert "<b>1</b> replicas" in text and "49,664 tokens each" in text  # 97 * 512
    assert f"<b>{w.hit_ratio:.1%}</b>" in readout and f"{fleet:.1%}" in readout
    # A small cache: the simulated replica also keeps running requests in that memory.
    w.controls["capacity"].value = 2e4
    w.simulate()
    assert "running requests share the cache" in w.sim_text


def test_earlier_outputs_never_change_when_the_widget_resimulates(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5, replicas=2)
    w.simulate()
    shown = w.snapshot()  # what a notebook cell displayed
    shown_bytes = bytes(shown.data)
    first_outputs = w.sim_output.outputs
    w.controls["replicas"].value = 4
    w.simulate()
    assert bytes(shown.data) == shown_bytes  # the earlier cell output is a copy
    assert w.sim_png != shown_bytes  # the widget's own area shows the new run
    # The widget's output area is replaced, never appended to.
    assert len(w.sim_output.outputs) == len(first_outputs) == 2
    assert w.sim_output.outputs != first_outputs
    with pytest.raises(RuntimeError, match="simulate"):
        cache_sizing(workloads).snapshot()


# ------------------------------------------------------------- KV tiers (issue 8)


def test_tiered_widget_hbm_comes_from_the_model_and_can_be_overridden(workloads):
    from inferasim.sim import RooflineCostModel
    from inferasim.widgets import tiered_cache_sizing

    w = tiered_cache_sizing(workloads, model="llama-3.1-8b", gpu="h100-80gb", dram_tokens=1e5)
    model_tokens = RooflineCostModel("llama-3.1-8b", "h100-80gb").kv_capacity_blocks(512) * 512
    assert w.capacities()["hbm"] == model_tokens
    assert f"{model_tokens:,}</b> tokens (from the model)" in w.readout.value
    w.controls["hbm"].value = 1e5
    assert w.capacities()["hbm"] == 1e5 and "(overridden)" in w.readout.value
    # a bigger model leaves less HBM for KV on the same GPU
    big = tiered_cache_sizing(workloads, model="llama-3.1-70b", gpu="h100-80gb", tp=4)
    assert big.capacities()["hbm"] == RooflineCostModel(
        "llama-3.1-70b", "h100-80gb", tp=4).kv_capacity_blocks(512) * 512


@pytest.mark.parametrize(("hbm", "dram", "pool"), [(2e4, 5e4, 0.0), (1e4, 1.5e5, 3e5), (5e4, 0.0, 1e5)])
def test_tier_shares_equal_the_reuse_modules_tiered_replay(workloads, hbm, dram, pool):
    # The widget derives every tier's share from one LRU curve (differences at
    # cumulative capacities); reuse.tiered_hit_rate is the reuse branch's own
    # implementation of the exclusive hierarchy, checked there against a replay.
    from inferasim.widgets import tiered_cache_sizing

    w = tiered_cache_sizing(workloads, dram_tokens=dram, pool_tokens=pool)
    w.controls["hbm"].value = hbm  # a stop of the slider
    for trace, wl in workloads.items():
        w.controls["trace"].value = trace
        cap = w.capacities()
        blocks = [int(cap[k] // 512) for k in ("hbm", "dram", "pool")]
        ref = reuse.tiered_hit_rate(wl, blocks)["token_hit_ratio"].tolist()
        got = w.shares
        assert [got["hbm"], got["dram"], got["pool"]] == pytest.approx(ref, abs=1e-12)
        assert f"{got['dram']:.1%}" in w.readout.value


@pytest.mark.parametrize("system", ["custom", "lmcache", "mooncake_store", "vllm_offload"])
def test_the_readout_gives_the_chosen_systems_timing_free_limit(workloads, system):
    # The readout's first numbers are the system's own limit (its tiers' write
    # policies, reuse.replay_tiers on one replica), not the exclusive picture
    # of the plot: a written-through stack and an evict one differ there.
    from inferasim.sim import Tier
    from inferasim.widgets import tiered_cache_sizing

    w = tiered_cache_sizing(workloads, system=system, dram_tokens=1.5e5, pool_tokens=3e5)
    w.controls["hbm"].value = 5e4
    for trace, wl in workloads.items():
        w.controls["trace"].value = trace
        tiers = w.tiers()
        assert all(isinstance(t, Tier) for t in tiers)
        ref = reuse.replay_tiers(wl, 50_000, tiers, replicas=1).attrs["tier_hit_ratio"]
        got = w.limit_shares
        assert got == pytest.approx(ref, abs=0) and list(got) == ["hbm", *(t.name for t in tiers)]
        assert f"= <b>{sum(ref.values()):.1%}</b> of prompt tokens" in w.readout.value


def test_the_readout_says_when_hbm_is_below_a_requests_peak(workloads):
    # A 60-block prompt (30,720 tokens) and the HBM slider's lowest stop (fewer
    # than 60 blocks of 512): the replay's precondition fails and the readout
    # says so instead of a number.
    from inferasim.widgets import tiered_cache_sizing

    long = Workload.from_requests([0, 1], [60 * 512, 512], [2, 2], [list(range(60)), [0]])
    w = tiered_cache_sizing({"long": long}, dram_tokens=1e5)
    w.controls["hbm"].value = min(v for _, v in w.controls["hbm"].options)
    assert w.capacities()["hbm"] < 60 * 512
    assert isinstance(w.limit_shares, str) and "at its peak" in w.limit_shares
    assert "Timing-free limit of this stack: none (" in w.readout.value


def test_stacked_view_grows_with_dram_and_stays_under_the_ceiling(workloads):
    from inferasim.widgets import tiered_cache_sizing

    w = tiered_cache_sizing(workloads, pool_tokens=2e5)
    frame = w.stack_curve()
    ceiling = workloads["skewed"].describe()["infinite_token_hit_ratio"]
    assert frame["hbm"].nunique() == 1  # HBM fixed: its share does not move with DRAM
    local = (frame["hbm"] + frame["dram"]).to_numpy()
    total = local + frame["pool"].to_numpy()
    assert np.all(np.diff(local) >= -1e-12) and np.all(np.diff(total) >= -1e-12)
    assert total.max() <= ceiling + 1e-12
    assert frame["dram"].iloc[0] == 0.0  # no DRAM, no DRAM hits
    image = w.stack_image.value
    w.controls["pool"].value = 0.0
    assert w.stack_curve()["pool"].eq(0).all() and w.stack_image.value != image


def test_tiered_simulation_splits_hits_by_tier_and_compares_with_hbm_only(workloads):
    from inferasim.widgets import tiered_cache_sizing

    w = tiered_cache_sizing(workloads, dram_tokens=1e5, pool_tokens=2e5, replicas=2)
    w.controls["hbm"].value = 2e4  # a small HBM so the lower tiers matter
    res = w.simulate()
    s, b = res.summary(), w.baseline.summary()
    assert [t.name for t in w.tiers()] == ["dram", "pool"]
    hits = res.tiers["token_hit_ratio"]
    assert hits["hbm"] == s["hbm_token_hit_ratio"]
    parts = hits["hbm"] + hits["dram"] + hits["pool"]
    assert parts == pytest.approx(s["token_hit_ratio"], abs=1e-12)
    assert w.baseline.tiers.index.tolist() == ["hbm"]  # the baseline has HBM only
    assert s["token_hit_ratio"] >= b["token_hit_ratio"]  # more cache never hurts here
    text = w.sim_text()
    assert f"<b>{s['token_hit_ratio']:.1%}</b>" in text and f"<b>{b['token_hit_ratio']:.1%}</b>" in text
    assert f"{s['load_ms_mean']:,.1f}</b> ms" in text and "TTFT p50" in text
    assert len(w.sim_output.outputs) == 2
    w.controls["dram"].value = 0.0
    w.controls["pool"].value = 0.0
    assert w.tiers() == [] and "settings changed" in w.status.value


# ------------------------------------- presets of deployed systems (issue 22)

# Each system with the preset call the widget must make at DRAM 100k, pool 200k,
# written from the presets' signatures (the DRAM slider is the per-replica tier,
# the pool slider the shared one; Dynamo's G3 cluster-shared since the pool
# slider is a fleet-wide capacity), and which sliders the system leaves on.
_PRESET_CALLS = {
    "vllm_offload": (lambda t: t.vllm_offload(cpu_tokens=100_000), (True, False)),
    "lmcache": (lambda t: t.lmcache(cpu_tokens=100_000, remote_tokens=200_000), (True, True)),
    "mooncake_store": (lambda t: t.mooncake_store(pool_tokens=200_000), (False, True)),
    "dynamo_kvbm": (
        lambda t: t.dynamo_kvbm(host_tokens=100_000, disk_tokens=200_000, shared_disk=True),
        (True, True),
    ),
    "sglang_hicache": (
        lambda t: t.sglang_hicache(host_tokens=100_000, storage_tokens=200_000), (True, True)
    ),
}


@pytest.mark.parametrize("system", list(_PRESET_CALLS))
def test_the_widget_simulates_each_systems_own_preset_stack(workloads, system, monkeypatch):
    import inferasim as ism
    import inferasim.sim as sim

    passed = []

    class Recording(sim.Simulator):
        def __init__(self, *args, **kwargs):
            passed.append(kwargs.get("tiers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(sim, "Simulator", Recording)
    w = tiered_cache_sizing(workloads, system=system, dram_tokens=1e5, pool_tokens=2e5,
                            replicas=2, sim_window_ms=4_000)
    make, (dram_on, pool_on) = _PRESET_CALLS[system]
    expected = make(ism.tiers)
    assert (not w.controls["dram"].disabled, not w.controls["pool"].disabled) == (dram_on, pool_on)
    # a slider the system has no tier for counts as none, in the readout too
    assert w.capacities()["dram"] == (1e5 if dram_on else 0.0)
    assert w.capacities()["pool"] == (2e5 if pool_on else 0.0)
    res = w.simulate()
    assert passed == [None, expected]  # HBM only, then exactly the preset's Tier objects
    assert res.tiers.index.tolist() == ["hbm", *(t.name for t in expected)]
    for t in expected:
        assert f"{t.name} " in w.status.value and f" {t.name} " in w.sim_text()


def test_the_status_line_names_the_tiers_and_their_write_policies(workloads):
    # LMCache at DRAM 100k, pool 200k, by hand from its documentation (tier_presets):
    # local CPU per replica, written through (every computed chunk is stored), and
    # the remote backend shared and written through; a shared through tier
    # publishes the blocks a replica loads from its CPU tier as well (Tier.publish).
    w = tiered_cache_sizing(workloads, system="lmcache", dram_tokens=1e5, pool_tokens=2e5)
    what = (
        "LMCache: cpu 100k tokens per replica, written through; "
        "remote 200k tokens shared, written through, publishing loaded blocks too"
    )
    assert w.status.value == f"{what}. Press <b>simulate</b> to run the fleet with and without the tiers"
    # switching the dropdown says the new stack at once, and turns the DRAM slider off
    w.controls["system"].value = "mooncake_store"
    assert w.controls["dram"].disabled and not w.controls["pool"].disabled
    assert w.status.value.startswith(
        "Mooncake Store: pool 200k tokens shared, written through, publishing loaded blocks too. "
    )
    w.controls["system"].value = "custom"  # the widget's own stack, as before
    assert w.status.value.startswith(
        "custom: dram 100k tokens per replica, written on eviction; "
        "pool 200k tokens shared, written through, publishing loaded blocks too. "
    )
    w.controls["dram"].value = 0.0
    w.controls["pool"].value = 0.0
    assert w.status.value.startswith("custom: HBM only. ")


@pytest.mark.parametrize("system", ["vllm", "", None, ["lmcache"], 1])
def test_a_system_the_widget_has_no_preset_for_is_refused_by_name(workloads, system):
    with pytest.raises(
        ValueError,
        match=r"^system must be one of \['custom', 'vllm_offload', 'lmcache', 'mooncake_store', "
        r"'dynamo_kvbm', 'sglang_hicache'\], got ",
    ):
        tiered_cache_sizing(workloads, system=system)


# ------------------------------------------------- rejections shown (issue 24)


def _never_fit(wl: Workload, kv_tokens: int, bs: int = 16) -> int:
    """Requests whose last decode step needs more KV blocks than a replica holds, counted here.

    A request holds ceil((input_len + output_len - 1) / bs) KV blocks (vLLM's
    16-token pages by default) at its last step; more than kv_tokens // bs can
    never run (derived from the workload alone, not from the simulator's frames).
    """
    need = -(-(wl.input_len.astype(np.int64) + wl.output_len - 1) // bs)
    return int(((need > kv_tokens // bs) | (wl.input_len == 0)).sum())


def test_the_widget_says_how_many_requests_were_rejected_at_10k_tokens(conversation_path):
    # Notebook 02's widget, capacity dragged to 10k tokens, FIFO, round robin, simulate.
    # Before: "simulated 12,031 requests in 0.8 s", a TTFT p99 over the finished
    # requests only, bars adding up to 7,154, and no word of the 4,877 rejected.
    wl = Workload.from_mooncake(conversation_path)
    w = cache_sizing({"conversation": wl}, capacity_tokens=3e6, replicas=4, routing="kv_cost")
    w.controls["capacity"].value = 1e4
    w.controls["policy"].value = "fifo"
    w.controls["routing"].value = "round_robin"
    res = w.simulate()
    # the widget's capacity counts whole 512-token hash blocks: 19, 9,728 tokens, which
    # the engine allocates as 9,728 / 16 = 608 KV blocks of 16 tokens
    kv_tokens = (10_000 // 512) * 512
    rejected = _never_fit(wl, kv_tokens)
    assert rejected == 4_877  # the count, derived from the workload
    assert int((res.requests["status"] == "rejected").sum()) == rejected
    finished = len(wl) - rejected
    assert f"<b>{rejected:,} rejected</b>" in w.status.value
    assert "longer than a replica's KV memory of 608 blocks" in w.status.value
    assert f"latencies are of the {finished:,} finished" in w.status.value
    assert f"{rejected:,} of {len(wl):,} requests rejected" in w.sim_text
    assert f"latencies cover the {finished:,} finished requests only" in w.sim_text
    # the plots: the bars add up to every request, the rejected one labelled
    load_ax = w.sim_axes[2]
    heights = [p.get_height() for p in load_ax.patches]
    assert sum(heights) == len(wl) and heights[-1] == rejected
    assert load_ax.get_xticklabels()[-1].get_text() == "rejected"
    assert w.sim_figure.get_suptitle() == (
        f"{len(wl):,} requests: {finished:,} finished (the latencies), {rejected:,} rejected"
    )
    for ax in w.sim_axes[:2]:
        assert ax.get_ylabel() == "fraction of finished requests"
    html = w.sim_output.outputs[1]["data"]["text/html"]
    assert f"latency (ms) of the {finished:,} finished requests" in html
    # the percentiles are over the finished requests
    fin = res.requests[res.requests["status"] == "finished"]
    assert w.summary().loc["ttft_ms", "p99"] == pytest.approx(fin["ttft_ms"].quantile(0.99))
    # and the run's own summary and card say the same
    note = f"{rejected:,} of {len(wl):,} requests rejected"
    assert note in repr(res.summary()) and note in repr(res)


def test_a_run_without_rejections_says_none_were(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5, replicas=2, routing="round_robin")
    res = w.simulate()
    assert (res.requests["status"] == "finished").all()
    assert "rejected" not in w.status.value and "rejected" not in w.sim_text
    assert w.sim_figure.get_suptitle().endswith(", 0 rejected")
    assert [t.get_text() for t in w.sim_axes[2].get_xticklabels()] == ["0", "1"]
    assert "requests rejected" not in repr(res.summary())


def test_tiered_widget_names_its_tiers_one_way_and_sizes_the_hit_axis(workloads):
    from inferasim.widgets import tiered_cache_sizing

    w = tiered_cache_sizing(workloads, dram_tokens=1e5, pool_tokens=2e5, replicas=2)
    w.simulate()
    stack = [t.get_text() for t in w.stack_ax.get_legend().get_texts()]
    sim = [t.get_text() for t in w.sim_axes[1].get_legend().get_texts()]
    assert stack[:3] == sim == ["HBM", "dram", "pool"]  # not "DRAM" here and "POOL" there
    assert "HBM " in w.sim_text() and " dram " in w.sim_text() and " pool " in w.sim_text()
    longest = max(w.result.summary()["token_hit_ratio"], w.baseline.summary()["token_hit_ratio"])
    assert w.sim_axes[1].get_xlim()[1] == pytest.approx(min(1.0, 1.1 * longest))


def test_the_readout_at_a_slider_stop_is_the_exact_reuse_number(conversation_path):
    # Notebook 02 gave three numbers for one 3M-token LRU cache over the whole trace:
    # 13.8% (the readout, interpolated), 14.4% (the simulation text, whole blocks only)
    # and 13.9% (hit_rate_curve). At a slider stop the readout is now hit_rate_curve's.
    wl = Workload.from_mooncake(conversation_path)
    w = cache_sizing({"conversation": wl}, capacity_tokens=3e6)
    exact = float(reuse.hit_rate_curve(wl, [3e6], unit="tokens")["token_hit_ratio"].iloc[0])
    assert w.hit_ratio == pytest.approx(exact, abs=1e-12)
    assert f"<b>{exact:.1%}</b> (reuse analysis)" in w.readout.value
    w.capacity_tokens = 3.3e6  # off the stops: interpolated, and said so
    assert "interpolated between its capacities" in w.readout.value


def test_the_capacity_ring_is_whole_at_the_ends_of_the_slider(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e4)
    low, high = w.hit_ax.get_xlim()
    assert low < 1e4 and high > 1e8  # room beyond both ends of the slider
    assert w.marker.get_clip_on() is False
    note = next(t for t in w.hit_ax.texts if "3M tokens" in t.get_text())
    # the note sits at the top of the axes, above the ceiling line and the curve
    assert note.get_position()[1] > 0.9 and note.get_va() == "top"


# ------------------------------------------------ issue 23 class 7: arguments
@pytest.mark.parametrize("make", [cache_sizing, tiered_cache_sizing])
@pytest.mark.parametrize("replicas", [0, -1, 2.7, True, "4"])
def test_a_replica_count_the_simulator_refuses_is_refused_by_name(workloads, make, replicas):
    # before: 0 -> 1, 2.7 -> 2, True -> 1 (the slider clamped it silently)
    # the simulator's own rule (sim.config._positive_int), the same message
    with pytest.raises(ValueError, match=r"^replicas must be a positive integer, got"):
        make(workloads, replicas=replicas)


@pytest.mark.parametrize("make", [cache_sizing, tiered_cache_sizing])
def test_a_replica_count_beyond_the_slider_is_kept_exactly(workloads, make):
    # before: 100 became 32, the slider's end; now the slider widens to hold it
    w = make(workloads, replicas=100)
    assert w.controls["replicas"].value == 100 and w.controls["replicas"].max == 100


@pytest.mark.parametrize("load", [100.0, 0.01, 2.0**-7])
def test_a_load_beyond_the_slider_is_kept_exactly(workloads, load):
    # before: 100 became 8 (2**3, the slider's end); now the slider widens to
    # whole powers of two around it: log2(100) = 6.64 -> max 7, log2(0.01) = -6.64 -> min -7
    w = cache_sizing(workloads, load=load)
    assert w.controls["load"].value == load
    assert w.settings()["load"] == load


@pytest.mark.parametrize("load", [0, -1, float("nan"), float("inf"), True, "2"])
def test_a_bad_load_is_refused_by_name(workloads, load):
    with pytest.raises(ValueError, match=r"^load must be a finite number > 0, got"):
        cache_sizing(workloads, load=load)


def test_a_load_that_would_stretch_arrivals_past_the_time_limit_names_load(workloads):
    # skewed: 600 requests at 50/s, the last near 12 s; at load 1e-300 it would
    # arrive at ~1e304 ms, far past 2**43 ms
    with pytest.raises(ValueError, match=r"^load must be >= .* for workload 'skewed' .*2\*\*43 ms"):
        cache_sizing(workloads, load=1e-300)


def test_a_nan_load_set_on_the_slider_is_named_on_the_status_line(workloads):
    w = cache_sizing(workloads, capacity_tokens=1e5)
    w.controls["load"].value = float("nan")
    # said as soon as the slider holds it, and again when simulate is pressed
    assert w.status.value == "not simulated: load must be a finite number &gt; 0, got nan"
    with pytest.raises(ValueError, match="^load must be a finite number > 0, got nan"):
        w.simulate()
    assert w.status.value.startswith("not simulated: load must be")
    assert w.result is None and w.progress.bar_style == "danger"


@pytest.mark.parametrize("make", [cache_sizing, tiered_cache_sizing])
@pytest.mark.parametrize("window", [0, -5, float("nan"), float("inf"), 2.0**44])
def test_a_bad_simulation_window_is_refused_by_name(workloads, make, window):
    # before: 0, -5 and nan crashed in the drawing code (AttributeError) or, in
    # the tiered widget, simulated 0 requests without a word
    with pytest.raises(ValueError, match=r"^sim_window_ms must be a finite number > 0 and <= 2\*\*43"):
        make(workloads, sim_window_ms=window)


@pytest.mark.parametrize("make", [cache_sizing, tiered_cache_sizing])
def test_a_window_before_the_first_request_is_refused_naming_the_trace(make):
    # the only request arrives at 1,000 ms: a 500 ms window holds none
    wl = Workload.from_requests([1000.0], [1024], [4], hash_ids=[[1, 2]], block_size=512)
    with pytest.raises(ValueError, match=r"^sim_window_ms=500: workload 'w' has no request"):
        make({"w": wl}, sim_window_ms=500)


@pytest.mark.parametrize("make", [cache_sizing, tiered_cache_sizing])
@pytest.mark.parametrize("value", [float("nan"), "1e5", True])
def test_a_capacity_that_is_not_a_number_is_refused_by_name(workloads, make, value):
    name = "capacity_tokens" if make is cache_sizing else "dram_tokens"
    with pytest.raises(ValueError, match=rf"^{name} must be a finite number"):
        make(workloads, **{name: value})


def test_a_run_where_every_request_is_rejected_draws_and_says_so():
    # 20 prompts of 20,000 tokens (40 blocks of 512 with the output) against a
    # 10k-token replica (19 blocks): every request is rejected. Before: the
    # drawing code crashed (AttributeError: 'NoneType' object has no attribute 'remove').
    big = Workload.from_synthetic(20, rate=20.0, input_len=20_000, output_len=8,
                                  num_prefixes=2, prefix_len=1024, seed=0)
    w = cache_sizing(big, capacity_tokens=1e4, replicas=2, routing="round_robin")
    res = w.simulate()
    assert (res.requests["status"] == "rejected").all()
    assert "<b>20 rejected</b>" in w.status.value and "of the 0 finished" in w.status.value
    assert [ax.get_title() for ax in w.sim_axes[:2]] == ["TTFT: no latencies", "TPOT: no latencies"]
    assert w.sim_png[:4] == b"\x89PNG"
