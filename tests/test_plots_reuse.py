"""Reuse plot helpers: return the Axes they drew on, label units, one line per series."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from inferasim import Workload
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
    assert labels == ["conversation lru", "conversation opt", "synthetic lru", "synthetic opt"]
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
