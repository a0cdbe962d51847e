"""The plotting layer: axes-level functions return the Axes they drew on, label units, draw the data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from inferasim import Workload, plots, studies, style
from inferasim.plots import (
    plot_hit_rate_curve,
    plot_popularity,
    plot_reuse_distance_cdf,
    plot_sessions,
)
from inferasim.reuse import hit_rate_curve, popularity, reuse_distance, sessions


@pytest.fixture
def wl() -> Workload:
    # two conversations of 2 and 3 turns on a shared one-block prefix (block 0)
    ids = [[0, 1, 2], [0, 5, 6], [0, 1, 2, 3, 4], [0, 5, 6, 7], [0, 1, 2, 3, 4, 8, 9]]
    lens = [3 * 512, 3 * 512, 5 * 512, 4 * 512, 7 * 512]
    return Workload.from_requests([0, 500, 4000, 6000, 9000], lens, [10] * 5, ids)


@pytest.fixture(autouse=True)
def _close() -> None:
    yield
    plt.close("all")


def test_hit_rate_curve_several_traces_and_policies(wl: Workload) -> None:
    other = wl.head(3)
    curves = {
        "conversation": pd.concat([hit_rate_curve(wl), hit_rate_curve(wl, policy="opt")]),
        "synthetic": pd.concat([hit_rate_curve(other), hit_rate_curve(other, policy="opt")]),
    }
    fig, ax = plt.subplots()
    out = plot_hit_rate_curve(curves, ax=ax)
    assert out is ax
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == [
        "conversation LRU",
        "conversation offline optimum",
        "synthetic LRU",
        "synthetic offline optimum",
    ]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "cache capacity (tokens)"
    assert ax.get_ylabel() == "token hit ratio"
    assert ax.get_ylim() == (0.0, 1.0)
    # the top axis shows the other unit
    tops = [c for c in ax.child_axes if c.get_xlabel()]
    assert [t.get_xlabel() for t in tops] == ["cache capacity (blocks)"]
    # x values are the capacities in tokens of the curve (capacity 0 dropped)
    first = ax.get_lines()[0]
    assert np.array_equal(
        first.get_xdata(),
        curves["conversation"].query("policy == 'lru'")["capacity_tokens"].to_numpy(),
    )


def test_hit_rate_curve_blocks_and_block_ratio(wl: Workload) -> None:
    curve = hit_rate_curve(wl, [0, 1, 2, 4, 8])
    ax = plot_hit_rate_curve(curve, x="blocks", ratio="block", label="t", secondary_axis=False)
    (line,) = ax.get_lines()
    assert line.get_xdata().tolist() == [1, 2, 4, 8]
    assert line.get_ydata().tolist() == curve["block_hit_ratio"].iloc[1:].tolist()
    assert ax.get_xlabel() == "cache capacity (blocks)"
    assert not [c for c in ax.child_axes if c.get_xlabel()]
    with pytest.raises(ValueError, match="x must be"):
        plot_hit_rate_curve(curve, x="bytes")
    with pytest.raises(ValueError, match="ratio"):
        plot_hit_rate_curve(curve, ratio="request")
    with pytest.raises(ValueError, match="lacks columns"):
        plot_hit_rate_curve(pd.DataFrame({"a": [1]}))


def test_popularity_plot(wl: Workload) -> None:
    pop = popularity(wl)
    ax = plot_popularity({"conversation": pop})
    lines = ax.get_lines()
    assert lines[0].get_ydata().tolist() == pop.blocks["requests"].tolist()
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "block rank" and ax.get_ylabel() == "requests per block"
    assert len(lines) == 2 and lines[1].get_label().startswith("Zipf s=")
    assert len(plot_popularity(pop, fit=False).get_lines()) == 1


@pytest.mark.parametrize(
    ("kind", "xlabel"),
    [("stack", "LRU stack distance (blocks)"), ("time", "time since previous use (s)")],
)
def test_reuse_distance_cdf(wl: Workload, kind: str, xlabel: str) -> None:
    rd = reuse_distance(wl)
    ax = plot_reuse_distance_cdf({"a": rd, "b": rd}, kind=kind)
    assert len(ax.get_lines()) == 2
    assert ax.get_xlabel() == xlabel
    y = ax.get_lines()[0].get_ydata()
    assert y[-1] == 1.0 and (np.diff(y) >= 0).all() and len(y) == len(rd)
    if kind == "stack":
        assert sorted(ax.get_lines()[0].get_xdata()) == sorted(rd["stack_distance"].tolist())
    tokens = plot_reuse_distance_cdf(rd, block_size=512)
    assert tokens.get_xlabel() == "LRU stack distance (tokens)"
    assert max(tokens.get_lines()[0].get_xdata()) == 512 * rd["stack_distance"].max()
    with pytest.raises(ValueError, match="kind"):
        plot_reuse_distance_cdf(rd, kind="space")


@pytest.mark.parametrize(
    ("kind", "xlabel", "ylabel"),
    [
        ("turns", "turns per session", "share of sessions"),
        ("gap", "time between turns (s)", "fraction of follow-up turns"),
        ("growth", "turn", "prompt tokens added (median)"),
    ],
)
def test_sessions_plot(wl: Workload, kind: str, xlabel: str, ylabel: str) -> None:
    s = sessions(wl)
    # two chains: 0 -> 2 -> 4 (3 turns) and 1 -> 3 (2 turns)
    assert s.sessions["turns"].tolist() == [3, 2]
    fig, ax = plt.subplots()
    assert plot_sessions(s, ax=ax, kind=kind, label="conv") is ax
    assert ax.get_xlabel() == xlabel and ax.get_ylabel() == ylabel
    (line,) = ax.get_lines()
    if kind == "turns":
        assert line.get_xdata().tolist() == [2, 3]
        assert line.get_ydata().tolist() == [0.5, 0.5]
    if kind == "growth":
        # turn 2: +1024 (req 2) and +512 (req 3) -> median 768; turn 3: +1024
        assert line.get_xdata().tolist() == [2, 3]
        assert line.get_ydata().tolist() == [768.0, 1024.0]
    with pytest.raises(ValueError, match="kind"):
        plot_sessions(s, kind="length")


# ------------------------------------------------------- tidy study frames
def test_old_names_are_the_new_functions():
    assert plot_hit_rate_curve is plots.hit_rate and plot_sessions is plots.sessions
    assert plots.plot_latency_cdf is plots.latency_cdf
    assert plots.plot_replica_load is plots.replica_load


def test_no_plot_function_changes_the_style(wl: Workload) -> None:
    # The style is the caller's: drawing leaves matplotlib's rc settings alone.
    import matplotlib as mpl

    before = dict(mpl.rcParams)
    plots.hit_rate(hit_rate_curve(wl, [1, 2]))
    plots.lengths(studies.requests(wl))
    assert dict(mpl.rcParams) == before


def test_hit_rate_from_the_study_frame_one_line_per_policy(wl: Workload) -> None:
    hr = studies.hit_rate_vs_capacity({"t": wl}, ["lru", "fifo"], low=512, high=8192)
    ax = plots.hit_rate(hr.drop(columns="trace"), ceiling=0.4)
    assert [line.get_label() for line in ax.get_lines()][:2] == ["LRU", "FIFO"]
    # the ceiling: a dotted line at 0.4 and the y axis clipped a little above it
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert [line.get_ydata()[0] for line in dotted] == [0.4]
    assert ax.get_ylim()[1] == pytest.approx(0.52)
    # a frame with a trace column draws one line per (trace, policy)
    assert [ln.get_label() for ln in plots.hit_rate(hr).get_lines()] == ["t LRU", "t FIFO"]


def test_mark_capacity_rings_the_point_and_writes_the_share() -> None:
    ax = plots.mark_capacity(
        {"capacity_tokens": 3e6, "token_hit_ratio": 0.139, "share_of_ceiling": 0.371}
    )
    ring = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert [(r.get_xdata()[0], r.get_ydata()[0]) for r in ring] == [(3e6, 0.139)]
    assert ax.texts[0].get_text() == "3M-token cache:\n13.9% = 37% of ceiling"


def test_reuse_distance_of_every_reference_tops_out_at_the_reuse_share() -> None:
    # blocks 1, 2, 1: one of three references repeats, at 1024 tokens
    wl = Workload.from_requests([0, 1, 2], [512] * 3, [1] * 3, [[1], [2], [1]])
    ax = plots.reuse_distance(studies.reuse_distances(wl), mark_tokens=3e6)
    (line,) = ax.get_lines()[:1]
    assert line.get_xdata().tolist() == [1024.0]
    assert line.get_ydata().tolist() == pytest.approx([1 / 3])
    assert ax.get_ylabel() == "fraction of block references"
    assert ax.get_xlabel() == "LRU stack distance (tokens)"


def test_lengths_and_arrivals_by_hand() -> None:
    wl = Workload.from_requests([0, 10_000, 20_000, 70_000, 80_000], [300, 100, 200, 50, 50], [5] * 5)
    req = studies.requests(wl)
    line = plots.lengths(req.head(3)).get_lines()[0]
    assert line.get_xdata().tolist() == [100, 200, 300]
    assert line.get_ydata().tolist() == pytest.approx([1 / 3, 2 / 3, 1])
    # 600 prompt tokens in [0, 60 s) -> 10 tokens/s; 100 in the last 20 s -> 5/s
    tokens = plots.arrivals(req, "tokens").get_lines()[0]
    assert tokens.get_ydata().tolist() == pytest.approx([10.0, 5.0])
    with pytest.raises(ValueError, match="what"):
        plots.arrivals(req, "bytes")


def test_sessions_from_the_request_frame_equals_from_sessions(wl: Workload) -> None:
    a = plots.sessions(sessions(wl), kind="turns")
    b = plots.sessions(studies.requests(wl).drop(columns="trace"), kind="turns")
    assert a.get_lines()[0].get_xdata().tolist() == b.get_lines()[0].get_xdata().tolist()
    assert a.get_lines()[0].get_ydata().tolist() == b.get_lines()[0].get_ydata().tolist()


def test_latency_cdf_of_a_tidy_frame_one_line_per_hue() -> None:
    req = pd.DataFrame(
        {"routing": ["a", "a", "b", "b"], "ttft_ms": [1.0, 3.0, 2.0, np.nan]}
    )
    ax = plots.latency_cdf(req, quantile=None, palette={"a": "#000000"})
    steps = [ln for ln in ax.get_lines() if ln.get_label() in ("a", "b")]
    assert [ln.get_label() for ln in steps] == ["a", "b"]
    assert steps[0].get_color() == "#000000"
    assert steps[1].get_xdata().tolist() == [2.0]  # the NaN is left out


def test_quantile_dots_put_names_on_the_axis_and_values_on_a_log_axis() -> None:
    s = pd.DataFrame(
        {
            "trace": ["a", "a", "b", "b"],
            "routing": ["random", "longest_match"] * 2,
            "ttft_p99_ms": [100.0, 4e6, 200.0, 300.0],
        }
    )
    ax = plots.quantile_dots(s)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["random", "pure longest-match"]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "TTFT p99 (ms)"
    dots = [ln for ln in ax.get_lines() if ln.get_label() in ("a", "b")]
    assert [ln.get_xdata().tolist() for ln in dots] == [[100.0, 4e6], [200.0, 300.0]]
    # each dot sits on its category's row (a little above or below it)
    assert np.round(dots[0].get_ydata()).tolist() == [0, 1]


def test_replica_load_shows_idle_replicas() -> None:
    req = pd.DataFrame({"replica": [0, 0, 2, -1], "input_len": [1, 2, 3, 4]})
    ax = plots.replica_load(req, replicas=4)
    # replicas 0-3, then the one request no replica took (replica -1), labelled
    assert [p.get_height() for p in ax.patches] == [2, 0, 1, 0, 1]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3", "rejected"]
    ax = plots.replica_load(req, replicas=4, show_rejected=False)
    assert [p.get_height() for p in ax.patches] == [2, 0, 1, 0]
    ax = plots.replica_load(req, "input_tokens", replicas=4)  # tokens: rejected ones have none routed
    assert [p.get_height() for p in ax.patches] == [3, 0, 3, 0]
    with pytest.raises(ValueError, match="metric"):
        plots.replica_load(req, "watts")


def test_latency_legend_has_one_unit_and_counts_rejections() -> None:
    # before: "p99 1,193 s" next to "p99 2,361 ms" in one legend
    slow = pd.DataFrame({"ttft_ms": np.linspace(1e3, 1.2e6, 100), "status": "finished"})
    fast = pd.DataFrame({"ttft_ms": [100.0] * 98 + [2361.0, np.nan],
                         "status": ["finished"] * 99 + ["rejected"]})
    ax = plots.latency_cdf({"slow": slow, "fast": fast}, labels=str)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    p_slow = np.quantile(slow["ttft_ms"], 0.99) / 1000
    p_fast = np.quantile(fast["ttft_ms"].dropna(), 0.99) / 1000
    assert texts == [f"slow (p99 {p_slow:,.0f} s)", f"fast (p99 {p_fast:.1f} s; 1 rejected)"]
    assert ax.get_ylabel() == "fraction of finished requests"


def test_an_unnamed_run_has_no_blank_legend_entry() -> None:
    ax = plots.latency_cdf(pd.DataFrame({"ttft_ms": [10.0, 20.0, 40.0]}))
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["p99 39.6 ms"] and all(t.strip() and not t.startswith("(") for t in texts)


def test_a_narrow_log_latency_axis_has_no_crowded_labels() -> None:
    # TPOT between 6 and 40 ms: matplotlib labelled its minor ticks there, overlapping
    fig, axes = style.figure()
    ax = plots.latency_cdf(pd.DataFrame({"tpot_ms": np.linspace(6, 40, 50)}), "tpot_ms", ax=axes[0, 0])
    fig.canvas.draw()
    labels = [t for t in ax.get_xticklabels() if t.get_text() and 6 <= t.get_position()[0] <= 40]
    assert [t.get_text() for t in labels] == ["10", "20"]
    assert all(not t.get_text() for t in ax.xaxis.get_minorticklabels())


def test_local_vs_pooled_bars_keep_one_colour_per_placement() -> None:
    t = pd.DataFrame(
        {
            "cache": ["local"] * 3 + ["pooled"],
            "placement": ["random", "round_robin", "hash_first_block", "any"],
            "token_hit_ratio": [0.1, 0.2, 0.3, 0.5],
            "ceiling_token_hit_ratio": 0.6,
        }
    )
    a = plots.local_vs_pooled(t)
    b = plots.local_vs_pooled(t.iloc[[1, 0, 2, 3]])  # another order, same colours per rule
    colours = lambda ax: {  # noqa: E731
        tick.get_text(): patch.get_facecolor()
        for tick, patch in zip(ax.get_xticklabels(), ax.patches, strict=True)
    }
    assert colours(a) == colours(b)
    assert len(set(colours(a).values())) == 4
    assert [round(p.get_height(), 2) for p in a.patches] == [0.1, 0.2, 0.3, 0.5]


def test_teaching_panels() -> None:
    t = pd.DataFrame(
        {
            "knob": "kv_blocks",
            "value": [32, 64],
            "infinite_token_hit_ratio": [0.7, 0.7],
            "token_hit_ratio": [0.2, 0.5],
            "ttft_p50_ms": [30.0, 20.0],
            "ttft_p99_ms": [900.0, 300.0],
        }
    )
    hit = plots.teaching(t, "hit", axis_label="KV cache (blocks)", log_x=True)
    assert hit.get_xlabel() == "KV cache (blocks)" and hit.get_xscale() == "log"
    assert [ln.get_ydata().tolist() for ln in hit.get_lines()] == [[0.7, 0.7], [0.2, 0.5]]
    assert plots.teaching(t, "ttft").get_yscale() == "log"
    with pytest.raises(ValueError, match="what"):
        plots.teaching(t, "cost")


def test_style_context_restores_and_use_sets() -> None:
    import matplotlib as mpl

    before = mpl.rcParams["savefig.dpi"]
    with style.context():
        assert mpl.rcParams["savefig.dpi"] == style.DPI
    assert mpl.rcParams["savefig.dpi"] == before
    with mpl.rc_context():
        style.use()
        assert mpl.rcParams["font.size"] == style.RC_PARAMS["font.size"]
